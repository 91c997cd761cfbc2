package gitview_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/store"
)

// goldenReleases cover what the format encodes: a plain release, a named
// author with a multi-line message, a non-ASCII author, an empty author
// and message, a copy, and a retirement.
func goldenReleases() []store.Release {
	at := func(s int64) time.Time { return time.Unix(1764800000+s, 123456789).UTC() }
	return []store.Release{
		{App: "prod/payments", Generation: 1764800000000001, Time: at(0), Sequence: 1, Kind: "release", Digest: "sha256:1111111111111111111111111111111111111111111111111111111111111111", Author: "ci@example.com", Message: "first", Source: "acme/payments@0123456789abcdef0123456789abcdef01234567"},
		{App: "prod/payments", Generation: 1764800000000002, Time: at(60), Sequence: 2, Kind: "release", Digest: "sha256:2222222222222222222222222222222222222222222222222222222222222222", Author: "CI Bot <bot@example.com>", Message: "second\r\n\r\nbody line\n\n"},
		{App: "prod/payments", Generation: 1764800000000003, Time: at(120), Sequence: 3, Kind: "release", Digest: "sha256:3333333333333333333333333333333333333333333333333333333333333333", Author: "Zoë Ångström (github-actions acme/payments)"},
		{App: "prod/payments", Generation: 1764800000000004, Time: at(180), Sequence: 3, Kind: "release", Digest: "sha256:4444444444444444444444444444444444444444444444444444444444444444"},
		{App: "prod/payments", Generation: 1764800000000005, Time: at(240), Sequence: 4, Kind: "release", Digest: "sha256:1111111111111111111111111111111111111111111111111111111111111111", Author: "alice", Message: "rollback", Origin: "prod/payments@1764800000000001"},
		{App: "prod/payments", Generation: 1764800000000006, Time: at(300), Sequence: 4, Kind: "tombstone", Digest: "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", Author: "bob"},
	}
}

// The commit format is frozen: Argo CD records these SHAs, and a change
// that alters them orphans every one of them. If this test fails, the
// change is the bug.
func TestGoldenSHAs(t *testing.T) {
	loc := store.Location{Bucket: "acme-releases", Prefix: "clusters/eu"}
	got, err := gitview.Chain(loc, goldenReleases())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"9717af3c43b87b975903e53cd365ab2683ea6555",
		"fe7e6174da185fc628fe60084041fb309f78cb98",
		"69cb422e8eee0a2b47c703ac811ff8239d3f10b0",
		"5c49b01b0ccfd7f3c94439d1e0ef10be2ac0ba73",
		"608dd8a6a635ffc0c5e1a25b18bd9109ed8e39c4",
		"b15a6dd512f267bc21c76bda88fa07ef40439326",
	}
	if len(got) != len(want) {
		t.Fatalf("%d commits for %d releases", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("release %d: commit %s, want %s", i, got[i], want[i])
		}
	}
}

// Two views over one bucket (two replicas, or one before and after a
// restart) give the same SHAs, and a chain extended release by release is
// the chain built at once: here 10,000 releases, built as 1,000 and then
// 9,000 more, against one computed from the whole history.
func TestChainsAreDeterministicAt10000Releases(t *testing.T) {
	loc := store.Location{Bucket: "acme-releases"}
	rels := make([]store.Release, 10_000)
	for i := range rels {
		rels[i] = store.Release{App: "prod/big", Generation: int64(1764800000000000 + i), Time: time.Unix(1764800000+int64(i), 0).UTC(),
			Sequence: uint64(i + 1), Kind: "release", Digest: fmt.Sprintf("sha256:%064d", i), Author: "ci@example.com"}
	}
	whole, err := gitview.Chain(loc, rels)
	if err != nil {
		t.Fatal(err)
	}
	src := &growing{all: rels, visible: 1000}
	v, err := gitview.New(gitview.Config{Source: src, Location: loc, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if sha, err := v.Commit(ctx, "prod/big", rels[999].Generation); err != nil || sha != whole[999] {
		t.Fatalf("release 1,000 after 1,000: %s %v, want %s", sha, err, whole[999])
	}
	src.visible = 10_000
	if sha, err := v.Commit(ctx, "prod/big", rels[9999].Generation); err != nil || sha != whole[9999] {
		t.Fatalf("release 10,000 after 9,000 more: %s %v, want %s", sha, err, whole[9999])
	}
	other, _ := gitview.New(gitview.Config{Source: src, Location: loc, Logger: slog.New(slog.DiscardHandler)})
	for _, i := range []int{0, 4321, 9999} {
		rel, err := other.Generation(ctx, "prod/big", whole[i])
		if err != nil || rel.Generation != rels[i].Generation {
			t.Errorf("another view names commit %s as %+v %v, want generation %d", whole[i], rel, err, rels[i].Generation)
		}
	}
}

// growing is a history that shows its first visible releases: a source
// built in memory from the Source interface, because publishing 10,000
// releases through the emulator takes minutes. The protocol tests use the
// real store.
type growing struct {
	all     []store.Release
	visible int
}

func (g *growing) Head(_ context.Context, app string) (store.Release, error) {
	return g.all[g.visible-1], nil
}

func (g *growing) History(_ context.Context, app string, _ store.HistoryOptions) ([]store.Release, error) {
	out := make([]store.Release, g.visible)
	for i := range g.visible {
		out[i] = g.all[g.visible-1-i]
	}
	return out, nil
}
