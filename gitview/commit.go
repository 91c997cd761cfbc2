// Package gitview owns the git view of the bucket: each app's history as a
// read-only git repository, one commit per release, served over smart
// HTTP, so that Argo CD sees every release as a revision (History,
// rollback, pinning by SHA, its manifest cache keyed by it) with no git
// repository anywhere.
//
// The contract that matters: the commits are a pure function of the
// bucket's history. The same releases give the same SHAs on every bridge
// replica and after every restart, and a commit, once served, is never
// rewritten: Argo CD records SHAs, and must always be able to fetch them
// again. The format of a commit (release.json, its identities, message
// and trailers) is frozen by golden SHAs in the tests; changing it
// orphans every SHA Argo CD has recorded.
//
// So the format is versioned by the bucket: each release's
// bucketops-format (store.Release.Format) says which format its commit
// has. Format 1 (no bucketops-format: releases published before it) is
// the original. Format 2 adds, after the original trailers, a
// Bucketops-Source trailer and, when the source names a git commit
// (ParseSource), the Argocd-reference-commit-repourl and -sha trailers
// that Argo CD 3.x parses into the revision's references. A format this
// version doesn't know is built as the newest it knows. A new format
// comes with a new bucketops-format value and golden SHAs of its own.
package gitview

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/bucketops/bucketops/store"
)

// FileName is the one file of every commit's tree.
const FileName = "release.json"

// Branch is the one branch: HEAD points to it, it points to the newest
// release.
const Branch = "refs/heads/main"

// ReleaseFile is release.json: which release a commit is. The plugin reads
// it from the directory Argo CD checks out and renders exactly that
// release. Field order and names are part of the frozen format.
type ReleaseFile struct {
	Bucket     string `json:"bucket"`
	App        string `json:"app"`
	Generation int64  `json:"generation"`
	Digest     string `json:"digest"`
	Sequence   uint64 `json:"sequence"`
	Kind       string `json:"kind"`
	Author     string `json:"author"`
	Message    string `json:"message"`
	Source     string `json:"source"`
	Origin     string `json:"origin"`
	Published  string `json:"published"`
}

// NewReleaseFile is the release.json of rel, a release in loc.
func NewReleaseFile(loc store.Location, rel store.Release) ReleaseFile {
	return ReleaseFile{
		Bucket: loc.String(), App: rel.App, Generation: rel.Generation, Digest: rel.Digest,
		Sequence: rel.Sequence, Kind: rel.Kind, Author: rel.Author, Message: rel.Message,
		Source: rel.Source, Origin: rel.Origin, Published: rel.Time.UTC().Format(time.RFC3339Nano),
	}
}

// Encode returns the file's bytes: JSON in field order, two-space indent,
// nothing escaped that JSON doesn't require, a final newline.
func (f ReleaseFile) Encode() []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		panic(err) // strings and numbers always encode
	}
	return b.Bytes()
}

// ParseReleaseFile reads release.json strictly: every field present, no
// other, a valid app and generation.
func ParseReleaseFile(data []byte) (ReleaseFile, error) {
	var f ReleaseFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return ReleaseFile{}, fmt.Errorf("%s: %w", FileName, err)
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(data, &present); err != nil {
		return ReleaseFile{}, fmt.Errorf("%s: %w", FileName, err)
	}
	for _, k := range []string{"bucket", "app", "generation", "digest", "sequence", "kind", "author", "message", "source", "origin", "published"} {
		if _, ok := present[k]; !ok {
			return ReleaseFile{}, fmt.Errorf("%s: field %q missing; it was not written by bucketops", FileName, k)
		}
	}
	if err := store.ValidateApp(f.App); err != nil {
		return ReleaseFile{}, fmt.Errorf("%s: %w", FileName, err)
	}
	if f.Generation <= 0 {
		return ReleaseFile{}, fmt.Errorf("%s: generation %d is not a generation", FileName, f.Generation)
	}
	if f.Kind != store.KindRelease && f.Kind != store.KindTombstone {
		return ReleaseFile{}, fmt.Errorf("%s: kind %q is neither %s nor %s", FileName, f.Kind, store.KindRelease, store.KindTombstone)
	}
	return f, nil
}

// commitObjects encodes the blob, tree and commit of rel, whose parent
// commit is parent (ZeroHash for the first release).
func commitObjects(loc store.Location, rel store.Release, parent plumbing.Hash) (blob, tree, commit *plumbing.MemoryObject, err error) {
	blob = &plumbing.MemoryObject{}
	blob.SetType(plumbing.BlobObject)
	if _, err := blob.Write(NewReleaseFile(loc, rel).Encode()); err != nil {
		return nil, nil, nil, err
	}
	t := &object.Tree{Entries: []object.TreeEntry{{Name: FileName, Mode: filemode.Regular, Hash: blob.Hash()}}}
	tree = &plumbing.MemoryObject{}
	if err := t.Encode(tree); err != nil {
		return nil, nil, nil, err
	}
	who := signature(rel)
	c := &object.Commit{
		Author:    who,
		Committer: who,
		Message:   message(rel),
		TreeHash:  tree.Hash(),
	}
	if !parent.IsZero() {
		c.ParentHashes = []plumbing.Hash{parent}
	}
	commit = &plumbing.MemoryObject{}
	if err := c.Encode(commit); err != nil {
		return nil, nil, nil, err
	}
	return blob, tree, commit, nil
}

// signature is the publisher at the publish time, in whole seconds, UTC:
// bucketops-author read as "Name <email>" when it is one, as an email when
// it looks like one, else as a name.
func signature(rel store.Release) object.Signature {
	name, email := strings.TrimSpace(rel.Author), ""
	if a, err := mail.ParseAddress(name); err == nil && strings.Contains(name, "<") {
		name, email = a.Name, a.Address
		if name == "" {
			name = a.Address
		}
	} else if strings.Contains(name, "@") && !strings.ContainsAny(name, " \t") {
		email = name
	}
	name, email = ident(name), ident(email)
	if name == "" {
		name = "unknown"
	}
	return object.Signature{Name: name, Email: email, When: rel.Time.UTC().Truncate(time.Second)}
}

// ident drops what git forbids in an identity.
func ident(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '<' || r == '>' || r == '\n' || r == '\r' || r == 0 {
			return -1
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

// message is the release's message (or one saying what happened), then
// the trailers that name the release.
func message(rel store.Release) string {
	msg := strings.TrimRight(strings.ReplaceAll(strings.ReplaceAll(rel.Message, "\r\n", "\n"), "\r", "\n"), " \t\n")
	if msg == "" {
		msg = "Publish " + rel.App + "@" + strconv.FormatInt(rel.Generation, 10)
		if rel.Kind == store.KindTombstone {
			msg = "Retire " + rel.App
		}
	}
	var b strings.Builder
	b.WriteString(msg)
	b.WriteString("\n\nBucketops-Generation: " + strconv.FormatInt(rel.Generation, 10) + "\n")
	b.WriteString("Bucketops-Digest: " + rel.Digest + "\n")
	if rel.Kind == store.KindTombstone {
		b.WriteString("Bucketops-Kind: tombstone\n")
	}
	if rel.Origin != "" {
		b.WriteString("Bucketops-Origin: " + rel.Origin + "\n")
	}
	if rel.Format >= 2 {
		writeSource(&b, rel.Source)
	}
	return b.String()
}

// writeSource writes the trailers of format 2: Bucketops-Source, and when
// the source names a git commit, the Argocd-reference-commit-* trailers
// Argo CD (v3.1 and later) parses into a revision's references: the sha,
// and the repository when the source gives it as a URL. The author, date,
// subject and body of that commit are not in the bucket, so they are not
// written.
func writeSource(b *strings.Builder, source string) {
	source = strings.Join(strings.Fields(source), " ")
	if source == "" {
		return
	}
	b.WriteString("Bucketops-Source: " + source + "\n")
	c, ok := ParseSource(source)
	if !ok {
		return
	}
	if c.RepoURL != "" {
		b.WriteString("Argocd-reference-commit-repourl: " + c.RepoURL + "\n")
	}
	b.WriteString("Argocd-reference-commit-sha: " + c.SHA + "\n")
}

// SourceCommit is the git commit a release's source names.
type SourceCommit struct {
	// RepoURL is the repository's URL, empty when the source names the
	// repository otherwise (acme/payments, git@host:path).
	RepoURL string
	// SHA is the commit's hex name, lowercase: 7 to 40 digits, full or
	// abbreviated, as Argo CD accepts it.
	SHA string
}

// ParseSource reads the git commit a bucketops-source names, in one of
// the forms CI gives it:
//
//   - a commit URL: http(s)://HOST/REPO/commit/SHA (GitHub, Gitea),
//     …/REPO/-/commit/SHA (GitLab), …/REPO/commits/SHA (Bitbucket); the
//     repository URL is what comes before /commit;
//   - REPO@SHA, bucketops push's default from the CI variables
//     (acme/payments@0123abc…); REPO is the repository URL when it is one
//     (https://, http://, ssh://, git://), else only the SHA is known;
//   - a bare SHA.
//
// Anything else (a pipeline URL, free text) names no commit.
func ParseSource(source string) (SourceCommit, bool) {
	if u, err := url.Parse(source); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && u.RawQuery == "" && u.Fragment == "" {
		path := strings.TrimSuffix(u.Path, "/")
		i := strings.LastIndex(path, "/")
		sha, rest := path[i+1:], path[:max(i, 0)]
		for _, marker := range []string{"/-/commit", "/commit", "/commits"} {
			if repo, ok := strings.CutSuffix(rest, marker); ok && repo != "" && isSHA(sha) {
				return SourceCommit{RepoURL: u.Scheme + "://" + u.Host + repo, SHA: strings.ToLower(sha)}, true
			}
		}
	}
	if i := strings.LastIndex(source, "@"); i >= 0 {
		repo, sha := source[:i], source[i+1:]
		if repo == "" || !isSHA(sha) || strings.ContainsAny(repo, " \t") {
			return SourceCommit{}, false
		}
		c := SourceCommit{SHA: strings.ToLower(sha)}
		if u, err := url.Parse(repo); err == nil && u.Host != "" && slices.Contains([]string{"https", "http", "ssh", "git"}, u.Scheme) {
			c.RepoURL = repo
		}
		return c, true
	}
	if isSHA(source) {
		return SourceCommit{SHA: strings.ToLower(source)}, true
	}
	return SourceCommit{}, false
}

// isSHA reports whether s is a commit's hex name, full or abbreviated.
func isSHA(s string) bool {
	if len(s) < 7 || len(s) > 40 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// Chain computes the commit SHAs of an app's releases given oldest first:
// what bucketops log shows and rollback --to accepts. It builds the same
// commits the view serves.
func Chain(loc store.Location, releases []store.Release) ([]string, error) {
	out := make([]string, len(releases))
	parent := plumbing.ZeroHash
	for i, rel := range releases {
		if i > 0 && rel.Generation <= releases[i-1].Generation {
			return nil, errors.New("gitview: releases must be given oldest first")
		}
		_, _, c, err := commitObjects(loc, rel, parent)
		if err != nil {
			return nil, err
		}
		parent = c.Hash()
		out[i] = parent.String()
	}
	return out, nil
}

// ShortSHA is the shortest prefix of sha, n hex digits or more, that
// names a commit wherever a release is named: with a letter among its
// digits, since the CLI and the auditors' release URLs read digits alone
// as a generation. A SHA with no letter at all is returned whole.
func ShortSHA(sha string, n int) string {
	i := strings.IndexAny(sha, "abcdef")
	if i < 0 {
		return sha
	}
	return sha[:min(len(sha), max(n, i+1))]
}
