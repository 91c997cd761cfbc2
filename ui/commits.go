package ui

import (
	"slices"
	"strconv"
	"strings"

	"github.com/bucketops/bucketops/cache"
	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/store"
)

// commitsBytes bounds the commit SHAs the pages keep (about 64 bytes a
// release): 4 MiB is 65,000 releases' worth.
const commitsBytes = 4 << 20

// commits gives each release of an app the commit it is in the bridge's
// git view, the SHA Argo CD's History shows, computed from the app's
// history as the git view computes it (gitview.Chain), and kept per app
// until its head moves.
type commits struct {
	loc    store.Location
	cached *cache.LRU[string, commitIndex]
}

// commitIndex is an app's commits as of its head.
type commitIndex struct {
	head  int64
	byGen map[int64]string
}

func newCommits(loc store.Location) *commits {
	return &commits{loc: loc, cached: cache.New[string, commitIndex](commitsBytes)}
}

// of returns the commit of each of rels, an app's whole history newest
// first (histories.get).
func (c *commits) of(app string, rels []store.Release) (map[int64]string, error) {
	if len(rels) == 0 {
		return nil, nil
	}
	if ci, ok := c.cached.Get(app); ok && ci.head == rels[0].Generation && len(ci.byGen) == len(rels) {
		return ci.byGen, nil
	}
	oldest := slices.Clone(rels)
	slices.Reverse(oldest)
	shas, err := gitview.Chain(c.loc, oldest)
	if err != nil {
		return nil, err
	}
	byGen := make(map[int64]string, len(oldest))
	for i, r := range oldest {
		byGen[r.Generation] = shas[i]
	}
	if rels[0].Current {
		c.cached.Add(app, commitIndex{head: rels[0].Generation, byGen: byGen}, int64(len(app)+64*len(rels)))
	}
	return byGen, nil
}

// minSearch is the fewest hex digits a commit or digest is searched by.
const minSearch = 7

// find returns the releases of rels (newest first) that q names: its
// generation, a prefix of 7 or more of its commit, or of its digest
// (with or without "sha256:").
func find(q string, rels []store.Release, byGen map[int64]string) []store.Release {
	q = strings.ToLower(strings.TrimSpace(q))
	if gen, err := strconv.ParseInt(q, 10, 64); err == nil && gen > 0 {
		for _, r := range rels {
			if r.Generation == gen {
				return []store.Release{r}
			}
		}
	}
	hex := strings.TrimPrefix(q, "sha256:")
	if len(hex) < minSearch || strings.Trim(hex, "0123456789abcdef") != "" {
		return nil
	}
	var out []store.Release
	for _, r := range rels {
		if strings.HasPrefix(byGen[r.Generation], hex) || strings.HasPrefix(strings.TrimPrefix(r.Digest, "sha256:"), hex) {
			out = append(out, r)
		}
	}
	return out
}
