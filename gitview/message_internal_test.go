package gitview

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bucketops/bucketops/store"
)

// The trailers of format 2, as text: Argo CD's repo-server reads a
// revision's message with git show and parses its trailers with git
// interpret-trailers --parse, so the trailers must be the message's last
// paragraph, one "Key: value" a line.
func TestFormat2Message(t *testing.T) {
	rel := store.Release{App: "prod/payments", Generation: 1764800000000002, Time: time.Unix(1764800060, 0).UTC(), Kind: "release", Format: 2,
		Digest: "sha256:2222222222222222222222222222222222222222222222222222222222222222", Message: "second\n\nbody line",
		Source: "https://github.com/acme/payments/commit/89ABCDEF0123456789abcdef0123456789abcdef"}
	want := `second

body line

Bucketops-Generation: 1764800000000002
Bucketops-Digest: sha256:2222222222222222222222222222222222222222222222222222222222222222
Bucketops-Source: https://github.com/acme/payments/commit/89ABCDEF0123456789abcdef0123456789abcdef
Argocd-reference-commit-repourl: https://github.com/acme/payments
Argocd-reference-commit-sha: 89abcdef0123456789abcdef0123456789abcdef
`
	got := message(rel)
	if got != want {
		t.Errorf("message:\n%s\nwant:\n%s", got, want)
	}
	legacy := rel
	legacy.Format = 0
	if m := message(legacy); strings.Contains(m, "Source") || strings.Contains(m, "Argocd") {
		t.Errorf("a release from before bucketops-format has trailers of format 2:\n%s", m)
	}

	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git to parse the trailers with")
	}
	cmd := exec.CommandContext(t.Context(), git, "interpret-trailers", "--parse")
	cmd.Stdin = strings.NewReader(strings.TrimSpace(got))
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if trailers := want[strings.Index(want, "Bucketops-Generation"):]; string(out) != trailers {
		t.Errorf("git interpret-trailers --parse:\n%s\nwant every trailer:\n%s", out, trailers)
	}
}

// Which sources name a git commit, and what of it.
func TestParseSource(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		source string
		want   SourceCommit
		ok     bool
	}{
		{"acme/payments@" + sha, SourceCommit{SHA: sha}, true},
		{"group/sub/project@0123abc", SourceCommit{SHA: "0123abc"}, true},
		{"https://github.com/acme/payments@" + sha, SourceCommit{RepoURL: "https://github.com/acme/payments", SHA: sha}, true},
		{"ssh://git@example.com/acme/payments.git@" + sha, SourceCommit{RepoURL: "ssh://git@example.com/acme/payments.git", SHA: sha}, true},
		{"git@github.com:acme/payments.git@" + sha, SourceCommit{SHA: sha}, true},
		{"https://github.com/acme/payments/commit/" + sha, SourceCommit{RepoURL: "https://github.com/acme/payments", SHA: sha}, true},
		{"https://gitlab.com/acme/sub/payments/-/commit/" + sha, SourceCommit{RepoURL: "https://gitlab.com/acme/sub/payments", SHA: sha}, true},
		{"https://bitbucket.org/acme/payments/commits/" + strings.ToUpper(sha), SourceCommit{RepoURL: "https://bitbucket.org/acme/payments", SHA: sha}, true},
		{sha, SourceCommit{SHA: sha}, true},
		{"0123abc", SourceCommit{SHA: "0123abc"}, true},
		{"", SourceCommit{}, false},
		{"0123ab", SourceCommit{}, false},
		{"acme/payments@main", SourceCommit{}, false},
		{"acme/payments@" + sha + "00", SourceCommit{}, false},
		{"https://ci.example.com/acme/payments/pipelines/42", SourceCommit{}, false},
		{"https://github.com/acme/payments/commit/" + sha + "?diff=split", SourceCommit{}, false},
		{"https://github.com/commit/" + sha, SourceCommit{}, false},
		{"@" + sha, SourceCommit{}, false},
		{"build 42 @ " + sha, SourceCommit{}, false},
	} {
		got, ok := ParseSource(tc.source)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseSource(%q) = %+v, %v; want %+v, %v", tc.source, got, ok, tc.want, tc.ok)
		}
	}
}
