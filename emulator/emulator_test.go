package emulator_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/bucketops/bucketops/emulator"
	"github.com/bucketops/bucketops/logtest"
)

const manifests = "prod/payments/manifests.yaml"

func start(t *testing.T, cfg emulator.Config) *emulator.Emulator {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	e, err := emulator.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// client talks to e over HTTP like the CLI and the bridge do. Every call has
// a deadline: a 500 would otherwise be retried for a long time.
func client(t *testing.T, e *emulator.Emulator) *storage.Client {
	t.Helper()
	c, err := storage.NewClient(t.Context(),
		option.WithEndpoint(e.URL()+"/storage/v1/"),
		option.WithoutAuthentication(),
		storage.WithJSONReads(),
	)
	if err != nil {
		t.Fatalf("storage.NewClient: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// write publishes one generation of name under cond, as bucketops push does.
func write(ctx context.Context, o *storage.ObjectHandle, cond storage.Conditions, content string, meta map[string]string) (*storage.ObjectAttrs, error) {
	w := o.If(cond).NewWriter(ctx)
	w.ContentType = "application/yaml"
	w.Metadata = meta
	if _, err := io.WriteString(w, content); err != nil {
		w.Close()
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return w.Attrs(), nil
}

func mustWrite(t *testing.T, o *storage.ObjectHandle, cond storage.Conditions, content string, meta map[string]string) *storage.ObjectAttrs {
	t.Helper()
	attrs, err := write(ctx(t), o, cond, content, meta)
	if err != nil {
		t.Fatalf("write %s: %v", o.ObjectName(), err)
	}
	return attrs
}

func read(t *testing.T, o *storage.ObjectHandle) string {
	t.Helper()
	r, err := o.NewReader(ctx(t))
	if err != nil {
		t.Fatalf("read %s: %v", o.ObjectName(), err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", o.ObjectName(), err)
	}
	return string(b)
}

// version is what a listing with versions says about one generation.
type version struct {
	Name        string
	Generation  int64
	Live        bool
	Content     string
	ContentType string
	Metadata    map[string]string
	Size        int64
	MD5         string
	Created     time.Time
	Updated     time.Time
	Deleted     time.Time
}

func history(t *testing.T, c *storage.Client, bucket string) []version {
	t.Helper()
	b := c.Bucket(bucket)
	var vs []version
	it := b.Objects(ctx(t), &storage.Query{Versions: true})
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatalf("list versions: %v", err)
		}
		vs = append(vs, version{
			Name:        a.Name,
			Generation:  a.Generation,
			Live:        a.Deleted.IsZero(),
			Content:     read(t, b.Object(a.Name).Generation(a.Generation)),
			ContentType: a.ContentType,
			Metadata:    a.Metadata,
			Size:        a.Size,
			MD5:         hex.EncodeToString(a.MD5),
			Created:     a.Created,
			Updated:     a.Updated,
			Deleted:     a.Deleted,
		})
	}
	slices.SortFunc(vs, func(a, b version) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return int(a.Generation - b.Generation)
	})
	return vs
}

func isStatus(err error, code int) bool {
	var gerr *googleapi.Error
	return errors.As(err, &gerr) && gerr.Code == code
}

// indexFiles returns the content of every object.json under dir.
func indexFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "object.json" {
			return err
		}
		b, err := os.ReadFile(path)
		files[path] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestRestartKeepsEveryGeneration(t *testing.T) {
	dir := t.TempDir()
	e := start(t, emulator.Config{Dir: dir})
	c := client(t, e)
	b := c.Bucket(e.Bucket())

	o := b.Object(manifests)
	g1 := mustWrite(t, o, storage.Conditions{DoesNotExist: true}, "gen: 1\n", map[string]string{"bucketops-digest": "sha256:1", "bucketops-sequence": "1"})
	g2 := mustWrite(t, o, storage.Conditions{GenerationMatch: g1.Generation}, "gen: 2\n", map[string]string{"bucketops-digest": "sha256:2", "bucketops-sequence": "2"})
	g3 := mustWrite(t, o, storage.Conditions{GenerationMatch: g2.Generation}, "gen: 3\n", map[string]string{"bucketops-digest": "sha256:3", "bucketops-sequence": "3"})
	mustWrite(t, b.Object("prod/billing/manifests.yaml"), storage.Conditions{DoesNotExist: true}, "billing\n", map[string]string{"bucketops-digest": "sha256:b"})
	retired := b.Object("staging/web/manifests.yaml")
	mustWrite(t, retired, storage.Conditions{DoesNotExist: true}, "web\n", nil)
	if err := retired.Delete(ctx(t)); err != nil {
		t.Fatalf("delete: %v", err)
	}
	// An empty object, like a tombstone release.
	mustWrite(t, b.Object("prod/old/manifests.yaml"), storage.Conditions{DoesNotExist: true}, "", map[string]string{"bucketops-kind": "tombstone"})

	before := history(t, c, e.Bucket())
	if len(before) != 6 {
		t.Fatalf("before restart: %d versions, want 6: %+v", len(before), before)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	onDisk := indexFiles(t, dir)

	e = start(t, emulator.Config{Dir: dir})
	c = client(t, e)
	b = c.Bucket(e.Bucket())
	o = b.Object(manifests)

	if got := indexFiles(t, dir); !reflect.DeepEqual(got, onDisk) {
		t.Errorf("starting rewrote the index files:\nbefore %v\nafter  %v", onDisk, got)
	}
	after := history(t, c, e.Bucket())
	if !reflect.DeepEqual(after, before) {
		t.Errorf("history changed across restart:\nbefore %+v\nafter  %+v", before, after)
	}
	for _, g := range []*storage.ObjectAttrs{g1, g2, g3} {
		want := fmt.Sprintf("gen: %d\n", slices.Index([]*storage.ObjectAttrs{g1, g2, g3}, g)+1)
		if got := read(t, o.Generation(g.Generation)); got != want {
			t.Errorf("generation %d reads %q, want %q", g.Generation, got, want)
		}
	}
	if head, err := o.Attrs(ctx(t)); err != nil || head.Generation != g3.Generation {
		t.Errorf("live generation after restart: %v, %v; want %d", head, err, g3.Generation)
	}
	if _, err := b.Object(retired.ObjectName()).Attrs(ctx(t)); !errors.Is(err, storage.ErrObjectNotExist) {
		t.Errorf("deleted object after restart: err = %v, want ErrObjectNotExist", err)
	}

	if _, err := write(ctx(t), o, storage.Conditions{GenerationMatch: g2.Generation}, "stale\n", nil); !isStatus(err, http.StatusPreconditionFailed) {
		t.Errorf("write with a stale precondition: err = %v, want 412", err)
	}
	g4 := mustWrite(t, o, storage.Conditions{GenerationMatch: g3.Generation}, "gen: 4\n", nil)
	if g4.Generation <= g3.Generation {
		t.Errorf("new generation %d is not above the restored live generation %d", g4.Generation, g3.Generation)
	}
	if got := read(t, o); got != "gen: 4\n" {
		t.Errorf("head reads %q after the new write", got)
	}
}

func TestWriteIsOnDiskWhenItReturns(t *testing.T) {
	dir := t.TempDir()
	e := start(t, emulator.Config{Dir: dir})
	b := client(t, e).Bucket(e.Bucket())
	o := b.Object(manifests)
	g1 := mustWrite(t, o, storage.Conditions{DoesNotExist: true}, "one\n", nil)
	g2 := mustWrite(t, o, storage.Conditions{GenerationMatch: g1.Generation}, "two\n", nil)
	gone := b.Object("prod/gone/manifests.yaml")
	mustWrite(t, gone, storage.Conditions{DoesNotExist: true}, "gone\n", nil)
	if err := gone.Delete(ctx(t)); err != nil {
		t.Fatal(err)
	}
	patched := b.Object("prod/patched/manifests.yaml")
	p1 := mustWrite(t, patched, storage.Conditions{DoesNotExist: true}, "p1\n", nil)
	p2 := mustWrite(t, patched, storage.Conditions{GenerationMatch: p1.Generation}, "p2\n", map[string]string{"bucketops-author": "ci"})
	if _, err := patched.Update(ctx(t), storage.ObjectAttrsToUpdate{Metadata: map[string]string{"bucketops-message": "noted"}}); err != nil {
		t.Fatalf("update metadata: %v", err)
	}
	if err := patched.Generation(p1.Generation).Delete(ctx(t)); err != nil {
		t.Fatalf("delete generation %d: %v", p1.Generation, err)
	}

	// The first emulator is never closed: the copy is what a SIGKILL leaves.
	killed := t.TempDir()
	if err := os.CopyFS(killed, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	e2 := start(t, emulator.Config{Dir: killed})
	b2 := client(t, e2).Bucket(e2.Bucket())
	if got := read(t, b2.Object(manifests)); got != "two\n" {
		t.Errorf("head reads %q, want %q", got, "two\n")
	}
	if got := read(t, b2.Object(manifests).Generation(g1.Generation)); got != "one\n" {
		t.Errorf("generation 1 reads %q, want %q", got, "one\n")
	}
	if head, err := b2.Object(manifests).Attrs(ctx(t)); err != nil || head.Generation != g2.Generation {
		t.Errorf("head: %v, %v; want generation %d", head, err, g2.Generation)
	}
	if _, err := b2.Object(gone.ObjectName()).Attrs(ctx(t)); !errors.Is(err, storage.ErrObjectNotExist) {
		t.Errorf("deleted object: err = %v, want ErrObjectNotExist", err)
	}
	wantPatched := []version{{
		Name: patched.ObjectName(), Generation: p2.Generation, Live: true, Content: "p2\n",
		Metadata: map[string]string{"bucketops-author": "ci", "bucketops-message": "noted"},
	}}
	var gotPatched []version
	for _, v := range history(t, client(t, e2), e2.Bucket()) {
		if v.Name == patched.ObjectName() {
			gotPatched = append(gotPatched, version{Name: v.Name, Generation: v.Generation, Live: v.Live, Content: v.Content, Metadata: v.Metadata})
		}
	}
	if !reflect.DeepEqual(gotPatched, wantPatched) {
		t.Errorf("updated object after restart:\n got %+v\nwant %+v", gotPatched, wantPatched)
	}
}

func TestStartRefusesACorruptDir(t *testing.T) {
	// populated returns a directory holding two generations of manifests,
	// and the path of the object's directory in it.
	populated := func(t *testing.T) (string, string) {
		dir := t.TempDir()
		e := start(t, emulator.Config{Dir: dir})
		o := client(t, e).Bucket(e.Bucket()).Object(manifests)
		g1 := mustWrite(t, o, storage.Conditions{DoesNotExist: true}, "one\n", nil)
		mustWrite(t, o, storage.Conditions{GenerationMatch: g1.Generation}, "two\n", nil)
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(manifests))
		return dir, filepath.Join(dir, emulator.DefaultBucket, hex.EncodeToString(sum[:]))
	}
	contentFile := func(t *testing.T, objDir string) string {
		names, err := filepath.Glob(filepath.Join(objDir, "[0-9]*"))
		if err != nil || len(names) != 2 {
			t.Fatalf("content files: %v, %v", names, err)
		}
		return names[0]
	}
	tests := []struct {
		name    string
		corrupt func(t *testing.T, dir, objDir string) string // returns the file to blame
	}{
		{"an object.json that isn't JSON", func(t *testing.T, dir, objDir string) string {
			path := filepath.Join(objDir, "object.json")
			writeFile(t, path, "{\"name\": \"prod/pay")
			return path
		}},
		{"an object.json in the wrong directory", func(t *testing.T, dir, objDir string) string {
			path := filepath.Join(objDir, "object.json")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, path, strings.Replace(string(b), manifests, "prod/other/manifests.yaml", 1))
			return path
		}},
		{"a truncated content file", func(t *testing.T, dir, objDir string) string {
			path := contentFile(t, objDir)
			writeFile(t, path, "on")
			return path
		}},
		{"a content file with other bytes", func(t *testing.T, dir, objDir string) string {
			path := contentFile(t, objDir)
			writeFile(t, path, "ONE\n")
			return path
		}},
		{"a missing content file", func(t *testing.T, dir, objDir string) string {
			path := contentFile(t, objDir)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			return path
		}},
		{"a layout.json that isn't JSON", func(t *testing.T, dir, objDir string) string {
			path := filepath.Join(dir, "layout.json")
			writeFile(t, path, "layout 1")
			return path
		}},
		{"a layout this version can't read", func(t *testing.T, dir, objDir string) string {
			path := filepath.Join(dir, "layout.json")
			writeFile(t, path, `{"layout":2}`)
			return path
		}},
	}
	for _, tt := range tests {
		t.Run("Start names "+tt.name, func(t *testing.T) {
			dir, objDir := populated(t)
			blame := tt.corrupt(t, dir, objDir)
			e, err := emulator.Start(t.Context(), emulator.Config{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
			if err == nil {
				e.Close()
				t.Fatal("Start succeeded on a corrupt directory")
			}
			if !strings.Contains(err.Error(), blame) {
				t.Errorf("error %q doesn't name %s", err, blame)
			}
		})
	}

	t.Run("Start refuses a directory that isn't an emulator's", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "notes.txt"), "mine")
		e, err := emulator.Start(t.Context(), emulator.Config{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
		if err == nil {
			e.Close()
			t.Fatal("Start succeeded on a foreign directory")
		}
		if !strings.Contains(err.Error(), "layout.json") {
			t.Errorf("error %q doesn't say what's missing", err)
		}
	})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentWritesAllSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	e := start(t, emulator.Config{Dir: dir})
	b := client(t, e).Bucket(e.Bucket())

	const writers, perWriter = 16, 4
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				name := fmt.Sprintf("apps/w%02d/a%d/manifests.yaml", w, i)
				o := b.Object(name)
				a, err := write(ctx(t), o, storage.Conditions{DoesNotExist: true}, name+" 1", nil)
				if err == nil {
					_, err = write(ctx(t), o, storage.Conditions{GenerationMatch: a.Generation}, name+" 2", nil)
				}
				if err != nil {
					errs <- fmt.Errorf("write %s: %w", name, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Restart from what a SIGKILL would leave: every answered write.
	killed := t.TempDir()
	if err := os.CopyFS(killed, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	e = start(t, emulator.Config{Dir: killed})
	c := client(t, e)
	vs := history(t, c, e.Bucket())
	if len(vs) != 2*writers*perWriter {
		t.Errorf("%d versions after restart, want %d", len(vs), 2*writers*perWriter)
	}
	for w := range writers {
		for i := range perWriter {
			name := fmt.Sprintf("apps/w%02d/a%d/manifests.yaml", w, i)
			if got := read(t, c.Bucket(e.Bucket()).Object(name)); got != name+" 2" {
				t.Errorf("%s reads %q", name, got)
			}
		}
	}
}

func TestPortZeroGetsAPortAndCloseReleasesIt(t *testing.T) {
	e, err := emulator.Start(t.Context(), emulator.Config{Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(e.Host())
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("Host() = %q, want 127.0.0.1 and a real port", e.Host())
	}
	if e.URL() != "http://"+e.Host() {
		t.Errorf("URL() = %q, want http://%s", e.URL(), e.Host())
	}
	resp, err := http.Get(e.URL() + "/storage/v1/b/" + e.Bucket())
	if err != nil {
		t.Fatalf("GET bucket: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET bucket: %s", resp.Status)
	}

	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	ln, err := net.Listen("tcp", e.Host())
	if err != nil {
		t.Fatalf("port still held after Close: %v", err)
	}
	ln.Close()
}

func TestXMLReadsWorkThroughStorageEmulatorHost(t *testing.T) {
	e := start(t, emulator.Config{})
	mustWrite(t, client(t, e).Bucket(e.Bucket()).Object(manifests), storage.Conditions{DoesNotExist: true}, "xml\n", nil)

	// The CLI's setup: only the environment variable, default (XML) reads.
	t.Setenv("STORAGE_EMULATOR_HOST", e.Host())
	c, err := storage.NewClient(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := read(t, c.Bucket(e.Bucket()).Object(manifests)); got != "xml\n" {
		t.Errorf("XML read: %q", got)
	}
}

func TestMemoryOnlyBucketIsVersioned(t *testing.T) {
	e := start(t, emulator.Config{Bucket: "local-test"})
	c := client(t, e)
	o := c.Bucket("local-test").Object(manifests)
	g1 := mustWrite(t, o, storage.Conditions{DoesNotExist: true}, "one\n", nil)
	mustWrite(t, o, storage.Conditions{GenerationMatch: g1.Generation}, "two\n", nil)
	if _, err := write(ctx(t), o, storage.Conditions{GenerationMatch: g1.Generation}, "late\n", nil); !isStatus(err, http.StatusPreconditionFailed) {
		t.Errorf("stale write: err = %v, want 412", err)
	}
	if vs := history(t, c, "local-test"); len(vs) != 2 || vs[0].Live || !vs[1].Live {
		t.Errorf("history: %+v, want generation 1 noncurrent and 2 live", vs)
	}
}

func TestAFailedSaveIsLoudAndStopsWrites(t *testing.T) {
	dir := t.TempDir()
	logs := &logtest.Buffer{}
	e := start(t, emulator.Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	b := client(t, e).Bucket(e.Bucket())
	once := storage.WithPolicy(storage.RetryNever)

	// A file where the object's directory must go: writing it fails, even
	// as root.
	sum := sha256.Sum256([]byte(manifests))
	blocker := filepath.Join(dir, e.Bucket(), hex.EncodeToString(sum[:]))
	writeFile(t, blocker, "in the way")

	if _, err := write(ctx(t), b.Object(manifests).Retryer(once), storage.Conditions{DoesNotExist: true}, "one\n", nil); !isStatus(err, http.StatusInternalServerError) {
		t.Errorf("write that can't be saved: err = %v, want 500", err)
	}
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("no error logged; logs:\n%s", logs)
	}
	other := b.Object("prod/other/manifests.yaml").Retryer(once)
	if _, err := write(ctx(t), other, storage.Conditions{DoesNotExist: true}, "other\n", nil); !isStatus(err, http.StatusInternalServerError) {
		t.Errorf("write while the directory is failing: err = %v, want 500", err)
	}
	if _, err := e.Server().GetObject(e.Bucket(), other.ObjectName()); err == nil {
		t.Errorf("a write refused while failing was applied anyway")
	}

	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, other, storage.Conditions{DoesNotExist: true}, "other\n", nil)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e = start(t, emulator.Config{Dir: dir})
	b = client(t, e).Bucket(e.Bucket())
	for name, want := range map[string]string{manifests: "one\n", other.ObjectName(): "other\n"} {
		if got := read(t, b.Object(name)); got != want {
			t.Errorf("%s after recovery and restart reads %q, want %q", name, got, want)
		}
	}
}

func TestRequestsThatWouldBypassPersistenceAreRefused(t *testing.T) {
	e := start(t, emulator.Config{Dir: t.TempDir()})
	mustWrite(t, client(t, e).Bucket(e.Bucket()).Object(manifests), storage.Conditions{DoesNotExist: true}, "kept\n", nil)
	for _, req := range []struct{ method, path string }{
		{http.MethodPost, "/_internal/delete_all"},
		{http.MethodPut, "/_internal/reseed"},
		{http.MethodDelete, "/storage/v1/b/" + e.Bucket()},
		{http.MethodPatch, "/storage/v1/b/" + e.Bucket()},
	} {
		r, err := http.NewRequestWithContext(ctx(t), req.method, e.URL()+req.path, strings.NewReader(`{"versioning":{"enabled":false}}`))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s %s: %s, want 403", req.method, req.path, resp.Status)
		}
	}
	if _, err := e.Server().GetObject(e.Bucket(), manifests); err != nil {
		t.Errorf("object gone after refused requests: %v", err)
	}
}

func TestADirServesOneEmulatorAtATime(t *testing.T) {
	dir := t.TempDir()
	start(t, emulator.Config{Dir: dir})
	e, err := emulator.Start(t.Context(), emulator.Config{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		e.Close()
		t.Fatal("a second emulator started on a directory in use")
	}
	if !strings.Contains(err.Error(), "in use") {
		t.Errorf("error %q doesn't say the directory is in use", err)
	}
}

func TestValidate(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	tests := []struct {
		name string
		cfg  emulator.Config
		want []string // substrings of the error; none = valid
	}{
		{"defaults are valid", emulator.Config{Logger: logger}, nil},
		{"a full config is valid", emulator.Config{Addr: "127.0.0.1:4443", Bucket: "my-bucket.v2", Dir: "/tmp/x", Logger: logger}, nil},
		{"a missing logger is reported", emulator.Config{}, []string{"logger"}},
		{"an address without a port is reported", emulator.Config{Addr: "127.0.0.1", Logger: logger}, []string{"addr"}},
		{"an uppercase bucket is reported", emulator.Config{Bucket: "Bucket", Logger: logger}, []string{"bucket"}},
		{"a bucket with a slash is reported", emulator.Config{Bucket: "a/../b", Logger: logger}, []string{"bucket"}},
		{"a google bucket is reported", emulator.Config{Bucket: "my-google-bucket", Logger: logger}, []string{"google"}},
		{"a short bucket is reported", emulator.Config{Bucket: "ab", Logger: logger}, []string{"bucket"}},
		{"every problem is reported", emulator.Config{Addr: "nope", Bucket: "-x-"}, []string{"addr", "bucket", "logger"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Errorf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error about %v", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to mention %q", err, w)
				}
			}
		})
	}
}

func TestANameThatCantBeStoredDoesntBlockTheBucket(t *testing.T) {
	dir := t.TempDir()
	logs := &logtest.Buffer{}
	e := start(t, emulator.Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(logs, nil))})

	// A simple upload takes the name from the URL, so it can be any bytes.
	r, err := http.NewRequestWithContext(ctx(t), http.MethodPost,
		e.URL()+"/upload/storage/v1/b/"+e.Bucket()+"/o?uploadType=media&name=bad%FFname", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("upload: %s", resp.Status)
	}
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("no error logged for a name that can't be saved; logs:\n%s", logs)
	}
	mustWrite(t, client(t, e).Bucket(e.Bucket()).Object(manifests), storage.Conditions{DoesNotExist: true}, "fine\n", nil)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = start(t, emulator.Config{Dir: dir})
	if got := read(t, client(t, e).Bucket(e.Bucket()).Object(manifests)); got != "fine\n" {
		t.Errorf("after restart: %q", got)
	}
}
