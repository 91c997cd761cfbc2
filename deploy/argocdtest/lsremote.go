package argocdtest

import (
	"fmt"
	"regexp"

	"github.com/argoproj/argo-cd/v2/pkg/apis/application/v1alpha1"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"
)

var fullSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// LsRemote resolves an Application's targetRevision as Argo CD's
// repo-server does: a full SHA is taken as it is, anything else is looked
// up with go-git's ls-remote of repoURL, with the credentials sent up
// front (HEAD through its symref).
func LsRemote(username, password string) func(*v1alpha1.Application) (string, error) {
	return func(a *v1alpha1.Application) (string, error) {
		src := a.Spec.Source
		if src == nil {
			return "", fmt.Errorf("application %s has no single source", a.Name)
		}
		rev := src.TargetRevision
		if fullSHA.MatchString(rev) {
			return rev, nil
		}
		remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{src.RepoURL}})
		refs, err := remote.List(&git.ListOptions{Auth: &githttp.BasicAuth{Username: username, Password: password}})
		if err != nil {
			return "", fmt.Errorf("ls-remote %s: %w", src.RepoURL, err)
		}
		byName := map[plumbing.ReferenceName]*plumbing.Reference{}
		for _, r := range refs {
			byName[r.Name()] = r
		}
		names := []plumbing.ReferenceName{plumbing.ReferenceName(rev), plumbing.NewBranchReferenceName(rev), plumbing.NewTagReferenceName(rev)}
		if rev == "" || rev == "HEAD" {
			names = []plumbing.ReferenceName{plumbing.HEAD}
		}
		for _, n := range names {
			r, ok := byName[n]
			for i := 0; ok && r.Type() == plumbing.SymbolicReference && i < 5; i++ {
				r, ok = byName[r.Target()]
			}
			if ok {
				return r.Hash().String(), nil
			}
		}
		return "", fmt.Errorf("unable to resolve %q to a commit SHA in %s", rev, src.RepoURL)
	}
}
