package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// The recipes of docs/ci.md, by the file each names on its first line.
const (
	githubRecipe     = ".github/workflows/publish.yml"
	gitlabRecipe     = ".gitlab-ci.yml"
	cloudBuildRecipe = "cloudbuild.yaml"
)

// skipMarker starts a recipe step that can't run here.
const skipMarker = "# ci-recipe: skip"

// recipeSkips is every step the test expects to skip (a vendor's action
// the test doesn't emulate), so a recipe can't quietly stop being tested:
// skipping another step fails the test until it is added here. The steps
// that get and build the CLI run: the test serves the working tree as the
// bucketops repository (bucketopsSource), and nothing else puts a
// bucketops on PATH.
var recipeSkips = map[string][]string{
	githubRecipe:     {"Authenticate to Google Cloud", "Check out", "Set up Go"},
	gitlabRecipe:     nil,
	cloudBuildRecipe: nil,
}

// bucketopsRepository is the repository the recipes check out.
const bucketopsRepository = "bucketops/bucketops"

var (
	sourceOnce sync.Once
	sourceDir  string
	sourceErr  error
)

// bucketopsSource is a git repository holding the working tree (as its
// .gitignore has it) in one commit, tagged with each of tags: what the
// recipes clone as https://github.com/bucketops/bucketops.git at their
// BUCKETOPS_VERSION. The tags are added to the one repository the test
// run shares.
func bucketopsSource(t *testing.T, tags ...string) string {
	t.Helper()
	sourceOnce.Do(func() {
		root, err := filepath.Abs("../..")
		if err != nil {
			sourceErr = err
			return
		}
		dir, err := os.MkdirTemp("", "bucketops-source-")
		if err != nil {
			sourceErr = err
			return
		}
		git := func(args ...string) error {
			cmd := exec.Command("git", append([]string{"--git-dir", filepath.Join(dir, ".git"), "--work-tree", root,
				"-c", "user.name=ci-recipes", "-c", "user.email=ci-recipes@example.com", "-c", "commit.gpgsign=false"}, args...)...)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return nil
		}
		if out, err := exec.Command("git", "init", "--quiet", dir).CombinedOutput(); err != nil {
			sourceErr = fmt.Errorf("git init: %v\n%s (make test installs git)", err, out)
			return
		}
		if err := git("add", "--all"); err != nil {
			sourceErr = err
			return
		}
		sourceErr = git("commit", "--quiet", "--message", "the working tree")
		sourceDir = dir
	})
	if sourceErr != nil {
		t.Fatal(sourceErr)
	}
	for _, tag := range tags {
		cmd := exec.Command("git", "-C", sourceDir, "tag", "--force", tag)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git tag %s: %v\n%s", tag, err, out)
		}
	}
	return sourceDir
}

// cloneSource checks out the source at ref into dir, as actions/checkout
// does for repository: bucketops/bucketops.
func cloneSource(t *testing.T, ref, dir string) {
	t.Helper()
	src := bucketopsSource(t, ref)
	cmd := exec.Command("git", "clone", "--quiet", "--depth", "1", "--branch", ref, "file://"+src, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("checking out %s at %s: %v\n%s", bucketopsRepository, ref, err, out)
	}
}

// recipeApp is the app every recipe publishes.
const recipeApp = "prod/payments"

// TestCIRecipes runs the shell of docs/ci.md's three recipes as their CI
// systems would, with their variables and secrets, against a bridge in
// local mode wired to a fake Argo CD: each publishes at its build number
// and waits until Argo CD deployed the release (exit 0), and an older
// build run after a newer one is stale, which its publish function passes.
func TestCIRecipes(t *testing.T) {
	recipes := readRecipes(t, "../../docs/ci.md")

	t.Run("GitHub Actions publishes at the run number, summarises, and passes a stale rerun", func(t *testing.T) {
		var wf githubWorkflow
		decodeRecipe(t, recipes[githubRecipe], &wf)
		if wf.Permissions["id-token"] != "write" {
			t.Errorf("permissions %v: Workload Identity Federation needs id-token: write", wf.Permissions)
		}
		rig := startWithArgoCD(t, recipeApp)

		run := wf.run(t, rig, newWorkspace(t, "42"), 42)
		head := headRelease(t, rig)
		if head.Sequence != 42 || !strings.Contains(run.stdout, "deployed "+recipeApp+"@"+fmt.Sprint(head.Generation)) {
			t.Errorf("head %+v, want sequence 42, deployed; output:\n%s", head, run.stdout)
		}
		wantSummary := "| App | Generation | Digest | Status |\n|---|---|---|---|\n" +
			fmt.Sprintf("| %s | %d | `%s` | published, deployed |\n", recipeApp, head.Generation, head.Digest)
		if run.summary != wantSummary {
			t.Errorf("job summary:\n%s\nwant:\n%s", run.summary, wantSummary)
		}

		older := wf.run(t, rig, newWorkspace(t, "41"), 41)
		assertStale(t, rig, head, older)
		if !strings.HasSuffix(older.summary, fmt.Sprintf("| %s | - | `%s` | stale |\n", recipeApp, older.digest)) {
			t.Errorf("the older run's job summary:\n%s", older.summary)
		}
	})

	t.Run("GitLab CI exchanges its ID token, publishes at the pipeline's IID and keeps the JSON", func(t *testing.T) {
		var pipeline map[string]gitlabJob
		decodeRecipe(t, recipes[gitlabRecipe], &pipeline)
		job, ok := pipeline["publish"]
		if !ok {
			t.Fatalf("no job publish in %s", gitlabRecipe)
		}
		if job.Artifacts.When != "always" || !slices.Contains(job.Artifacts.Paths, "bucketops.json") {
			t.Errorf("artifacts %+v: want bucketops.json, always", job.Artifacts)
		}
		rig := startWithArgoCD(t, recipeApp)

		ws := newWorkspace(t, "7")
		run := job.run(t, rig, ws, 7)
		head := headRelease(t, rig)
		var status struct {
			App        string `json:"app"`
			Generation int64  `json:"generation"`
			State      string `json:"state"`
			Deployed   bool   `json:"deployed"`
		}
		artifact, err := os.ReadFile(filepath.Join(ws, "bucketops.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(artifact, &status); err != nil {
			t.Fatalf("bucketops.json: %v\n%s", err, artifact)
		}
		if head.Sequence != 7 || status.App != recipeApp || status.Generation != head.Generation || !status.Deployed || status.State != "deployed" {
			t.Errorf("head %+v, bucketops.json %s", head, artifact)
		}
		job.checkCredentials(t, run)

		// The next pipeline restores the job's cache: the CLI built by
		// this one, which it runs without cloning or building again.
		if job.Cache.Key == "" || len(job.Cache.Paths) == 0 || !strings.Contains(job.Cache.Key, "$BUCKETOPS_VERSION") {
			t.Errorf("cache %+v: want the CLI kept per BUCKETOPS_VERSION", job.Cache)
		}
		next := newWorkspace(t, "6")
		for _, p := range job.Cache.Paths {
			runShell(t, "restore the cache", ws, nil, "cp", "-R", filepath.Join(ws, p), filepath.Join(next, p))
		}
		assertStale(t, rig, head, job.run(t, rig, next, 6).recipeRun)
		if entries, _ := os.ReadDir(next); slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() == ".bucketops" }) {
			t.Errorf("the pipeline with the cache restored cloned bucketops again")
		}
	})

	t.Run("Cloud Build publishes at its start time and passes the build that started earlier but ends later", func(t *testing.T) {
		var build cloudBuild
		decodeRecipe(t, recipes[cloudBuildRecipe], &build)
		rig := startWithArgoCD(t, recipeApp)

		// The older build starts first: its first step records its start.
		older, newer := newWorkspace(t, "older"), newWorkspace(t, "newer")
		first := build.Steps[0].ID
		build.run(t, rig, older, func(id string) bool { return id == first })
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))

		run := build.run(t, rig, newer, nil)
		head := headRelease(t, rig)
		seq, err := os.ReadFile(filepath.Join(newer, ".bucketops-sequence"))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(head.Sequence) != strings.TrimSpace(string(seq)) || !strings.Contains(run.stdout, "deployed "+recipeApp+"@"+fmt.Sprint(head.Generation)) {
			t.Errorf("head %+v, the build recorded sequence %s; output:\n%s", head, seq, run.stdout)
		}
		if rel := rig.log(t, recipeApp); len(rel) != 1 {
			t.Fatalf("history %+v", rel)
		}

		assertStale(t, rig, head, build.run(t, rig, older, func(id string) bool { return id != first }))
	})
}

// readRecipes returns the YAML blocks of the markdown file whose first line
// names a recipe.
func readRecipes(t *testing.T, name string) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	recipes := map[string]string{}
	for _, m := range regexp.MustCompile("(?ms)^```yaml\n(.*?)^```").FindAllStringSubmatch(string(doc), -1) {
		first, _, _ := strings.Cut(m[1], "\n")
		if file, ok := strings.CutPrefix(first, "# "); ok {
			recipes[file] = m[1]
		}
	}
	for file := range recipeSkips {
		if recipes[file] == "" {
			t.Fatalf("%s has no yaml block starting with # %s", name, file)
		}
	}
	return recipes
}

func decodeRecipe(t *testing.T, text string, v any) {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(text))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("the recipe isn't the YAML expected: %v", err)
	}
}

// newWorkspace is a checkout whose build rendered one ConfigMap.
func newWorkspace(t *testing.T, value string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "manifests"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifests", "settings.yaml"), []byte(configMap(value)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// recipeRun is what a recipe's run left.
type recipeRun struct {
	stdout, stderr string
	summary        string // GitHub's job summary
	digest         string // of the workspace's manifests, from the summary
	skipped        []string
}

func headRelease(t *testing.T, rig *argoRig) logEntry {
	t.Helper()
	rel := rig.log(t, recipeApp)
	if len(rel) == 0 {
		t.Fatalf("%s has no release", recipeApp)
	}
	return rel[0]
}

// assertStale: the older build's push was refused as stale, and its
// publish function passed (the run returned); the newer head stands.
func assertStale(t *testing.T, rig *argoRig, head logEntry, older recipeRun) {
	t.Helper()
	if now := headRelease(t, rig); now != head {
		t.Errorf("after the older build the head is %+v, want %+v", now, head)
	}
	if !strings.Contains(older.stderr, "stale") {
		t.Errorf("the older build's push wasn't stale:\n%s", older.stderr)
	}
}

// ciEnv is the environment every CI system's shell starts from: this
// process's without its own CI's settings (Go, which go test puts on
// PATH, stays: the recipes' images have it), the local-mode bucket's
// emulator (GCS itself, not a CI setting), and a TMPDIR of its own. No
// bucketops is on PATH: the recipes build their own.
func ciEnv(t *testing.T, rig *argoRig) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if slices.ContainsFunc([]string{"GITHUB_", "GITLAB_", "CI_", "RUNNER_", "BUCKETOPS_", "GOOGLE_", "CLOUDSDK_"}, func(p string) bool { return strings.HasPrefix(k, p) }) ||
			slices.Contains([]string{"CI", "BUILD_ID", "PROJECT_ID", "BUILDKITE", "CIRCLECI", "JENKINS_URL", "STORAGE_EMULATOR_HOST"}, k) {
			continue
		}
		env[k] = v
	}
	env["STORAGE_EMULATOR_HOST"] = rig.exported(t, "STORAGE_EMULATOR_HOST")
	env["TMPDIR"] = t.TempDir()
	return env
}

// exported is one of local mode's export lines.
func (b *bridgeProc) exported(t *testing.T, key string) string {
	t.Helper()
	for _, kv := range b.env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	t.Fatalf("local mode exported no %s: %q", key, b.env)
	return ""
}

// runShell runs argv in dir with env and fails the test unless it exits 0.
func runShell(t *testing.T, what, dir string, env map[string]string, argv ...string) (string, string) {
	t.Helper()
	// Building the CLI from source, cold, is most of it.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", what, err, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String()
}

func writeScript(t *testing.T, script string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "script.sh")
	if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// skipped says whether a step's script has the line skipMarker, alone or
// followed by why.
func skipped(script string) bool {
	return slices.ContainsFunc(strings.Split(script, "\n"), func(l string) bool {
		l = strings.TrimSpace(l)
		return l == skipMarker || strings.HasPrefix(l, skipMarker+" ")
	})
}

func checkSkips(t *testing.T, recipe string, got []string) {
	t.Helper()
	slices.Sort(got)
	if want := recipeSkips[recipe]; !slices.Equal(got, want) {
		t.Errorf("%s: skipped steps %q, want exactly %q", recipe, got, want)
	}
}

// GitHub Actions.

type githubWorkflow struct {
	Permissions map[string]string `yaml:"permissions"`
	Env         map[string]string `yaml:"env"`
	Jobs        map[string]struct {
		Defaults struct {
			Run struct {
				Shell string `yaml:"shell"`
			} `yaml:"run"`
		} `yaml:"defaults"`
		Env   map[string]string `yaml:"env"`
		Steps []struct {
			Name  string            `yaml:"name"`
			Uses  string            `yaml:"uses"`
			With  map[string]string `yaml:"with"`
			Run   string            `yaml:"run"`
			Shell string            `yaml:"shell"`
			Env   map[string]string `yaml:"env"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

var githubExpr = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// run runs the workflow's one job as a runner would, each run: step a
// bash script (bash --noprofile --norc -eo pipefail) with a job summary
// file of its own, and what a step appends to $GITHUB_PATH on PATH for
// the steps after it. Of the actions, it runs the checkout of bucketops.
func (wf githubWorkflow) run(t *testing.T, rig *argoRig, workspace string, runNumber int) recipeRun {
	t.Helper()
	if len(wf.Jobs) != 1 {
		t.Fatalf("%d jobs, want 1", len(wf.Jobs))
	}
	// What the repository's settings hold.
	contexts := map[string]string{
		"vars.BUCKETOPS_BUCKET":          rig.exported(t, "BUCKETOPS_BUCKET"),
		"vars.BUCKETOPS_BRIDGE":          rig.exported(t, "BUCKETOPS_BRIDGE"),
		"vars.WIF_PROVIDER":              "projects/123456789/locations/global/workloadIdentityPools/github/providers/github",
		"vars.PUBLISHER_SERVICE_ACCOUNT": "bucketops-publisher@acme.iam.gserviceaccount.com",
		"secrets.BUCKETOPS_READER_TOKEN": rig.token,
	}
	eval := func(v string) string {
		return githubExpr.ReplaceAllStringFunc(v, func(e string) string {
			name := githubExpr.FindStringSubmatch(e)[1]
			val, ok := contexts[name]
			if !ok {
				t.Fatalf("%s: the test has no value for the expression %s", githubRecipe, e)
			}
			return val
		})
	}
	temp := t.TempDir()
	var out recipeRun
	var paths []string // from $GITHUB_PATH, newest first
	for _, job := range wf.Jobs {
		for i, step := range job.Steps {
			if strings.HasPrefix(step.Uses, "actions/checkout@") && step.With["repository"] == bucketopsRepository {
				ref := strings.TrimSpace(step.With["ref"])
				if ref == "" || step.With["path"] == "" {
					t.Fatalf("step %q checks out %s without a pinned ref and a path: %v", step.Name, bucketopsRepository, step.With)
				}
				cloneSource(t, ref, filepath.Join(workspace, step.With["path"]))
				continue
			}
			if step.Uses != "" || skipped(step.Run) {
				out.skipped = append(out.skipped, step.Name)
				continue
			}
			if shell := cmpOr(step.Shell, job.Defaults.Run.Shell); shell != "bash" {
				t.Fatalf("step %q runs in %q; the recipe's steps are bash", step.Name, shell)
			}
			if strings.Contains(step.Run, "${{") {
				t.Fatalf("step %q has an expression in its script; pass it through env:", step.Name)
			}
			env := ciEnv(t, rig)
			if len(paths) > 0 {
				env["PATH"] = strings.Join(paths, string(os.PathListSeparator)) + string(os.PathListSeparator) + env["PATH"]
			}
			summary := filepath.Join(temp, fmt.Sprintf("step_summary_%d", i))
			pathFile := filepath.Join(temp, fmt.Sprintf("add_path_%d", i))
			for k, v := range map[string]string{
				"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_RUN_NUMBER": strconv.Itoa(runNumber), "GITHUB_RUN_ATTEMPT": "1",
				"GITHUB_REPOSITORY": "acme/payments", "GITHUB_SHA": "0123456789abcdef0123456789abcdef01234567", "GITHUB_ACTOR": "octocat",
				"GITHUB_WORKSPACE": workspace, "RUNNER_TEMP": temp, "GITHUB_STEP_SUMMARY": summary, "GITHUB_PATH": pathFile,
			} {
				env[k] = v
			}
			for _, scope := range []map[string]string{wf.Env, job.Env, step.Env} {
				for k, v := range scope {
					env[k] = eval(v)
				}
			}
			stdout, stderr := runShell(t, fmt.Sprintf("%s step %q", githubRecipe, step.Name), workspace, env,
				"bash", "--noprofile", "--norc", "-eo", "pipefail", writeScript(t, step.Run))
			out.stdout += stdout
			out.stderr += stderr
			if data, err := os.ReadFile(summary); err == nil {
				out.summary += string(data)
			}
			if data, err := os.ReadFile(pathFile); err == nil {
				for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
					paths = append([]string{line}, paths...)
				}
			}
		}
	}
	checkSkips(t, githubRecipe, out.skipped)
	if m := regexp.MustCompile("`(sha256:[0-9a-f]{64})`").FindAllStringSubmatch(out.summary, -1); len(m) > 0 {
		out.digest = m[len(m)-1][1]
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// GitLab CI.

type gitlabJob struct {
	IDTokens map[string]struct {
		Aud string `yaml:"aud"`
	} `yaml:"id_tokens"`
	Variables map[string]string `yaml:"variables"`
	Cache     struct {
		Key   string   `yaml:"key"`
		Paths []string `yaml:"paths"`
	} `yaml:"cache"`
	BeforeScript []string `yaml:"before_script"`
	Script       []string `yaml:"script"`
	Artifacts    struct {
		When  string   `yaml:"when"`
		Paths []string `yaml:"paths"`
	} `yaml:"artifacts"`
}

// gitlabRun is what the job was given, for checkCredentials.
type gitlabRun struct {
	recipeRun
	env map[string]string
}

// run runs before_script and script in one shell, as GitLab's runner does,
// with the job's variables under the project's CI/CD variables and an ID
// token per id_tokens entry.
func (job gitlabJob) run(t *testing.T, rig *argoRig, workspace string, iid int) gitlabRun {
	t.Helper()
	env := ciEnv(t, rig)
	for k, v := range map[string]string{
		"CI": "true", "GITLAB_CI": "true", "CI_PIPELINE_IID": strconv.Itoa(iid), "CI_PROJECT_DIR": workspace,
		"CI_PROJECT_PATH": "acme/payments", "CI_COMMIT_SHA": "0123456789abcdef0123456789abcdef01234567", "GITLAB_USER_LOGIN": "tanuki",
	} {
		env[k] = v
	}
	for k, v := range job.Variables {
		env[k] = os.Expand(v, func(name string) string { return env[name] })
	}
	// The project's CI/CD variables win over the job's; the reader token is
	// a File variable: its value is a path.
	env["BUCKETOPS_BUCKET"] = rig.exported(t, "BUCKETOPS_BUCKET")
	env["BUCKETOPS_BRIDGE"] = rig.exported(t, "BUCKETOPS_BRIDGE")
	env["BUCKETOPS_READER_TOKEN"] = rig.exported(t, "BUCKETOPS_TOKEN_FILE")
	// Where bucketops' source is: the working tree, at the job's version.
	if env["BUCKETOPS_SOURCE"] == "" || env["BUCKETOPS_VERSION"] == "" {
		t.Fatalf("%s: the job has no BUCKETOPS_SOURCE and BUCKETOPS_VERSION to build the CLI from", gitlabRecipe)
	}
	env["BUCKETOPS_SOURCE"] = "file://" + bucketopsSource(t, env["BUCKETOPS_VERSION"])
	for name, tok := range job.IDTokens {
		aud := os.Expand(tok.Aud, func(name string) string { return env[name] })
		env[name] = fakeJWT(t, aud)
	}
	var script []string
	var out gitlabRun
	for i, item := range append(slices.Clone(job.BeforeScript), job.Script...) {
		if skipped(item) {
			where := fmt.Sprintf("script[%d]", i-len(job.BeforeScript))
			if i < len(job.BeforeScript) {
				where = fmt.Sprintf("before_script[%d]", i)
			}
			out.skipped = append(out.skipped, where)
			continue
		}
		script = append(script, item)
	}
	checkSkips(t, gitlabRecipe, out.skipped)
	out.stdout, out.stderr = runShell(t, gitlabRecipe, workspace, env, "bash", "-eo", "pipefail", writeScript(t, strings.Join(script, "\n")))
	out.env = env
	return out
}

// fakeJWT is shaped like GitLab's ID token, unsigned: nothing here checks
// it, and Google's STS would refuse it.
func fakeJWT(t *testing.T, aud string) string {
	t.Helper()
	claims, err := json.Marshal(map[string]any{"iss": "https://gitlab.com", "aud": aud, "sub": "project_path:acme/payments:ref_type:branch:ref:main"})
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc(claims) + "." + enc([]byte("unsigned"))
}

// checkCredentials: the job left Application Default Credentials that
// exchange its ID token with the Workload Identity provider the token was
// issued for.
func (job gitlabJob) checkCredentials(t *testing.T, run gitlabRun) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(run.env["TMPDIR"], "*", "credentials.json"))
	if len(files) != 1 {
		t.Fatalf("credential configuration files %q, want one", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var creds struct {
		Type             string `json:"type"`
		Audience         string `json:"audience"`
		SubjectTokenType string `json:"subject_token_type"`
		TokenURL         string `json:"token_url"`
		Impersonation    string `json:"service_account_impersonation_url"`
		CredentialSource struct {
			File string `json:"file"`
		} `json:"credential_source"`
	}
	if err := json.Unmarshal(data, &creds); err != nil {
		t.Fatalf("%s: %v\n%s", files[0], err, data)
	}
	token, err := os.ReadFile(creds.CredentialSource.File)
	if err != nil {
		t.Fatalf("the credential source: %v", err)
	}
	var claims struct {
		Aud string `json:"aud"`
	}
	if parts := strings.Split(string(token), "."); len(parts) == 3 {
		payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
		json.Unmarshal(payload, &claims)
	}
	provider := "//iam.googleapis.com/" + run.env["GCP_WORKLOAD_IDENTITY_PROVIDER"]
	if creds.Type != "external_account" || creds.Audience != provider || claims.Aud != "https:"+provider ||
		creds.SubjectTokenType != "urn:ietf:params:oauth:token-type:jwt" || creds.TokenURL != "https://sts.googleapis.com/v1/token" ||
		!strings.Contains(creds.Impersonation, "/serviceAccounts/"+run.env["GCP_SERVICE_ACCOUNT"]+":generateAccessToken") {
		t.Errorf("credentials %+v for an ID token with aud %q; want an external account exchanging it with %s", creds, claims.Aud, provider)
	}
}

// Cloud Build.

type cloudBuildStep struct {
	ID         string   `yaml:"id"`
	Name       string   `yaml:"name"`
	Entrypoint string   `yaml:"entrypoint"`
	Args       []string `yaml:"args"`
	Env        []string `yaml:"env"`
	SecretEnv  []string `yaml:"secretEnv"`
	Dir        string   `yaml:"dir"`
	WaitFor    []string `yaml:"waitFor"`
}

type cloudBuild struct {
	Steps            []cloudBuildStep  `yaml:"steps"`
	Substitutions    map[string]string `yaml:"substitutions"`
	AvailableSecrets struct {
		SecretManager []struct {
			VersionName string `yaml:"versionName"`
			Env         string `yaml:"env"`
		} `yaml:"secretManager"`
	} `yaml:"availableSecrets"`
	ServiceAccount string `yaml:"serviceAccount"`
	Options        struct {
		SubstitutionOption string `yaml:"substitutionOption"`
	} `yaml:"options"`
}

// cloudBuildSubstitutions is what Cloud Build substitutes in a build a
// trigger started: its own values, then the config's _ ones with the
// trigger's values for the bucket and the bridge.
func (b cloudBuild) substitutions(t *testing.T, rig *argoRig) map[string]string {
	t.Helper()
	subs := map[string]string{
		"PROJECT_ID": "acme-ci", "PROJECT_NUMBER": "123456789", "LOCATION": "global",
		"BUILD_ID": "5a6b7c8d-0000-4000-8000-123456789abc", "TRIGGER_NAME": "publish",
		"COMMIT_SHA": "0123456789abcdef0123456789abcdef01234567", "REVISION_ID": "0123456789abcdef0123456789abcdef01234567",
		"SHORT_SHA": "0123456", "REPO_NAME": "payments", "REPO_FULL_NAME": "acme/payments", "BRANCH_NAME": "main",
		"TAG_NAME": "", "REF_NAME": "main", "TRIGGER_BUILD_CONFIG_PATH": "cloudbuild.yaml",
		"SERVICE_ACCOUNT_EMAIL": "bucketops-publisher@acme.iam.gserviceaccount.com",
		"SERVICE_ACCOUNT":       "projects/acme-ci/serviceAccounts/bucketops-publisher@acme.iam.gserviceaccount.com",
	}
	for k, v := range b.Substitutions {
		if !regexp.MustCompile(`^_[A-Z0-9_]+$`).MatchString(k) {
			t.Fatalf("substitution %s: a user-defined one starts with _ and has only capitals, digits and _", k)
		}
		subs[k] = v
	}
	source := "file://" + bucketopsSource(t, b.Substitutions["_BUCKETOPS_VERSION"])
	for k, v := range map[string]string{"_BUCKETOPS_BUCKET": rig.exported(t, "BUCKETOPS_BUCKET"), "_BUCKETOPS_BRIDGE": rig.exported(t, "BUCKETOPS_BRIDGE"), "_BUCKETOPS_SOURCE": source} {
		if _, ok := b.Substitutions[k]; !ok {
			t.Fatalf("%s declares no substitution %s, which the test sets as a trigger would", cloudBuildRecipe, k)
		}
		subs[k] = v
	}
	return subs
}

var cloudBuildVar = regexp.MustCompile(`^(?:\{([A-Za-z0-9_]+)\}|([A-Za-z_][A-Za-z0-9_]*))`)

// substitute does what Cloud Build does to a field before a step runs, the
// one place the test does: $$ is $, $NAME and ${NAME} are substitutions.
// Anything else after a $ is an error: Cloud Build would fail the build on
// an unknown substitution, and a $ meant for bash must be written $$.
func substitute(s string, subs map[string]string, used map[string]bool) (string, error) {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		s = s[i+1:]
		if strings.HasPrefix(s, "$") {
			b.WriteByte('$')
			s = s[1:]
			continue
		}
		m := cloudBuildVar.FindStringSubmatch(s)
		if m == nil {
			return "", fmt.Errorf("a $ before %.10q: Cloud Build substitutes $NAME and ${NAME}; write $$ for bash", s)
		}
		name := cmpOr(m[1], m[2])
		v, ok := subs[name]
		if !ok {
			return "", fmt.Errorf("$%s: Cloud Build wouldn't substitute it (no such substitution; write $$%s for bash's)", name, name)
		}
		used[name] = true
		b.WriteString(v)
		s = s[len(m[0]):]
	}
}

// run runs the build's steps, those only would choose when not nil, in
// order, each bash step as Cloud Build would: its args, substituted, after
// bash, in the workspace, with its env and secretEnv.
func (b cloudBuild) run(t *testing.T, rig *argoRig, workspace string, only func(id string) bool) recipeRun {
	t.Helper()
	subs := b.substitutions(t, rig)
	used := map[string]bool{}
	sub := func(where, s string) string {
		t.Helper()
		v, err := substitute(s, subs, used)
		if err != nil {
			t.Fatalf("%s: %s: %v", cloudBuildRecipe, where, err)
		}
		return v
	}
	// Secret Manager holds the reader token under every name.
	secrets := map[string]string{}
	for _, s := range b.AvailableSecrets.SecretManager {
		if v := sub("availableSecrets", s.VersionName); !regexp.MustCompile(`^projects/[^/]+/secrets/[^/]+/versions/[^/]+$`).MatchString(v) {
			t.Fatalf("versionName %q isn't projects/P/secrets/S/versions/V", v)
		}
		secrets[s.Env] = rig.token
	}
	sub("serviceAccount", b.ServiceAccount)
	var out recipeRun
	ids := map[string]bool{}
	for i, step := range b.Steps {
		where := fmt.Sprintf("step %d (%s)", i, step.ID)
		for _, w := range step.WaitFor {
			if w != "-" && !ids[w] {
				t.Fatalf("%s waits for %q, no earlier step", where, w)
			}
		}
		ids[step.ID] = true
		args := make([]string, len(step.Args))
		for j, a := range step.Args {
			args[j] = sub(where, a)
		}
		if slices.ContainsFunc(args, skipped) {
			out.skipped = append(out.skipped, step.ID)
			continue
		}
		if only != nil && !only(step.ID) {
			continue
		}
		if step.Entrypoint != "bash" && (step.Entrypoint != "" || step.Name != "bash") {
			t.Fatalf("%s runs %s %s; the test runs bash steps", where, step.Name, step.Entrypoint)
		}
		sub(where, step.Name)
		env := ciEnv(t, rig)
		for _, kv := range step.Env {
			k, v, ok := strings.Cut(sub(where, kv), "=")
			if !ok {
				t.Fatalf("%s: env %q isn't KEY=VALUE", where, kv)
			}
			env[k] = v
		}
		for _, k := range step.SecretEnv {
			v, ok := secrets[k]
			if !ok {
				t.Fatalf("%s: secretEnv %s isn't in availableSecrets", where, k)
			}
			env[k] = v
		}
		stdout, stderr := runShell(t, cloudBuildRecipe+" "+where, filepath.Join(workspace, sub(where, step.Dir)), env, append([]string{"bash"}, args...)...)
		out.stdout += stdout
		out.stderr += stderr
	}
	if only == nil && b.Options.SubstitutionOption != "ALLOW_LOOSE" {
		for k := range b.Substitutions {
			if !used[k] {
				t.Errorf("%s: substitution %s is never used; Cloud Build fails such a build", cloudBuildRecipe, k)
			}
		}
	}
	checkSkips(t, cloudBuildRecipe, out.skipped)
	return out
}
