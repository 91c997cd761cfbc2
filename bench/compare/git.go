package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The git contenders run the git command line, as CI does, in a temporary
// directory removed by Close: a bare repository (the remote, reached over a
// file:// URL, so clones and fetches go through the pack protocol as they do
// over HTTPS, minus the network) and the writers' clones.
//
// Configuration: no system config, HOME and a global config of the run's
// own (user, branch main, no hooks, no signing). Automatic gc is off on both
// sides (gc.auto=0, receive.autogc=false): an automatic gc runs detached in
// the background and would land in random samples, or outlive the run. The
// remote starts packed (fast-import writes a pack) and collects the loose
// objects of pushes, as a server does between maintenance runs.
const gitConfig = `[user]
	name = CI
	email = ci@example.com
[init]
	defaultBranch = main
[core]
	hooksPath = /dev/null
[commit]
	gpgSign = false
[gc]
	auto = 0
[receive]
	autogc = false
[maintenance]
	auto = false
[advice]
	detachedHead = false
	skippedCherryPicks = false
`

// maxPushAttempts bounds a writer's retries; a run that reaches it is
// broken rather than slow.
const maxPushAttempts = 1000

type gitMode int

const (
	gitClone   gitMode = iota // clone per publish, retry on rejection
	gitQueue                  // one worker clones per message
	gitWorkdir                // a working copy kept per writer
)

type gitContender struct {
	mode  gitMode
	depth int // git clone --depth; 0 clones everything
}

type gitTarget struct {
	mode  gitMode
	depth int
	root  string // removed by Close
	bare  string
	env   []string
	seq   atomic.Int64 // names the writers' directories

	queue chan queued // gitQueue: the worker's messages
	done  chan struct{}
}

func appPath(app string) string { return "apps/" + app + "/manifests.yaml" }

// Open creates the bare repository with an initial commit and the prior
// releases, one commit each, written by git fast-import: setup, not measured.
func (c gitContender) Open(ctx context.Context, apps []string, history int, size int) (target, error) {
	root, err := os.MkdirTemp("", "bench-compare-git-")
	if err != nil {
		return nil, err
	}
	t := &gitTarget{mode: c.mode, depth: c.depth, root: root, bare: filepath.Join(root, "remote.git")}
	home := filepath.Join(root, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Close()
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(gitConfig), 0o644); err != nil {
		t.Close()
		return nil, err
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "LC_ALL=") {
			t.env = append(t.env, kv)
		}
	}
	t.env = append(t.env, "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"),
		"LC_ALL=C", "GIT_TERMINAL_PROMPT=0", "GIT_EDITOR=true")
	if _, err := t.git(ctx, root, nil, "init", "-q", "--bare", t.bare); err != nil {
		t.Close()
		return nil, err
	}
	if err := t.prefill(ctx, apps, history, size); err != nil {
		t.Close()
		return nil, err
	}
	if c.mode == gitQueue {
		t.queue = make(chan queued, 4096)
		t.done = make(chan struct{})
		go t.work(ctx)
	}
	return t, nil
}

func (t *gitTarget) prefill(ctx context.Context, apps []string, history int, size int) error {
	cmd := t.command(ctx, t.root, "--git-dir", t.bare, "fast-import", "--quiet", "--date-format=raw")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("git fast-import: %w", err)
	}
	w := bufio.NewWriterSize(stdin, 1<<20)
	const epoch = 1_700_000_000
	data := func(b []byte) { fmt.Fprintf(w, "data %d\n%s\n", len(b), b) }
	fmt.Fprintf(w, "commit refs/heads/main\nmark :1\ncommitter CI <ci@example.com> %d +0000\n", epoch)
	data([]byte("initial commit"))
	fmt.Fprintf(w, "M 100644 inline README.md\n")
	data([]byte("# releases\n"))
	for i, p := range priors(apps, history) {
		fmt.Fprintf(w, "commit refs/heads/main\nmark :%d\ncommitter CI <ci@example.com> %d +0000\n", i+2, epoch+i+1)
		data(fmt.Appendf(nil, "%s: release %d", p.App, p.Seq))
		fmt.Fprintf(w, "from :%d\nM 100644 inline %s\n", i+1, appPath(p.App))
		data(manifest(p.App, p.Seq, size))
	}
	werr := w.Flush()
	if err := stdin.Close(); werr == nil {
		werr = err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git fast-import: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return werr
}

func (t *gitTarget) command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = t.env
	// On Ctrl-C, git's children (upload-pack) may hold the pipes open.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// gitError is a failed git command with its standard error.
type gitError struct {
	args   []string
	err    error
	stderr string
}

func (e *gitError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.args, " "), e.err, e.stderr)
}

func (e *gitError) Unwrap() error { return e.err }

// rejected reports a push refused because the remote moved: by the client
// (non-fast-forward) or by the remote losing the race for the ref's lock.
func rejected(err error) bool {
	var ge *gitError
	return errors.As(err, &ge) && strings.Contains(ge.stderr, "rejected")
}

// git runs one git command in dir and returns its standard output.
func (t *gitTarget) git(ctx context.Context, dir string, stdin []byte, args ...string) ([]byte, error) {
	cmd := t.command(ctx, dir, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, &gitError{args: args, err: err, stderr: strings.TrimSpace(stderr.String())}
	}
	return stdout.Bytes(), nil
}

// clone makes a fresh clone of the remote's main branch in a new directory.
func (t *gitTarget) clone(ctx context.Context) (string, error) {
	dir := filepath.Join(t.root, "clone-"+strconv.FormatInt(t.seq.Add(1), 10))
	args := []string{"clone", "-q", "--branch", "main"}
	if t.depth > 0 {
		args = append(args, "--depth", strconv.Itoa(t.depth))
	}
	if _, err := t.git(ctx, t.root, nil, append(args, "file://"+t.bare, dir)...); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// publish commits data as app's release in the clone dir and pushes it.
// On a rejected push it fetches, and rebases onto the remote's main. The
// rule for a release of the same app that got there first, which is also
// bucketops' rule: a release with a higher sequence wins, so the writer
// drops its own when the remote's is higher, and otherwise resolves the
// conflict on the app's file by taking its own release whole.
func (t *gitTarget) publish(ctx context.Context, dir, app string, seq uint64, data []byte) (outcome, error) {
	rel := appPath(app)
	file := filepath.Join(dir, rel)
	if cur, err := os.ReadFile(file); err == nil {
		if s, ok := manifestSeq(cur); ok && s >= seq {
			return outcome{Dropped: true}, nil
		}
	}
	if err := writeFile(file, data); err != nil {
		return outcome{}, err
	}
	msg := fmt.Sprintf("%s: release %d", app, seq)
	if _, err := t.git(ctx, dir, nil, "add", rel); err != nil {
		return outcome{}, err
	}
	if _, err := t.git(ctx, dir, nil, "commit", "-q", "-m", msg); err != nil {
		return outcome{}, err
	}
	var out outcome
	for attempt := 1; ; attempt++ {
		_, err := t.git(ctx, dir, nil, "push", "-q", "origin", "HEAD:main")
		if err == nil {
			return out, nil
		}
		if !rejected(err) || attempt >= maxPushAttempts {
			return out, err
		}
		out.Retries++
		if _, err := t.git(ctx, dir, nil, "fetch", "-q", "origin", "main"); err != nil {
			return out, err
		}
		remote, err := t.git(ctx, dir, nil, "show", "origin/main:"+rel)
		if err == nil {
			if s, ok := manifestSeq(remote); ok && s >= seq {
				_, err := t.git(ctx, dir, nil, "reset", "-q", "--hard", "origin/main")
				return outcome{Dropped: true, Retries: out.Retries}, err
			}
		} else if !absent(err) {
			return out, err
		}
		if _, err := t.git(ctx, dir, nil, "rebase", "-q", "origin/main"); err != nil {
			conflicts, derr := t.git(ctx, dir, nil, "diff", "--name-only", "--diff-filter=U")
			if derr != nil || strings.TrimSpace(string(conflicts)) != rel {
				_, _ = t.git(ctx, dir, nil, "rebase", "--abort")
				return out, err
			}
			if err := writeFile(file, data); err != nil {
				return out, err
			}
			if _, err := t.git(ctx, dir, nil, "add", rel); err != nil {
				return out, err
			}
			if _, err := t.git(ctx, dir, nil, "rebase", "--continue"); err != nil {
				return out, err
			}
		}
		// A rebase that merged the app's file without a conflict would
		// leave a mix of two releases: a release is published whole.
		if cur, err := os.ReadFile(file); err != nil || !bytes.Equal(cur, data) {
			if err := writeFile(file, data); err != nil {
				return out, err
			}
			if _, err := t.git(ctx, dir, nil, "commit", "-q", "--amend", "--no-edit", "--", rel); err != nil {
				return out, err
			}
		}
	}
}

// absent reports git show failing because the path isn't in the commit.
func absent(err error) bool {
	var ge *gitError
	return errors.As(err, &ge) && (strings.Contains(ge.stderr, "does not exist") || strings.Contains(ge.stderr, "exists on disk, but not in"))
}

func writeFile(name string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	return os.WriteFile(name, data, 0o644)
}

// queued is one message of the serialized queue.
type queued struct {
	app   string
	seq   uint64
	data  []byte
	reply chan queueReply
}

type queueReply struct {
	out outcome
	err error
}

// work is the queue's one worker: per message, as pubsub2git did, a fresh
// clone, a commit and a push. Nothing else pushes, so a push is never
// rejected. Once ctx is done it answers the rest with ctx's error.
func (t *gitTarget) work(ctx context.Context) {
	defer close(t.done)
	for m := range t.queue {
		var r queueReply
		dir, err := t.clone(ctx)
		if err == nil {
			r.out, r.err = t.publish(ctx, dir, m.app, m.seq, m.data)
			os.RemoveAll(dir)
		} else {
			r.err = err
		}
		m.reply <- r
	}
}

// Writer returns a pipeline: for gitWorkdir it clones now, outside the
// measurements.
func (t *gitTarget) Writer(ctx context.Context) (writer, error) {
	switch t.mode {
	case gitQueue:
		return queueWriter{t}, nil
	case gitWorkdir:
		dir, err := t.clone(ctx)
		if err != nil {
			return nil, err
		}
		return workdirWriter{t, dir}, nil
	}
	return cloneWriter{t}, nil
}

type cloneWriter struct{ t *gitTarget }

func (w cloneWriter) Publish(ctx context.Context, app string, seq uint64, data []byte) (outcome, error) {
	dir, err := w.t.clone(ctx)
	if err != nil {
		return outcome{}, err
	}
	defer os.RemoveAll(dir)
	return w.t.publish(ctx, dir, app, seq, data)
}

func (cloneWriter) Close() error { return nil }

type queueWriter struct{ t *gitTarget }

// Publish enqueues the release and waits until the worker has pushed it:
// its latency includes the time in the queue.
func (w queueWriter) Publish(ctx context.Context, app string, seq uint64, data []byte) (outcome, error) {
	reply := make(chan queueReply, 1)
	select {
	case w.t.queue <- queued{app: app, seq: seq, data: data, reply: reply}:
	case <-ctx.Done():
		return outcome{}, ctx.Err()
	}
	select {
	case r := <-reply:
		return r.out, r.err
	case <-ctx.Done():
		return outcome{}, ctx.Err()
	}
}

func (queueWriter) Close() error { return nil }

type workdirWriter struct {
	t   *gitTarget
	dir string
}

// Publish brings the kept working copy up to date (fetch, rebase), then
// commits and pushes.
func (w workdirWriter) Publish(ctx context.Context, app string, seq uint64, data []byte) (outcome, error) {
	if _, err := w.t.git(ctx, w.dir, nil, "fetch", "-q", "origin", "main"); err != nil {
		return outcome{}, err
	}
	if _, err := w.t.git(ctx, w.dir, nil, "rebase", "-q", "origin/main"); err != nil {
		return outcome{}, err
	}
	return w.t.publish(ctx, w.dir, app, seq, data)
}

func (w workdirWriter) Close() error { return os.RemoveAll(w.dir) }

// State reads app's file on the remote's main branch and counts the
// commits that changed it.
func (t *gitTarget) State(ctx context.Context, app string) ([]byte, int, error) {
	data, err := t.git(ctx, t.root, nil, "--git-dir", t.bare, "show", "main:"+appPath(app))
	if err != nil {
		return nil, 0, err
	}
	out, err := t.git(ctx, t.root, nil, "--git-dir", t.bare, "rev-list", "--count", "main", "--", appPath(app))
	if err != nil {
		return nil, 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	return data, n, err
}

// Size returns the remote's bytes on disk as the pushes left it, then after
// git gc.
func (t *gitTarget) Size(ctx context.Context) (int64, int64, error) {
	plain, err := dirBytes(t.bare)
	if err != nil {
		return 0, 0, err
	}
	if _, err := t.git(ctx, t.root, nil, "--git-dir", t.bare, "gc", "-q", "--prune=now"); err != nil {
		return 0, 0, err
	}
	packed, err := dirBytes(t.bare)
	return plain, packed, err
}

// dirBytes sums the sizes of the regular files under dir.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	return n, err
}

// Close stops the queue's worker, if any, and removes every directory.
func (t *gitTarget) Close() error {
	if t.queue != nil {
		close(t.queue)
		<-t.done
	}
	return os.RemoveAll(t.root)
}
