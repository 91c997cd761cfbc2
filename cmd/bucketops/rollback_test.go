package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bucketops/bucketops/floor"
	"github.com/bucketops/bucketops/policy/watch"
	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/secrets"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/store/storetest"
	"github.com/bucketops/bucketops/webhook"
)

// signedBridge is the bridge as run with a trust policy (prod: require
// signed by key ci), its rollback floors in the bucket, and the CLI
// pointed at the same bucket.
type signedBridge struct {
	st     *store.Store
	bucket *storetest.Bucket
	signer provenance.Signer
	trust  string
}

func startSignedBridge(t *testing.T) *signedBridge {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(nil)
	sb := &signedBridge{signer: provenance.NewKeySigner(priv)}
	sb.trust = trustPolicy(t, sb.signer.Public())
	sb.st, sb.bucket = startAPIWith(t, func(c *webhook.Config) { sb.configure(t, c, c.Releases.(*store.Store)) })
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(sb.bucket.URL, "http://"))
	t.Setenv("BUCKETOPS_BUCKET", "gs://"+storetest.BucketName)
	return sb
}

func (sb *signedBridge) configure(t *testing.T, c *webhook.Config, st *store.Store) {
	reg := prometheus.NewRegistry()
	w, err := watch.New("trust", sb.trust, provenance.TrustParser(t.Context(), nil), slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	c.Trust, c.Registry = w, reg
	c.Floors = floor.New(st.Client(), st.Location())
}

// restart starts another bridge on the same bucket, with nothing in
// memory from the first, and points the plugin at it: a restart, or
// another replica.
func (sb *signedBridge) restart(t *testing.T) {
	t.Helper()
	dec, err := secrets.NewDecrypter(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := webhook.Config{
		Releases: sb.st, Renderer: dec, Logger: slog.New(slog.DiscardHandler),
		Tokens: []webhook.Token{webhook.NewToken(webhook.RolePlugin, testPluginToken)}, CacheBytes: 1 << 20,
	}
	sb.configure(t, &cfg, sb.bucket.Store(t, ""))
	srv, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Routes())
	t.Cleanup(hs.Close)
	t.Setenv("BUCKETOPS_BRIDGE", hs.URL)
}

// push publishes a signed release of app holding value.
func (sb *signedBridge) push(t *testing.T, app, value string) store.Release {
	t.Helper()
	rel, err := render.AssembleStream("stdin", strings.NewReader(configMap("a", value)))
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.st.Publish(t.Context(), app, store.Publication{Data: rel.Bytes, Resources: rel.Resources(), Author: "ci", Sign: provenance.Sign(sb.signer)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Release
}

// generate is Argo CD asking for app's manifests, at generation gen (0:
// the head; Argo CD pins each request to the revision it resolved).
func generate(t *testing.T, app string, gen int64) result {
	t.Helper()
	t.Setenv("PARAM_APP", app)
	t.Setenv("PARAM_GENERATION", "")
	if gen != 0 {
		t.Setenv("PARAM_GENERATION", fmt.Sprint(gen))
	}
	return bucketops(t, "", "plugin", "generate")
}

// fiveServed signs five releases of app, each served by the bridge as
// Argo CD would after each publish.
func (sb *signedBridge) fiveServed(t *testing.T, app string) []store.Release {
	t.Helper()
	var hist []store.Release
	for i := range 5 {
		hist = append(hist, sb.push(t, app, fmt.Sprint("build-", i+1)))
		if out := generate(t, app, 0).must(t); !strings.Contains(out.stdout, fmt.Sprint("build-", i+1)) {
			t.Fatalf("release %d served %q", i+1, out.stdout)
		}
	}
	return hist
}

func refused(t *testing.T, r result, what string) {
	t.Helper()
	if r.code == 0 || r.stdout != "" {
		t.Fatalf("%s: exit %d with stdout %q; want a refusal and nothing on stdout", what, r.code, r.stdout)
	}
	if !strings.Contains(r.stderr, "rollback_refused") || !strings.Contains(r.stderr, "rollback floor") {
		t.Errorf("%s: stderr doesn't say rollback_refused and name the floor: %s", what, r.stderr)
	}
}

// The reproduction of issue 24 item 3: sign five releases, delete
// generations 2..5, copy release 2 back. Release 2's signature is intact
// and chains to release 1, so only the floor tells it from a real release.
func TestRollbackByTruncatingTheTailIsRefused(t *testing.T) {
	sb := startSignedBridge(t)
	const app = "prod/payments"
	hist := sb.fiveServed(t, app)
	object := app + "/manifests.yaml"

	// What a pusher with delete rights does, with no signing key.
	sb.bucket.CopyObject(t, object, hist[1].Generation, "scratch/kept")
	for _, r := range hist[1:] {
		sb.bucket.DeleteGeneration(t, object, r.Generation)
	}
	copied := sb.bucket.CopyObject(t, "scratch/kept", 0, object)

	refused(t, generate(t, app, 0), "release 2 copied back as the head")
	refused(t, generate(t, app, copied.Generation), "the copied head, pinned as Argo CD resolves it")
	refused(t, generate(t, app, hist[0].Generation), "release 1 pinned while the head is rolled back")

	r := bucketops(t, "", "verify", app, "--chain", "--trust-policy", sb.trust)
	if r.code != exitRolledBack || !strings.Contains(r.stdout, "truncated") || !strings.Contains(r.stdout, "rollback") ||
		!strings.Contains(r.stdout, fmt.Sprintf("%s@%d", app, hist[4].Generation)) {
		t.Errorf("verify --chain: exit %d, want %d naming the deleted floor %s@%d and the rolled back head:\n%s%s", r.code, exitRolledBack, app, hist[4].Generation, r.stdout, r.stderr)
	}
	if r := bucketops(t, "", "verify", app, "--trust-policy", sb.trust); r.code != exitRolledBack || !strings.Contains(r.stdout, "rollback") {
		t.Errorf("verify of the head: exit %d, want %d naming the rollback:\n%s%s", r.code, exitRolledBack, r.stdout, r.stderr)
	}
	// A deliberate, signed rollback is a new release chained to the head:
	// served.
	sb.push(t, app, "build-2-again")
	if out := generate(t, app, 0).must(t); !strings.Contains(out.stdout, "build-2-again") {
		t.Errorf("a signed release on top of the rolled back head printed %q", out.stdout)
	}
}

// truncate does what a holder of delete rights can to make hist[keep] the
// head again without a signing key: delete it and every release after
// it (GCS leaves no live object when the live generation is deleted), then
// copy the kept bytes and metadata back as a new generation.
func (sb *signedBridge) truncate(t *testing.T, app string, hist []store.Release, keep int) int64 {
	t.Helper()
	object := app + "/manifests.yaml"
	sb.bucket.CopyObject(t, object, hist[keep].Generation, "scratch/"+app)
	for _, r := range hist[keep:] {
		err := sb.bucket.Client.Bucket(storetest.BucketName).Object(object).Generation(r.Generation).Delete(t.Context())
		if err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
			t.Fatal(err)
		}
	}
	return sb.bucket.CopyObject(t, "scratch/"+app, 0, object).Generation
}

func TestHeadDeletedBelowTheFloorIsRefused(t *testing.T) {
	sb := startSignedBridge(t)
	const app = "prod/web"
	hist := sb.fiveServed(t, app)
	object := app + "/manifests.yaml"
	// Argo CD may pin an older release while the head is intact.
	if out := generate(t, app, hist[2].Generation).must(t); !strings.Contains(out.stdout, "build-3") {
		t.Errorf("release 3 pinned under an intact head printed %q", out.stdout)
	}
	// Releases 4 and 5 deleted: no head at all, and an older release
	// pinned is refused with it.
	sb.bucket.DeleteGeneration(t, object, hist[4].Generation)
	sb.bucket.DeleteGeneration(t, object, hist[3].Generation)
	refused(t, generate(t, app, hist[2].Generation), "release 3 pinned after 4 and 5 were deleted")
	// Release 3 restored as the head.
	sb.truncate(t, app, hist, 2)
	refused(t, generate(t, app, 0), "release 3 restored as the head")
	// Deleting the floor object too changes nothing: it comes back from
	// its own versions.
	f := floor.New(sb.bucket.Client, store.Location{Bucket: storetest.BucketName})
	if err := sb.bucket.Client.Bucket(storetest.BucketName).Object(f.ObjectName(app)).Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
	refused(t, generate(t, app, 0), "the restored head after the floor object was deleted")
	if r := bucketops(t, "", "verify", app, "--chain", "--trust-policy", sb.trust); r.code != exitRolledBack || !strings.Contains(r.stdout, "older than the rollback floor") {
		t.Errorf("verify --chain: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestRollbackFloorSurvivesARestart(t *testing.T) {
	sb := startSignedBridge(t)
	const app = "prod/api"
	hist := sb.fiveServed(t, app)
	sb.truncate(t, app, hist, 3)
	sb.restart(t)
	refused(t, generate(t, app, 0), "release 4 restored as the head, asked of a bridge started afterwards")
}

// A floor the bridge can't read or write (no IAM on .bucketops/floor/)
// fails closed: nothing is served under require: signed, and the error
// says what the bridge needs.
func TestAFloorTheBridgeCantWriteFailsClosed(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(nil)
	sb := &signedBridge{signer: provenance.NewKeySigner(priv)}
	sb.trust = trustPolicy(t, sb.signer.Public())
	sb.st, sb.bucket = startAPIWith(t, func(c *webhook.Config) {
		st := c.Releases.(*store.Store)
		sb.configure(t, c, st)
		c.Floors = floor.New(st.Client(), store.Location{Bucket: "no-such-bucket"})
	})
	sb.push(t, "prod/web", "1")
	r := generate(t, "prod/web", 0)
	if r.code == 0 || r.stdout != "" || !strings.Contains(r.stderr, "floor_unavailable") || !strings.Contains(r.stderr, floor.Dir) {
		t.Errorf("exit %d, stdout %q, stderr %s; want floor_unavailable naming %s and nothing served", r.code, r.stdout, r.stderr, floor.Dir)
	}
	// Apps the trust policy doesn't require signatures of don't need it.
	push := func(app string) {
		rel, _ := render.AssembleStream("stdin", strings.NewReader(configMap("a", "1")))
		if _, err := sb.st.Publish(t.Context(), app, store.Publication{Data: rel.Bytes, Resources: rel.Resources()}); err != nil {
			t.Fatal(err)
		}
	}
	push("sandbox/web")
	generate(t, "sandbox/web", 0).must(t)
}
