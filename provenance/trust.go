package provenance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/bucketops/bucketops/policy"
)

// What a trust rule requires of the releases it covers.
const (
	// RequireSigned: serve only releases that verify.
	RequireSigned = "signed"
	// RequireWarn: serve everything, log and count what doesn't verify.
	RequireWarn = "warn"
	// RequireOff: don't verify.
	RequireOff = "off"
)

// TrustRule is what applies to the apps under one prefix.
type TrustRule struct {
	// Prefix is an app path prefix of whole segments; "" covers every app.
	Prefix string `yaml:"prefix"`
	// Require is signed, warn or off.
	Require string `yaml:"require"`
	// KeyNames name the trust policy's keys allowed to sign these apps.
	KeyNames []string `yaml:"keys"`

	keys Keys
}

// Keys are the keys the rule trusts.
func (r *TrustRule) Keys() Keys { return r.keys }

// TrustPolicy is a parsed trust policy file: which keys may sign the apps
// under each prefix, and whether the bridge requires it.
type TrustPolicy struct {
	// Rules, longest prefix first.
	Rules []*TrustRule
	// Digest is "sha256:<hex>" of the file.
	Digest string
}

// RuleCount is the number of rules (policy.Document).
func (p *TrustPolicy) RuleCount() int { return len(p.Rules) }

// Version is the file's digest (policy.Document).
func (p *TrustPolicy) Version() string { return p.Digest }

// RuleFor returns the rule of longest prefix covering app.
func (p *TrustPolicy) RuleFor(app string) (*TrustRule, bool) {
	for _, r := range p.Rules {
		if policy.Under(app, r.Prefix) {
			return r, true
		}
	}
	return nil, false
}

type trustFile struct {
	// Keys are public keys by name: PKIX PEM, or a Cloud KMS key version
	// (gcpkms://…/cryptoKeyVersions/N) whose public key is fetched.
	Keys  map[string]string `yaml:"keys"`
	Rules []*TrustRule      `yaml:"rules"`
}

// ParseTrustPolicy reads a trust policy file. Cloud KMS keys are fetched
// through k (nil: a policy naming one is refused). Every problem is
// reported, each naming its key or rule.
func ParseTrustPolicy(ctx context.Context, data []byte, k *KMS) (*TrustPolicy, error) {
	var f trustFile
	if err := policy.DecodeStrict(data, &f); err != nil {
		return nil, fmt.Errorf("trust policy: %w", err)
	}
	if len(f.Rules) == 0 {
		return nil, errors.New("trust policy: no rules; a trust policy holds rules: [{prefix, require, keys}]")
	}
	var errs []error
	keys := map[string]Key{}
	for _, name := range sortedKeys(f.Keys) {
		spec := strings.TrimSpace(f.Keys[name])
		var pub []byte
		var err error
		if strings.HasPrefix(spec, KMSScheme) {
			var version string
			if version, err = KMSVersion(spec); err == nil {
				if k == nil {
					err = errors.New("Cloud KMS keys can't be used here")
				} else {
					pub, err = k.PublicKey(ctx, version)
				}
			}
		} else {
			pub, err = ParsePublicKey([]byte(spec))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("trust policy: key %q: %w", name, err))
			continue
		}
		keys[name] = Key{Name: name, Public: pub}
	}
	seen := map[string]bool{}
	for i, r := range f.Rules {
		var where string
		var perrs []error
		r.Prefix, where, perrs = policy.RulePrefix("trust policy", i, r.Prefix, seen)
		errs = append(errs, perrs...)
		switch r.Require {
		case RequireSigned, RequireWarn:
			if len(r.KeyNames) == 0 {
				errs = append(errs, fmt.Errorf("%s: require %s but no keys: name the keys that may sign these apps", where, r.Require))
			}
		case RequireOff:
		case "":
			errs = append(errs, fmt.Errorf("%s: no require: say signed, warn or off", where))
		default:
			errs = append(errs, fmt.Errorf("%s: require %q: say signed, warn or off", where, r.Require))
		}
		var trusted []Key
		for _, name := range r.KeyNames {
			key, ok := keys[name]
			if !ok {
				if _, listed := f.Keys[name]; !listed {
					errs = append(errs, fmt.Errorf("%s: key %q is not one of the policy's keys", where, name))
				}
				continue
			}
			trusted = append(trusted, key)
		}
		r.keys = NewKeys(trusted...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortStableFunc(f.Rules, func(a, b *TrustRule) int { return len(b.Prefix) - len(a.Prefix) })
	sum := sha256.Sum256(data)
	return &TrustPolicy{Rules: f.Rules, Digest: "sha256:" + hex.EncodeToString(sum[:])}, nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TrustParser returns a parser for a watch.Watcher: it reads a trust
// policy file, fetching Cloud KMS public keys through k.
func TrustParser(ctx context.Context, k *KMS) func([]byte) (*TrustPolicy, error) {
	return func(data []byte) (*TrustPolicy, error) { return ParseTrustPolicy(ctx, data, k) }
}
