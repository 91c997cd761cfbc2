//go:build browser

package ui_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/render/sopstest"
)

// TestAuditorWalk drives Debian's chromium through the pages of a bridge in
// local mode, as an auditor answering "what was live at T, who published
// it, what changed": log in, open an app, page through its timeline, open
// a release, compare two, look at a time, download the activity as CSV.
// No page's HTML may hold the seeded Secret's plaintext. With
// BUCKETOPS_UI_SCREENSHOTS=DIR it saves a screenshot of each page there
// (make test-ui UPDATE_SCREENSHOTS=1 writes docs/ui/).
func TestAuditorWalk(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: apt-get install -y chromium (make test-ui does)")
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "github.com/bucketops/bucketops/cmd/bucketops", "github.com/bucketops/bucketops/cmd/bucketops-bridge")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	// Signing: a key the bridge's trust policy trusts for prod/signed, and
	// another it doesn't; every other app is left unverified.
	keyDir := t.TempDir()
	signing, trustPolicy := signingSetup(t, keyDir)
	env, stop := startLocalBridge(t, filepath.Join(bin, "bucketops-bridge"), "--trust-policy", trustPolicy)
	defer stop()
	cli := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "bucketops"), args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bucketops %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// History: prod/payments with a SOPS Secret, a few releases; prod/api
	// with more than a page of them.
	const plaintext = "s3cr3t-that-must-never-show"
	keys := sopstest.NewAgeKeys(t, 1)
	secret := string(sopstest.EncryptSecret(t, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: payments\nstringData:\n  password: "+plaintext+"\n", keys[0].Recipient().String()))
	cm := func(name, v string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: payments\ndata:\n  mode: %q\n", name, v)
	}
	cli(cm("settings", "one")+"---\n"+secret, "push", "prod/payments", "-", "--sequence", "1", "--author", "alice@example.com", "-m", "first release", "--source", "https://ci.example.com/payments/1")
	time.Sleep(1100 * time.Millisecond) // a second between, so "as of" has a moment to point at
	between := time.Now().UTC()
	time.Sleep(1100 * time.Millisecond)
	cli(cm("settings", "two")+"---\n"+cm("feature-flags", "on")+"---\n"+secret, "push", "prod/payments", "-", "--sequence", "2", "--author", "bob@example.com", "-m", "turn the flags on", "--source", "https://ci.example.com/payments/2")
	for i := 1; i <= 60; i++ {
		cli(cm("api", fmt.Sprint(i)), "push", "prod/api", "-", "--sequence", fmt.Sprint(i), "--author", "ci-bot")
	}
	// prod/signed: a verified release, an unsigned one, and one signed by a
	// key the policy doesn't trust.
	cli(cm("signed", "1"), "push", "prod/signed", "-", "--sequence", "1", "--sign-key", signing["ci"])
	cli(cm("signed", "2"), "push", "prod/signed", "-", "--sequence", "2")
	cli(cm("signed", "3"), "push", "prod/signed", "-", "--sequence", "3", "--sign-key", signing["intruder"])
	var token, base string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "BUCKETOPS_TOKEN_FILE="); ok {
			b, err := os.ReadFile(v)
			if err != nil {
				t.Fatal(err)
			}
			token = strings.TrimSpace(string(b))
		}
		if v, ok := strings.CutPrefix(kv, "BUCKETOPS_BRIDGE="); ok {
			base = v
		}
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.WindowSize(1280, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // chromium refuses to run as root with its sandbox
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelTimeout()

	shots := os.Getenv("BUCKETOPS_UI_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	os.MkdirAll(shots, 0o755)
	// check runs after every page: it saves a screenshot and looks for the
	// Secret's plaintext in the page's HTML.
	check := func(name string) {
		t.Helper()
		html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Contains(html, plaintext) {
			t.Errorf("%s: the page shows the Secret's plaintext", name)
		}
		if strings.Contains(html, token) {
			t.Errorf("%s: the page shows the token", name)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}

	// Log in: the first page sends us to the form, and back after.
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/apps/prod/payments/-/releases"),
		chromedp.WaitVisible(chromedp.ID("token")),
	))
	check("1-login")
	must(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("timeline")),
	))
	location, err := chromedp.Run(ctx, chromedp.Location())
	must(t, err)
	if !strings.HasSuffix(location, "/ui/apps/prod/payments/-/releases") {
		t.Errorf("after login: at %s, want back at the timeline asked for", location)
	}
	if s := text("#timeline"); !strings.Contains(s, "alice@example.com") || !strings.Contains(s, "turn the flags on") {
		t.Errorf("the timeline shows %q", s)
	}
	// The local-mode bridge has no Argo CD: deploys are unknown, not guessed.
	if s := text("#timeline"); !strings.Contains(s, "deploys unknown (no Argo CD)") || strings.Contains(s, "never deployed") {
		t.Errorf("the timeline's deploy column without Argo CD: %q", s)
	}
	check("3-timeline")

	// Each release's signature, judged by the bridge's trust policy.
	must(t, chromedp.Do(ctx, chromedp.Navigate(base+"/ui/apps/prod/signed/-/releases"), chromedp.WaitVisible(chromedp.ID("timeline"))))
	if s := text("#timeline"); strings.Count(s, "verified (ci)") != 1 || strings.Count(s, "unsigned") != 1 || strings.Count(s, "broken: unknown_key") != 1 {
		t.Errorf("the signed app's timeline labels its releases %q, want one verified (ci), one unsigned, one broken: unknown_key", s)
	}
	if s := text("#timeline"); strings.Contains(s, "not checked") {
		t.Errorf("a release under require: signed is not checked: %q", s)
	}
	check("8-signatures")
	must(t, chromedp.Do(ctx, chromedp.Navigate(base+"/ui/apps/prod/payments/-/releases"), chromedp.WaitVisible(chromedp.ID("timeline"))))
	if s := text("#timeline"); strings.Count(s, "not checked") != 2 {
		t.Errorf("under require: off, the timeline labels the releases %q, want not checked", s)
	}

	// The apps, as a tree.
	must(t, chromedp.Do(ctx, chromedp.Navigate(base+"/ui/apps"), chromedp.WaitVisible(chromedp.CSS(".app-link"))))
	if s := text("main"); !strings.Contains(s, "prod/") || !strings.Contains(s, "payments") || !strings.Contains(s, "api") {
		t.Errorf("the apps page shows %q", s)
	}
	check("2-apps")

	// Page through a long timeline.
	must(t, chromedp.Do(ctx, chromedp.Navigate(base+"/ui/apps/prod/api/-/releases"), chromedp.WaitVisible(chromedp.ID("older")),
		chromedp.Click(chromedp.ID("older")), chromedp.WaitVisible(chromedp.ID("newer"))))
	if s := text("#page"); s != "page 2 of 2" {
		t.Errorf("after older: %q", s)
	}

	// A release: its record and objects, the Secret redacted.
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/apps/prod/payments/-/releases"),
		chromedp.WaitVisible(chromedp.CSS(".release-link")),
		chromedp.Click(chromedp.CSS(".release-link")),
		chromedp.WaitVisible(chromedp.ID("release")),
	))
	if s := text("main"); !strings.Contains(s, "Secret payments/db") || !strings.Contains(s, "redacted sha256:") || text("#author") != "bob@example.com" {
		t.Errorf("the release page shows %q", s)
	}
	check("4-release")

	// Compare with the previous release and read the diff.
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.ID("compare-previous")), chromedp.WaitVisible(chromedp.ID("summary"))))
	if s := text("#summary"); s != "1 added, 0 removed, 1 changed, 1 unchanged." {
		t.Errorf("the diff's summary: %q", s)
	}
	if s := text("main"); !strings.Contains(s, `+  mode: "two"`) || !strings.Contains(s, "added ConfigMap payments/feature-flags") {
		t.Errorf("the diff shows %q", s)
	}
	check("5-diff")

	// What was live between the two releases.
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/asof"),
		chromedp.WaitVisible(chromedp.ID("t")),
		chromedp.SendKeys(chromedp.ID("t"), between.Format(time.RFC3339)),
		chromedp.Click(chromedp.ID("asof-go")),
		chromedp.WaitVisible(chromedp.ID("asof")),
	))
	if s := text("#asof"); !strings.Contains(s, "alice@example.com") || strings.Contains(s, "bob@example.com") || !strings.Contains(s, "not published yet") {
		t.Errorf("as of %s: %q, want the first payments release and prod/api not published yet", between.Format(time.RFC3339), s)
	}
	if s := text("#asof"); !strings.Contains(s, "deploys unknown (no Argo CD)") {
		t.Errorf("as of %s without Argo CD: %q, want live in the cluster unknown", between.Format(time.RFC3339), s)
	}
	asofURL, err := chromedp.Run(ctx, chromedp.Location())
	must(t, err)
	if !strings.Contains(asofURL, "/ui/asof?t=") {
		t.Errorf("the as-of page's permalink is %s", asofURL)
	}
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(".asof-release")), chromedp.WaitVisible(chromedp.ID("release"))))
	if s := text("#author"); s != "alice@example.com" {
		t.Errorf("the release live then was published by %q", s)
	}
	must(t, chromedp.Do(ctx, chromedp.Navigate(asofURL), chromedp.WaitVisible(chromedp.ID("asof"))))
	check("6-asof")

	// The activity, and its CSV.
	downloads := t.TempDir()
	_, err = chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads})
	must(t, err)
	must(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/activity?prefix=prod/payments"),
		chromedp.WaitVisible(chromedp.ID("activity")),
	))
	check("7-activity")
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.ID("csv"))))
	var csvFile string
	for deadline := time.Now().Add(30 * time.Second); csvFile == "" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		m, _ := filepath.Glob(filepath.Join(downloads, "*.csv"))
		if len(m) == 1 {
			csvFile = m[0]
		}
	}
	if csvFile == "" {
		t.Fatal("the CSV never downloaded")
	}
	data, _ := os.ReadFile(csvFile)
	if lines := strings.Split(strings.TrimSpace(string(data)), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "time,app,generation") || !strings.Contains(lines[2], "alice@example.com") {
		t.Errorf("the CSV:\n%s", data)
	}

	// Logging out ends it.
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(".logout button")), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.Navigate(base+"/ui/apps"), chromedp.WaitVisible(chromedp.ID("token"))))
}

// signingSetup writes two signing keys to dir, ci and intruder, and a
// trust policy that requires ci's signature under prod/signed and leaves
// every other app unverified. It returns the private key files by name
// and the policy file.
func signingSetup(t *testing.T, dir string) (map[string]string, string) {
	t.Helper()
	keys := map[string]string{}
	var ciPub []byte
	for _, name := range []string{"ci", "intruder"} {
		priv, pub, err := provenance.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		keys[name] = filepath.Join(dir, name+".key")
		if err := os.WriteFile(keys[name], priv, 0o600); err != nil {
			t.Fatal(err)
		}
		if name == "ci" {
			ciPub = pub
		}
	}
	policy := filepath.Join(dir, "trust.yaml")
	doc := "keys:\n  ci: |\n    " + strings.ReplaceAll(strings.TrimSpace(string(ciPub)), "\n", "\n    ") +
		"\nrules:\n  - {prefix: prod/signed, require: signed, keys: [ci]}\n  - {prefix: \"\", require: \"off\"}\n"
	if err := os.WriteFile(policy, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return keys, policy
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// startLocalBridge runs the bridge in local mode on a free port and returns
// its export lines; stop kills it by PID.
func startLocalBridge(t *testing.T, bin string, args ...string) ([]string, func()) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	var env []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if kv, ok := strings.CutPrefix(line, "export "); ok {
			env = append(env, kv)
		}
		if strings.HasPrefix(line, "# bridge: ") {
			go func() {
				for sc.Scan() {
				}
			}()
			return env, stop
		}
	}
	stop()
	t.Fatal("the bridge printed no environment")
	return nil, nil
}
