package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/store"
)

// commits returns app's whole history, newest first, and the commit each
// release is in the bridge's git view (the revision Argo CD shows),
// computed from that history as the bridge computes it.
func (e *env) commits(ctx context.Context, s *store.Store, app string) ([]store.Release, map[int64]string, error) {
	hist, err := s.History(ctx, app, store.HistoryOptions{Listed: e.longRun("history of " + app).listed})
	if err != nil {
		return nil, nil, err
	}
	oldest := slices.Clone(hist)
	slices.Reverse(oldest)
	shas, err := gitview.Chain(s.Location(), oldest)
	if err != nil {
		return nil, nil, err
	}
	byGen := make(map[int64]string, len(oldest))
	for i, r := range oldest {
		byGen[r.Generation] = shas[i]
	}
	return hist, byGen, nil
}

// isCommit says whether rev, after an @ or in --to, is a commit of the
// git view rather than a generation: 40 hex digits, or hex digits with a
// letter among them (digits alone are read as a generation first:
// generationOrCommit).
func isCommit(rev string) bool {
	return rev != "" && strings.Trim(rev, "0123456789abcdef") == "" && (strings.ContainsAny(rev, "abcdef") || len(rev) == 40)
}

// minCommitPrefix is the shortest prefix of a commit SHA taken, as git's
// short SHAs.
const minCommitPrefix = 7

// resolveRevision reads what rollback --to names: a generation, or a
// commit of the git view (40 hex digits, or a prefix of 7 or more with a
// letter in it, unique among the app's releases).
func resolveRevision(hist []store.Release, byGen map[int64]string, app, to string) (int64, error) {
	if !isCommit(to) {
		var gen int64
		if _, err := fmt.Sscan(to, &gen); err != nil || gen <= 0 || fmt.Sprint(gen) != to {
			return 0, usagef("--to %q: give a generation or a commit SHA, as bucketops log %s shows", to, app)
		}
		return gen, nil
	}
	if len(to) < minCommitPrefix {
		return 0, usagef("--to %q: a commit SHA prefix needs at least %d hex digits", to, minCommitPrefix)
	}
	return matchCommit(hist, byGen, app, app+"@"+to, to)
}

// matchCommit finds the release of app whose commit starts with prefix.
func matchCommit(hist []store.Release, byGen map[int64]string, app, what, prefix string) (int64, error) {
	var found []int64
	for _, r := range hist {
		if strings.HasPrefix(byGen[r.Generation], prefix) {
			found = append(found, r.Generation)
		}
	}
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("%s: %w: no release of %s is that commit (bucketops log %s lists them)", what, store.ErrNotFound, app, app)
	case 1:
		return found[0], nil
	}
	return 0, usagef("%s: the prefix names %d releases of %s; give more digits", what, len(found), app)
}

// generationOrCommit resolves digits alone, after @ or in --to: gen, the
// generation they name; or, when no release of app is that generation and
// there are 7 or more digits, the release whose commit starts with them.
// A short SHA is digits alone for 1 commit in 27 at Argo CD's 7 digits.
func (e *env) generationOrCommit(ctx context.Context, s *store.Store, app string, gen int64, digits string) (int64, error) {
	if len(digits) < minCommitPrefix {
		return gen, nil
	}
	_, err := s.Stat(ctx, store.Ref{App: app, Generation: gen})
	if !errors.Is(err, store.ErrNotFound) {
		return gen, err
	}
	hist, byGen, err := e.commits(ctx, s, app)
	if err != nil {
		return 0, err
	}
	found, err := matchCommit(hist, byGen, app, app+"@"+digits, digits)
	if errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("%s@%s: %w: no release of %s is that generation, nor a commit starting with those digits (bucketops log %s lists them)", app, digits, store.ErrNotFound, app, app)
	}
	return found, err
}

// releaseArg is a release as a command line names it: APP (the head),
// APP@GENERATION, or APP@COMMIT, the commit SHA (or a prefix of 7 or more
// hex digits) that bucketops log and Argo CD's History show.
type releaseArg struct {
	ref    store.Ref
	commit string
	// digits is what followed @ when it was digits alone, 7 or more: a
	// generation, or else a commit's prefix (generationOrCommit).
	digits string
}

// parseRelease checks the syntax of a release argument, without asking the
// bucket.
func parseRelease(arg string) (releaseArg, error) {
	app, rev, found := strings.Cut(arg, "@")
	if found && isCommit(rev) {
		if err := store.ValidateApp(app); err != nil {
			return releaseArg{}, err
		}
		if len(rev) < minCommitPrefix {
			return releaseArg{}, usagef("%q: a commit SHA prefix needs at least %d hex digits; after @ give a generation or a commit SHA, as bucketops log %s shows", arg, minCommitPrefix, app)
		}
		return releaseArg{ref: store.Ref{App: app}, commit: rev}, nil
	}
	ref, err := store.ParseRef(arg)
	if err != nil {
		return releaseArg{}, fmt.Errorf("%w (or a commit SHA, as bucketops log shows)", err)
	}
	a := releaseArg{ref: ref}
	if found && len(rev) >= minCommitPrefix {
		a.digits = rev
	}
	return a, nil
}

// revision is what followed the @, for rollback --to: a commit, digits
// alone, or "" for the head.
func (a releaseArg) revision() string {
	if a.commit != "" {
		return a.commit
	}
	return a.digits
}

// resolve turns a commit, or digits that name no generation, into its
// generation, from the app's history.
func (a releaseArg) resolve(ctx context.Context, e *env, s *store.Store) (store.Ref, error) {
	if a.digits != "" {
		gen, err := e.generationOrCommit(ctx, s, a.ref.App, a.ref.Generation, a.digits)
		return store.Ref{App: a.ref.App, Generation: gen}, err
	}
	if a.commit == "" {
		return a.ref, nil
	}
	hist, byGen, err := e.commits(ctx, s, a.ref.App)
	if err != nil {
		return store.Ref{}, err
	}
	gen, err := matchCommit(hist, byGen, a.ref.App, a.ref.App+"@"+a.commit, a.commit)
	if err != nil {
		return store.Ref{}, err
	}
	return store.Ref{App: a.ref.App, Generation: gen}, nil
}
