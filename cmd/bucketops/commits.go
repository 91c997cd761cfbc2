package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/store"
)

// commits returns app's whole history, newest first, and the commit each
// release is in the bridge's git view (the revision Argo CD shows),
// computed from that history as the bridge computes it.
func commits(ctx context.Context, s *store.Store, app string) ([]store.Release, map[int64]string, error) {
	hist, err := s.History(ctx, app, store.HistoryOptions{})
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

// resolveRevision reads what rollback --to names: a generation, or a
// commit of the git view (40 hex digits, or a prefix of 7 or more with a
// letter in it, unique among the app's releases).
func resolveRevision(hist []store.Release, byGen map[int64]string, app, to string) (int64, error) {
	isHex := strings.Trim(to, "0123456789abcdef") == ""
	hasLetter := strings.ContainsAny(to, "abcdef")
	if !isHex || (!hasLetter && len(to) != 40) {
		var gen int64
		if _, err := fmt.Sscan(to, &gen); err != nil || gen <= 0 || fmt.Sprint(gen) != to {
			return 0, usagef("--to %q: give a generation or a commit SHA, as bucketops log %s shows", to, app)
		}
		return gen, nil
	}
	if len(to) < 7 {
		return 0, usagef("--to %q: a commit SHA prefix needs at least 7 hex digits", to)
	}
	var found []int64
	for _, r := range hist {
		if strings.HasPrefix(byGen[r.Generation], to) {
			found = append(found, r.Generation)
		}
	}
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("--to %s: %w: no release of %s is that commit (bucketops log %s lists them)", to, store.ErrNotFound, app, app)
	case 1:
		return found[0], nil
	}
	return 0, usagef("--to %s: the prefix names %d releases of %s; give more digits", to, len(found), app)
}
