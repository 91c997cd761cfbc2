package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/api/option"

	"github.com/bucketops/bucketops/floor"
	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/store"
)

// exitUnverified is verify's exit code when a release does not verify.
const exitUnverified = 6

var errUnverified = errors.New("not verified")

// exitRolledBack is verify --chain's exit code when the history was cut
// below the rollback floor: the floor's release deleted, or a head that
// doesn't descend from it.
const exitRolledBack = 7

var errRolledBack = errors.New("rolled back below the floor")

// kmsClientOptions reach Cloud KMS; tests point them at kmstest.
var kmsClientOptions []option.ClientOption

// signer opens the signing key of --sign-key or BUCKETOPS_SIGNING_KEY, or
// returns nil when there is none: the release is published unsigned.
func (f *publishFlags) signer(ctx context.Context, e *env) (provenance.Signer, func(), error) {
	spec := f.signingKey(e)
	if spec == "" {
		return nil, func() {}, nil
	}
	if strings.HasPrefix(spec, provenance.KMSScheme) {
		if _, err := provenance.KMSVersion(spec); err != nil {
			return nil, nil, usagef("--sign-key: %w", err)
		}
	}
	k := &provenance.KMS{Options: kmsClientOptions}
	s, err := provenance.LoadSigner(ctx, spec, k)
	if err != nil {
		k.Close()
		if strings.HasPrefix(spec, provenance.KMSScheme) {
			return nil, nil, fmt.Errorf("--sign-key: %w; CI needs roles/cloudkms.signerVerifier on the key (docs/signing.md)", err)
		}
		return nil, nil, usageError{fmt.Errorf("--sign-key: %w", err)}
	}
	return s, func() { k.Close() }, nil
}

func (f *publishFlags) signingKey(e *env) string {
	if f.signKey != "" {
		return f.signKey
	}
	return e.getenv("BUCKETOPS_SIGNING_KEY")
}

// sign opens the signing key, if any, and has p signed with it.
func (f *publishFlags) sign(ctx context.Context, e *env, p *store.Publication) (func(), error) {
	s, closeSigner, err := f.signer(ctx, e)
	if err != nil {
		return nil, err
	}
	if s != nil {
		p.Sign = provenance.Sign(s)
	}
	return closeSigner, nil
}

func newKeygen(e *env) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Write a new Ed25519 key pair for signing releases",
		Long: `keygen writes a new Ed25519 key pair: the private key to PREFIX.key (PKCS#8 PEM,
mode 0600), for bucketops push --sign-key, and the public key to PREFIX.pub
(PKIX PEM), for the bridge's trust policy and bucketops verify --key. It never
overwrites a file. Keep the private key in your CI's secret store, or use a
Cloud KMS key instead so that CI never holds it (docs/signing.md).`,
		Example: `  bucketops keygen --out ci-2026
  bucketops push prod/payments ./rendered --sign-key ci-2026.key`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: give the files' name prefix, such as ci-2026")
			}
			priv, pub, err := provenance.GenerateKey()
			if err != nil {
				return err
			}
			parsed, err := provenance.ParsePublicKey(pub)
			if err != nil {
				return err
			}
			keyFile, pubFile := out+".key", out+".pub"
			for _, name := range []string{keyFile, pubFile} {
				if _, err := os.Lstat(name); err == nil {
					return usagef("%s exists; keygen never overwrites a key: choose another --out", name)
				}
			}
			if err := writeNew(keyFile, priv, 0o600); err != nil {
				return err
			}
			if err := writeNew(pubFile, pub, 0o644); err != nil {
				os.Remove(keyFile)
				return err
			}
			id := provenance.KeyID(parsed)
			if e.json() {
				return e.printJSON(map[string]string{"private_key": keyFile, "public_key": pubFile, "key_id": id})
			}
			_, err = fmt.Fprintf(e.stdout, "wrote %s (private, keep it secret) and %s (public)\nkey id %s\n", keyFile, pubFile, id)
			return err
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write PREFIX.key and PREFIX.pub (required)")
	return cmd
}

// writeNew creates name with data, failing if it exists.
func writeNew(name string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(name)
		return err
	}
	return f.Close()
}

// verifyOutput is verify's -o json contract.
type verifyOutput struct {
	App      string               `json:"app"`
	Releases int                  `json:"releases"`
	Problems int                  `json:"problems"`
	Findings []provenance.Finding `json:"findings"`
}

func newVerify(e *env) *cobra.Command {
	var (
		chain     bool
		trust     trustFlags
		skipBytes bool
	)
	cmd := &cobra.Command{
		Use:   "verify APP[@GENERATION|@COMMIT]",
		Short: "Check that releases are signed by trusted keys and chained to the release before",
		Long: `verify checks the signature of APP's head (or of the given generation): signed
by one of the trusted keys, the signed statement matching the release's bytes
and metadata, and naming the release right before it in the history as the
one it replaced.

--chain checks every release of APP and the chain they form, and names each
break: missing_signature, unknown_key, bad_signature, digest_mismatch,
metadata_mismatch, wrong_app, gap (a release was deleted), fork (a release
doesn't replace the one before it) and replay (an old release published
again); against the rollback floor the bridge keeps in the bucket, truncated
(the release the bridge last accepted was deleted) and rollback (the head
doesn't descend from it: the newest releases were deleted, or an older one
copied back).

The trusted keys are public key files or Cloud KMS key versions (--key), or
the keys the trust policy's rule for APP names (--trust-policy). Exit 6 when
anything fails to verify, exit 7 when the head doesn't descend from the
rollback floor or --chain finds the floor's release deleted.`,
		Example: `  bucketops verify prod/payments --key ci-2026.pub
  bucketops verify prod/payments --chain --trust-policy trust.yaml -o json`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			arg, err := parseRelease(a[0])
			if err != nil {
				return err
			}
			ref := arg.ref
			if chain && (ref.Generation != 0 || arg.commit != "") {
				rev := arg.commit
				if rev == "" {
					rev = fmt.Sprint(ref.Generation)
				}
				return usagef("--chain checks all of %s's history; leave out @%s", ref.App, rev)
			}
			if given, err := trust.given(); err != nil || !given {
				return usagef("name the trusted keys: --key FILE (repeatable) or --trust-policy FILE")
			}
			ctx := cmd.Context()
			k := &provenance.KMS{Options: kmsClientOptions}
			defer k.Close()
			trusted, err := trust.keysFor(ctx, k, ref.App)
			if err != nil {
				return err
			}
			s, closeStore, err := e.openStore(ctx)
			if err != nil {
				return err
			}
			defer closeStore()
			if ref, err = arg.resolve(ctx, e, s); err != nil {
				return err
			}
			var findings []provenance.Finding
			if chain {
				// The floor the bridge keeps in the bucket tells a
				// truncated tail from a short history.
				var m floor.Mark
				if m, err = floor.New(s.Client(), s.Location()).Get(ctx, ref.App); err != nil {
					return err
				}
				run := e.longRun("verify --chain " + ref.App)
				findings, err = trusted.VerifyChain(ctx, s, ref.App, provenance.ChainOptions{SkipBytes: skipBytes, Floor: m, Listed: run.listed, Checked: run.checked})
			} else {
				var f provenance.Finding
				f, err = trusted.VerifyRef(ctx, s, ref)
				if err == nil && ref.Generation == 0 {
					// The head is judged against the floor too.
					err = checkHeadFloor(ctx, s, &f)
				}
				findings = []provenance.Finding{f}
			}
			if err != nil {
				return err
			}
			return e.printFindings(ref.App, findings, chain)
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&chain, "chain", false, "check every release of the app and the chain they form")
	trust.register(cmd)
	fs.BoolVar(&skipBytes, "skip-bytes", false, "with --chain, check signatures and links from the listing alone, without reading every release's bytes")
	return cmd
}

// trustFlags are the keys a command judges signatures by: public keys
// (--key, repeatable) or the bridge's trust policy (--trust-policy). verify
// needs one of them; log and show judge by them when given.
type trustFlags struct {
	keys []string
	file string
}

func (f *trustFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringArrayVar(&f.keys, "key", nil, "a trusted public key: a PEM file (bucketops keygen's .pub) or gcpkms://…/cryptoKeyVersions/N; repeatable")
	fs.StringVar(&f.file, "trust-policy", "", "trust the keys the bridge's trust policy file names for the app")
}

// given reports whether keys or a trust policy were named; both is a
// usage error.
func (f *trustFlags) given() (bool, error) {
	if len(f.keys) > 0 && f.file != "" {
		return false, usagef("name the trusted keys one way: --key FILE (repeatable) or --trust-policy FILE, not both")
	}
	return len(f.keys) > 0 || f.file != "", nil
}

// keysFor resolves the keys trusted for app (verify): an app the trust
// policy has no rule for is a usage error.
func (f *trustFlags) keysFor(ctx context.Context, k *provenance.KMS, app string) (provenance.Keys, error) {
	if f.file != "" {
		p, err := f.policy(ctx, k)
		if err != nil {
			return provenance.Keys{}, err
		}
		rule, ok := p.RuleFor(app)
		if !ok {
			return provenance.Keys{}, usagef("--trust-policy %s: no rule covers %s", f.file, app)
		}
		return rule.Keys(), nil
	}
	return f.publicKeys(ctx, k)
}

// judge returns what log and show judge each release's signature by: the
// trust policy's rule for its app, the keys given, or, with neither flag,
// nothing (every release "not checked").
func (f *trustFlags) judge(ctx context.Context) (provenance.Judge, error) {
	given, err := f.given()
	if err != nil || !given {
		return provenance.NotChecked("no --key or --trust-policy given"), err
	}
	k := &provenance.KMS{Options: kmsClientOptions}
	defer k.Close()
	if f.file != "" {
		p, err := f.policy(ctx, k)
		return provenance.PolicyJudge(p), err
	}
	keys, err := f.publicKeys(ctx, k)
	return provenance.KeysJudge(keys), err
}

func (f *trustFlags) policy(ctx context.Context, k *provenance.KMS) (*provenance.TrustPolicy, error) {
	data, err := os.ReadFile(f.file)
	if err != nil {
		return nil, usagef("--trust-policy: %w", err)
	}
	p, err := provenance.ParseTrustPolicy(ctx, data, k)
	if err != nil {
		return nil, usagef("--trust-policy %s: %w", f.file, err)
	}
	return p, nil
}

func (f *trustFlags) publicKeys(ctx context.Context, k *provenance.KMS) (provenance.Keys, error) {
	var keys []provenance.Key
	for _, spec := range f.keys {
		key := provenance.Key{Name: spec}
		if strings.HasPrefix(spec, provenance.KMSScheme) {
			version, err := provenance.KMSVersion(spec)
			if err != nil {
				return provenance.Keys{}, usagef("--key: %w", err)
			}
			if key.Public, err = k.PublicKey(ctx, version); err != nil {
				return provenance.Keys{}, fmt.Errorf("--key: %w", err)
			}
		} else {
			data, err := os.ReadFile(spec)
			if err != nil {
				return provenance.Keys{}, usagef("--key: %w", err)
			}
			if key.Public, err = provenance.ParsePublicKey(data); err != nil {
				return provenance.Keys{}, usagef("--key %s: %w", spec, err)
			}
		}
		keys = append(keys, key)
	}
	return provenance.NewKeys(keys...), nil
}

func (e *env) printFindings(app string, findings []provenance.Finding, chain bool) error {
	bad, rolledBack := 0, false
	for _, f := range findings {
		if !f.OK() {
			bad++
		}
		rolledBack = rolledBack || provenance.RolledBack(f.Problem)
	}
	var err error
	if e.json() {
		err = e.printJSON(verifyOutput{App: app, Releases: len(findings), Problems: bad, Findings: findings})
	} else {
		tw := e.table()
		for _, f := range findings {
			switch {
			case !f.OK():
				fmt.Fprintf(tw, "%s@%d\t%s\t%s\n", f.App, f.Generation, f.Problem, f.Detail)
			case !chain:
				fmt.Fprintf(tw, "%s@%d\tok\tsigned by %s (%s), chained to the release before it\n", f.App, f.Generation, f.Key, f.KeyID)
			}
		}
		tw.Flush()
		if chain {
			verdict := "every one signed by a trusted key and chained to the one before"
			if bad > 0 {
				verdict = fmt.Sprintf("%d did not verify", bad)
			}
			fmt.Fprintf(e.stdout, "%s: %d releases, %s\n", app, len(findings), verdict)
		}
	}
	switch {
	case err == nil && rolledBack:
		err = fmt.Errorf("%w: %s was truncated or rolled back below the release the bridge last accepted (docs/signing.md)", errRolledBack, app)
	case err == nil && bad > 0:
		err = fmt.Errorf("%w: %d of %d releases of %s", errUnverified, bad, len(findings), app)
	}
	return err
}

// checkHeadFloor judges a verified head against the app's rollback floor.
func checkHeadFloor(ctx context.Context, s *store.Store, f *provenance.Finding) error {
	if !f.OK() {
		return nil
	}
	m, err := floor.New(s.Client(), s.Location()).Get(ctx, f.App)
	if err != nil {
		return err
	}
	f.CheckHead(m)
	return nil
}
