package fleet

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/bucketops/bucketops/bench/docsection"
)

// ReadmeSection is the marked section of the README a run rewrites: the
// race's headline, from the same Report as the doc's section.
const ReadmeSection = "bench-argocd-readme"

// Readme returns the README's paragraph about the race; docLink is the
// report's address relative to the README. It is "" when the run lacks the
// git monorepo's or bucketops' bursts, which it compares.
func Readme(r Report, docLink string) string {
	bo, git, paths := r.find(Bucket), r.find(Git), r.find(GitPaths)
	if bo == nil || git == nil || len(bo.Bursts) == 0 || len(git.Bursts) == 0 {
		return ""
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	bl, gl := bo.MedianBurst().Live, git.MedianBurst().Live
	p("On a real Argo CD %s with a fleet of %d apps (%s, one %d-core machine, [`make bench-argocd`](%s)), ", cmp.Or(r.ArgoCD, "v2.14"), r.Apps, r.Date, r.CPUs, docLink)
	p("a release of every app at once went live in %s with bucketops against %s for a git monorepo ", fmtDur(bl), fmtDur(gl))
	if bl <= gl {
		p("(**%s** as soon", fmtRatio(float64(gl)/float64(bl)))
	} else {
		// "0.9× as soon" would hide that it was later, and round a few
		// percent away.
		p("(**%.0f%% later**", (float64(bl)/float64(gl)-1)*100)
	}
	if paths != nil && len(paths.Bursts) > 0 {
		p("; %s with `manifest-generate-paths`", fmtDur(paths.MedianBurst().Live))
	}
	p(", median of %d). ", r.Bursts)
	if s, g := bo.Stream, git.Stream; s != nil && g != nil && s.Releases > 0 && g.Releases > 0 {
		per := func(s *Stream, feed string) (gens, cpu float64) {
			return float64(s.Generations) / float64(s.Releases), s.ArgoCPU(feed) / float64(s.Releases)
		}
		bg, bc := per(s, Bucket)
		gg, gc := per(g, Git)
		ps := paths.streamOrNil()
		p("One release a second for %s took %s from publish to Synced at the median with bucketops against %s", r.Stream, fmtDur(Percentile(s.Latencies, 50)), fmtDur(Percentile(g.Latencies, 50)))
		// The monorepo's better configuration is named too, lest the
		// paragraph compare with the weaker one only.
		if ps != nil {
			p(" (%s with `manifest-generate-paths`)", fmtDur(Percentile(ps.Latencies, 50)))
		}
		p(", with **%.1f manifest generations per release** against %.1f", bg, gg)
		if ps != nil {
			pg, _ := per(ps, GitPaths)
			p(" (%.1f with `manifest-generate-paths`)", pg)
		}
		p(", and %.2f CPU seconds of Argo CD and the bridge per release against %.2f of Argo CD and the git server. ", bc, gc)
	}
	p("The benchmark report says where the time goes.\n")
	return b.String()
}

func (f *Feed) streamOrNil() *Stream {
	if f == nil || f.Stream == nil || f.Stream.Releases == 0 {
		return nil
	}
	return f.Stream
}

// WriteReadme rewrites the README section of the file at path from r.
func WriteReadme(r Report, path, docLink string) error {
	text := Readme(r, docLink)
	if text == "" {
		return fmt.Errorf("update %s: the run has no git monorepo and bucketops bursts to compare", path)
	}
	return docsection.Update(path, ReadmeSection, text)
}
