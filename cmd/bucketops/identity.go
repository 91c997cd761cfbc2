package main

import (
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/store"
)

// ciIdentity names who runs this command from the usual CI variables, else
// user@host: the default bucketops-author.
func ciIdentity(getenv func(string) string) string {
	join := func(who, where string) string {
		switch {
		case who == "":
			return where
		case where == "":
			return who
		}
		return who + " (" + where + ")"
	}
	switch {
	case getenv("GITHUB_ACTIONS") == "true":
		return join(getenv("GITHUB_ACTOR"), "github-actions "+getenv("GITHUB_REPOSITORY"))
	case getenv("GITLAB_CI") == "true":
		return join(getenv("GITLAB_USER_LOGIN"), "gitlab-ci "+getenv("CI_PROJECT_PATH"))
	case getenv("BUILDKITE") == "true":
		return join(getenv("BUILDKITE_BUILD_CREATOR_EMAIL"), "buildkite "+getenv("BUILDKITE_PIPELINE_SLUG"))
	case getenv("CIRCLECI") == "true":
		return join(getenv("CIRCLE_USERNAME"), "circleci "+getenv("CIRCLE_PROJECT_REPONAME"))
	case getenv("JENKINS_URL") != "":
		return join(getenv("BUILD_USER_ID"), "jenkins "+getenv("JOB_NAME"))
	case getenv("BUILD_ID") != "" && getenv("PROJECT_ID") != "":
		return "cloud-build " + getenv("PROJECT_ID")
	}
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

// ciSource names the commit being deployed from the usual CI variables.
func ciSource(getenv func(string) string) string {
	for _, pair := range [][2]string{
		{"GITHUB_REPOSITORY", "GITHUB_SHA"},
		{"CI_PROJECT_PATH", "CI_COMMIT_SHA"},
		{"BUILDKITE_REPO", "BUILDKITE_COMMIT"},
		{"CIRCLE_PROJECT_REPONAME", "CIRCLE_SHA1"},
		{"GIT_URL", "GIT_COMMIT"},
	} {
		if sha := getenv(pair[1]); sha != "" {
			if repo := getenv(pair[0]); repo != "" {
				return repo + "@" + sha
			}
			return sha
		}
	}
	return ""
}

// publishFlags are the flags of every verb that writes a release.
type publishFlags struct {
	sequence     uint64
	source       string
	author       string
	message      string
	ifGeneration int64
	policyFile   string
	signKey      string
	labels       map[string]string
	retainFor    time.Duration
	retainUntil  string
	retainMode   string
	// retention is what validate made of the three above.
	retention *store.Retention
}

func (f *publishFlags) register(cmd *cobra.Command, withSource bool) {
	fs := cmd.Flags()
	fs.Uint64Var(&f.sequence, "sequence", 0, "ordering number of this release (CI build number, commit time); a higher one already published makes this one stale (exit 4)")
	if withSource {
		fs.StringVar(&f.source, "source", "", "what the release was built from (default: the commit from the CI variables)")
	}
	fs.StringVar(&f.author, "author", "", "who publishes (default: the CI identity from the CI variables, else user@host)")
	fs.StringVarP(&f.message, "message", "m", "", "free text recorded with the release")
	fs.Int64Var(&f.ifGeneration, "if-generation", -1, "strict mode: write only if the head is this generation (0: only if the app has no release); one attempt, otherwise exit 3")
	fs.StringVar(&f.signKey, "sign-key", "", "sign the release with this Ed25519 key: a PEM file (bucketops keygen) or gcpkms://projects/…/cryptoKeyVersions/N (default $BUCKETOPS_SIGNING_KEY)")
	fs.StringToStringVar(&f.labels, "label", nil, "label the app for ApplicationSet templates, key=value as a Kubernetes label; repeat for more (a promote or rollback keeps the source's labels unless given)")
	fs.DurationVar(&f.retainFor, "retain-for", 0, "keep the new generation undeletable this long with GCS Object Retention, e.g. 8760h; the bucket must have object retention enabled (docs/signing.md)")
	fs.StringVar(&f.retainUntil, "retain-until", "", "keep the new generation undeletable until this RFC 3339 time (instead of --retain-for)")
	fs.StringVar(&f.retainMode, "retain-mode", store.RetentionUnlocked, "Object Retention mode with --retain-for/--retain-until: Unlocked (an administrator may shorten it) or Locked (only ever extended)")
	fs.StringVar(&f.policyFile, "policy", "", "tenancy policy file to check the release against before writing (default $BUCKETOPS_POLICY); refused: exit 2")
}

func (f *publishFlags) publication(cmd *cobra.Command, e *env) store.Publication {
	p := store.Publication{
		Sequence: f.sequence,
		Source:   strings.TrimSpace(f.source),
		Author:   strings.TrimSpace(f.author),
		Message:  f.message,
	}
	if cmd.Flags().Changed("label") {
		p.Labels = f.labels
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
	}
	if p.Author == "" {
		p.Author = ciIdentity(e.getenv)
	}
	if p.Source == "" && cmd.Flags().Lookup("source") != nil {
		p.Source = ciSource(e.getenv)
	}
	if cmd.Flags().Changed("if-generation") {
		g := f.ifGeneration
		p.IfGeneration = &g
	}
	p.Retention = f.retention
	return p
}

func (f *publishFlags) validate(e *env) error {
	if f.ifGeneration < -1 {
		return usagef("--if-generation %d: a generation is 0 (no release yet) or positive", f.ifGeneration)
	}
	// GCS caps an object's custom metadata at 8 KiB in all; a signed
	// release's statement repeats these.
	limit, signed := 6<<10, ""
	if f.signingKey(e) != "" {
		limit, signed = provenance.MaxSignedText, " for a signed release"
	}
	if err := store.ValidateLabels(f.labels); err != nil {
		return usagef("--label: %v", err)
	}
	if err := f.validateRetention(time.Now()); err != nil {
		return err
	}
	if n := len(f.message) + len(f.source) + len(f.author) + len(store.EncodeLabels(f.labels)); n > limit {
		return usagef("--message, --source, --author and --label add up to %d bytes, the limit%s is %d: keep long notes in the source they link to", n, signed, limit)
	}
	return nil
}

// validateRetention turns --retain-for, --retain-until and --retain-mode
// into the publication's retention.
func (f *publishFlags) validateRetention(now time.Time) error {
	f.retention = nil
	var until time.Time
	switch {
	case f.retainFor != 0 && f.retainUntil != "":
		return usagef("--retain-for and --retain-until both say how long to keep the release: give one")
	case f.retainFor < 0:
		return usagef("--retain-for %s: give a positive duration, such as 8760h for a year", f.retainFor)
	case f.retainFor > 0:
		until = now.Add(f.retainFor)
	case f.retainUntil != "":
		t, err := time.Parse(time.RFC3339, f.retainUntil)
		if err != nil {
			return usagef("--retain-until %q: give an RFC 3339 time, such as 2027-12-31T00:00:00Z", f.retainUntil)
		}
		until = t
	default:
		return nil
	}
	r := &store.Retention{Until: until, Mode: f.retainMode}
	if err := r.Validate(now); err != nil {
		return usagef("--retain-for/--retain-until/--retain-mode: %v", err)
	}
	f.retention = r
	return nil
}
