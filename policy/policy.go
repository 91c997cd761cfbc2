// Package policy owns the tenancy policy: what the releases under each app
// prefix may contain, which keys may decrypt their Secrets, which Argo CD
// projects may deploy them, and from where they may be copied.
//
// The contract: one file, enforced twice. bucketops push, promote and
// rollback check a release against it before writing anything (a clear
// error, nothing written), and the bridge checks again at every render,
// failing closed, because anyone with write access to the bucket can
// bypass the CLI. An app no rule covers is refused. Without a policy file
// everything is allowed: one tenant, every bucket writer trusted with every
// Secret the bridge can decrypt.
package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/bucketops/bucketops/store"
)

// ErrDenied is wrapped by every Violation.
var ErrDenied = errors.New("denied by policy")

// Reasons a Violation gives: stable words for API responses and metrics.
const (
	ReasonNoRule          = "no_rule"
	ReasonProject         = "project"
	ReasonNamespace       = "namespace"
	ReasonClusterScoped   = "cluster_scoped"
	ReasonPlaintextSecret = "plaintext_secret"
	ReasonEncrypted       = "encrypted_document"
	ReasonKey             = "decryption_key"
	ReasonCopy            = "copy"
)

// Violation says which rule refused what, and what to do.
type Violation struct {
	App string
	// Prefix is the rule's prefix ("" when no rule covers the app).
	Prefix string
	// Reason is one of the Reason constants.
	Reason string
	// Detail names the object or value at fault and what to do.
	Detail string
}

func (v *Violation) Error() string {
	rule := "no policy rule"
	if v.Reason != ReasonNoRule {
		rule = fmt.Sprintf("policy rule %q", v.Prefix)
	}
	return fmt.Sprintf("%s: %s: refused by %s: %s", v.App, ErrDenied, rule, v.Detail)
}

// Unwrap makes every Violation an ErrDenied.
func (v *Violation) Unwrap() error { return ErrDenied }

// Key is a decryption key a rule allows: an age recipient or a Cloud KMS
// key.
type Key struct {
	// Type is "age" or "gcp_kms", as sops names them.
	Type string
	// ID is the age recipient (age1…) or the KMS key's resource name
	// (projects/…/locations/…/keyRings/…/cryptoKeys/…).
	ID string
}

func (k Key) String() string {
	if k.Type == "gcp_kms" {
		return "gcpkms://" + k.ID
	}
	return k.ID
}

// Rule is what applies to the apps under one prefix.
type Rule struct {
	// Prefix is an app path prefix of whole segments (team-a covers
	// team-a/api, not team-ab/api); "" covers every app.
	Prefix string `yaml:"prefix"`
	// Projects are the Argo CD projects whose Applications may deploy the
	// apps; "*" is any project.
	Projects []string `yaml:"projects"`
	// Namespaces the objects may be in, explicitly or through the
	// Application's destination namespace: names or path.Match patterns
	// (team-a-*), "*" for any.
	Namespaces []string `yaml:"namespaces"`
	// DecryptionKeys are the only keys tried to decrypt the apps' SOPS
	// documents: age recipients (age1…) and Cloud KMS keys
	// (gcpkms://projects/…/cryptoKeys/K or projects/…/cryptoKeys/K).
	DecryptionKeys []string `yaml:"decryptionKeys"`
	// AllowClusterScoped lets releases hold cluster-scoped objects
	// (Namespace, ClusterRole, CustomResourceDefinition…); off by default.
	AllowClusterScoped bool `yaml:"allowClusterScoped"`
	// AllowPlaintextSecrets lets releases hold a Secret that isn't
	// SOPS-encrypted; off by default.
	AllowPlaintextSecrets bool `yaml:"allowPlaintextSecrets"`
	// PromoteFrom are app prefixes whose releases promote may copy into
	// these apps; copies within the rule's own prefix (rollback, promote
	// between its apps) are always allowed.
	PromoteFrom []string `yaml:"promoteFrom"`

	keys []Key
}

// Policy is a parsed policy file.
type Policy struct {
	// Rules, longest prefix first.
	Rules []*Rule
	// Digest is "sha256:<hex>" of the file, to tell versions apart.
	Digest string
}

// file is the policy file's shape.
type file struct {
	Rules []*Rule `yaml:"rules"`
}

// Parse reads a policy file. Every problem is reported, each naming its
// rule.
func Parse(data []byte) (*Policy, error) {
	var f file
	if err := DecodeStrict(data, &f); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if len(f.Rules) == 0 {
		return nil, errors.New("policy: no rules; a policy holds rules: [{prefix, projects, namespaces, …}]")
	}
	var errs []error
	seen := map[string]bool{}
	for i, r := range f.Rules {
		var where string
		var perrs []error
		r.Prefix, where, perrs = RulePrefix("policy", i, r.Prefix, seen)
		errs = append(errs, perrs...)
		if len(r.Projects) == 0 {
			errs = append(errs, fmt.Errorf(`%s: no projects: list the Argo CD projects that may deploy these apps, or "*" for any`, where))
		}
		if len(r.Namespaces) == 0 {
			errs = append(errs, fmt.Errorf(`%s: no namespaces: list the namespaces these apps may use, or "*" for any`, where))
		}
		for _, ns := range r.Namespaces {
			if _, err := path.Match(ns, ""); err != nil || ns == "" {
				errs = append(errs, fmt.Errorf("%s: namespace pattern %q is malformed", where, ns))
			}
		}
		for _, k := range r.DecryptionKeys {
			key, err := ParseKey(k)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				continue
			}
			r.keys = append(r.keys, key)
		}
		for _, p := range r.PromoteFrom {
			if err := store.ValidatePrefix(strings.Trim(p, "/")); err != nil || p == "" {
				errs = append(errs, fmt.Errorf("%s: promoteFrom %q: want an app prefix such as staging/payments", where, p))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortStableFunc(f.Rules, func(a, b *Rule) int { return len(b.Prefix) - len(a.Prefix) })
	sum := sha256.Sum256(data)
	return &Policy{Rules: f.Rules, Digest: "sha256:" + hex.EncodeToString(sum[:])}, nil
}

// DecodeStrict decodes a policy file's YAML into v, refusing a field v
// doesn't have: a misspelt key must not silently mean its default. An
// unknown field is named with its line, the closest known field as a
// suggestion, and the fields that are known there.
func DecodeStrict(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(v)
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	fields := yamlFields(reflect.TypeOf(v), map[string][]string{})
	msgs := make([]string, len(te.Errors))
	for i, e := range te.Errors {
		msgs[i] = e
		m := unknownField.FindStringSubmatch(e)
		if m == nil {
			continue
		}
		known := fields[m[3]]
		msg := fmt.Sprintf("line %s: unknown field %q", m[1], m[2])
		if best := closest(m[2], known); best != "" {
			msg += fmt.Sprintf(": did you mean %q?", best)
		}
		if len(known) > 0 {
			msg += " (known here: " + strings.Join(known, ", ") + ")"
		}
		msgs[i] = msg
	}
	return errors.New(strings.Join(msgs, "; "))
}

// unknownField is how yaml.v3 words a field KnownFields refused.
var unknownField = regexp.MustCompile(`^line (\d+): field (\S+) not found in type (\S+)$`)

// yamlFields maps each struct type reachable from t, by the name yaml.v3
// gives it in errors, to its fields' YAML names.
func yamlFields(t reflect.Type, out map[string][]string) map[string][]string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return out
	}
	if _, seen := out[t.String()]; seen {
		return out
	}
	out[t.String()] = nil
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		names = append(names, name)
		yamlFields(f.Type, out)
	}
	out[t.String()] = names
	return out
}

// closest is the name nearest to s, within two edits (or a case or a
// plural apart), or "".
func closest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		d := editDistance(strings.ToLower(s), strings.ToLower(n))
		if strings.EqualFold(s+"s", n) || strings.EqualFold(s, n+"s") {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Load reads and parses the policy file at name.
func Load(name string) (*Policy, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

// ParseKey reads a decryption key as a rule names it.
func ParseKey(s string) (Key, error) {
	switch {
	case strings.HasPrefix(s, "age1") && !strings.ContainsAny(s, " \t"):
		return Key{Type: "age", ID: s}, nil
	case strings.HasPrefix(s, "gcpkms://"):
		s = strings.TrimPrefix(s, "gcpkms://")
		fallthrough
	case strings.HasPrefix(s, "projects/"):
		parts := strings.Split(s, "/")
		if len(parts) != 8 || parts[2] != "locations" || parts[4] != "keyRings" || parts[6] != "cryptoKeys" || slices.Contains(parts, "") {
			return Key{}, fmt.Errorf("decryption key %q: a Cloud KMS key is gcpkms://projects/P/locations/L/keyRings/R/cryptoKeys/K", s)
		}
		return Key{Type: "gcp_kms", ID: s}, nil
	}
	return Key{}, fmt.Errorf("decryption key %q: want an age recipient (age1…) or a Cloud KMS key (gcpkms://projects/…/cryptoKeys/K); never a secret key", s)
}

// RuleFor returns the rule of longest prefix covering app.
func (p *Policy) RuleFor(app string) (*Rule, bool) {
	for _, r := range p.Rules {
		if r.Covers(app) {
			return r, true
		}
	}
	return nil, false
}

// Rule returns the rule for app, or a Violation when none covers it.
func (p *Policy) Rule(app string) (*Rule, error) {
	r, ok := p.RuleFor(app)
	if !ok {
		return nil, &Violation{App: app, Reason: ReasonNoRule, Detail: "no rule's prefix covers this app; add a rule for it to the policy file"}
	}
	return r, nil
}

// Covers reports whether app is under the rule's prefix, by whole segments.
func (r *Rule) Covers(app string) bool {
	return Under(app, r.Prefix)
}

// Under reports whether app is under prefix by whole segments ("" covers
// every app): how every policy file matches its rules' prefixes.
func Under(app, prefix string) bool {
	return prefix == "" || app == prefix || strings.HasPrefix(app, prefix+"/")
}

// Keys returns the decryption keys the rule allows.
func (r *Rule) Keys() []Key { return slices.Clone(r.keys) }

// AllowsKey reports whether the rule lets keyType (age or gcp_kms) id
// decrypt.
func (r *Rule) AllowsKey(keyType, id string) bool {
	return slices.Contains(r.keys, Key{Type: keyType, ID: id})
}

// CheckProject refuses an Argo CD project the rule doesn't list.
func (r *Rule) CheckProject(app, project string) error {
	if slices.Contains(r.Projects, "*") || slices.Contains(r.Projects, project) {
		return nil
	}
	if project == "" {
		return r.deny(app, ReasonProject, "the Argo CD project of the Application is unknown, and only projects "+list(r.Projects)+" may deploy this app: deploy it from an Application of one of them")
	}
	return r.deny(app, ReasonProject, fmt.Sprintf("Argo CD project %q may not deploy this app; only %s may: move the Application to one of those projects, or add the project to the rule", project, list(r.Projects)))
}

// allowsNamespace reports whether ns matches one of the rule's namespaces.
func (r *Rule) allowsNamespace(ns string) bool {
	for _, pat := range r.Namespaces {
		if ok, _ := path.Match(pat, ns); ok {
			return true
		}
	}
	return false
}

// CheckCopy refuses a copy (promote, rollback) of a release of src into dst
// that dst's rule doesn't allow.
func (p *Policy) CheckCopy(src, dst string) error {
	r, err := p.Rule(dst)
	if err != nil {
		return err
	}
	if r.Covers(src) {
		if other, _ := p.RuleFor(src); other == r {
			return nil
		}
	}
	for _, from := range r.PromoteFrom {
		if Under(src, strings.Trim(from, "/")) {
			return nil
		}
	}
	return r.deny(dst, ReasonCopy, fmt.Sprintf("releases of %s may not be copied here; the rule allows copies from its own prefix and from promoteFrom %s: publish the release here with bucketops push, or add %s's prefix to the rule's promoteFrom", src, list(r.PromoteFrom), src))
}

func (r *Rule) deny(app, reason, detail string) *Violation {
	return &Violation{App: app, Prefix: r.Prefix, Reason: reason, Detail: detail}
}

func list(items []string) string {
	if len(items) == 0 {
		return "(none)"
	}
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// RulePrefix checks the prefix of rule i (from 0) of a policy file of
// kind ("policy", "trust policy"): a valid app path prefix that no rule
// before it has (seen records them). It returns the prefix trimmed of
// slashes, how errors name the rule, and what is wrong with it.
func RulePrefix(kind string, i int, prefix string, seen map[string]bool) (string, string, []error) {
	where := fmt.Sprintf("%s: rule %d (prefix %q)", kind, i+1, prefix)
	prefix = strings.Trim(prefix, "/")
	var errs []error
	if err := store.ValidatePrefix(prefix); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", where, err))
	}
	if seen[prefix] {
		errs = append(errs, fmt.Errorf("%s: another rule has the same prefix", where))
	}
	seen[prefix] = true
	return prefix, where, errs
}

// RuleCount is the number of rules, for a watcher's gauge and logs.
func (p *Policy) RuleCount() int { return len(p.Rules) }

// Version is the file's digest.
func (p *Policy) Version() string { return p.Digest }
