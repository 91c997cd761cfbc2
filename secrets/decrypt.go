// Package secrets owns the decrypting render: it turns a stored release
// into what Argo CD applies, decrypting its SOPS documents in memory with
// the age keys and the Cloud KMS access it was given, and nothing else.
//
// The contract that matters: a render writes no temporary file, reads and
// sets no process-wide environment (no SOPS_AGE_KEY*, no ~/.config/sops),
// is safe for any number of concurrent renders, and fails closed: a
// document that can't be decrypted and verified fails the whole release
// with an ErrDecrypt, never renders without it.
//
// The release format (parsing, encrypted-document detection, the keys a
// document names) is package render's; the CLI, which only publishes,
// links that and not the sops key services this package needs.
//
// What a render returns, decrypted Secrets included, Argo CD caches in its
// Redis: deploy Redis with auth and TLS and a network policy that admits
// only Argo CD's components (docs/tenancy.md).
package secrets

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	kms "cloud.google.com/go/kms/apiv1"
	"cloud.google.com/go/kms/apiv1/kmspb"
	"filippo.io/age"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/gcpkms"
	"github.com/getsops/sops/v3/keys"
	"github.com/getsops/sops/v3/keyservice"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
	"google.golang.org/api/option"

	"github.com/bucketops/bucketops/render"
)

// ErrDecrypt is wrapped by every failure to decrypt a SOPS document.
var ErrDecrypt = errors.New("cannot decrypt")

// The reasons a DecryptError gives: stable words for API responses and metrics.
const (
	ReasonNoKey           = "no_key"
	ReasonMACMismatch     = "mac_mismatch"
	ReasonBadMetadata     = "bad_metadata"
	ReasonInvalidDocument = "invalid_document"
)

func reasonText(reason string) string {
	switch reason {
	case ReasonNoKey:
		return "no key fits"
	case ReasonMACMismatch:
		return "integrity check failed"
	case ReasonBadMetadata:
		return "malformed sops metadata"
	case ReasonInvalidDocument:
		return "not a Kubernetes object once decrypted"
	}
	return reason
}

// DecryptError says which document failed and why.
type DecryptError struct {
	// Source is the document's "# Source:" path.
	Source string
	// Document is the 1-based index of the document among those of Source,
	// as in render.InputError, so "secret.yaml: document 2" is the second document
	// of secret.yaml.
	Document int
	// Object is the object's identity, such as "Secret pay/db", or "" if
	// the identity is itself encrypted.
	Object string
	// Reason is one of ReasonNoKey, ReasonMACMismatch, ReasonBadMetadata and
	// ReasonInvalidDocument.
	Reason string
	// Detail explains the failure in one line: for ReasonNoKey, the keys
	// the document is encrypted for and the ones this process holds.
	Detail string
}

func (e *DecryptError) Error() string {
	var b strings.Builder
	b.WriteString(cmp.Or(e.Source, "release"))
	if e.Document > 0 {
		fmt.Fprintf(&b, ": document %d", e.Document)
	}
	if e.Object != "" {
		fmt.Fprintf(&b, " (%s)", e.Object)
	}
	b.WriteString(": " + reasonText(e.Reason))
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	return b.String()
}

// Unwrap makes every DecryptError an ErrDecrypt.
func (e *DecryptError) Unwrap() error { return ErrDecrypt }

// kmsTimeout bounds one GCP KMS call. Render has no context of its own; the
// bridge's request deadline is longer than this.
const kmsTimeout = 20 * time.Second

// Decrypter decrypts SOPS documents in memory, with the age identities it
// was given and GCP KMS through Application Default Credentials. It is
// immutable after construction and safe for any number of concurrent Render
// calls: a render writes no file, sets no environment variable and reads no
// key from where sops would look (SOPS_AGE_KEY*, ~/.config/sops/age). The
// one thing made later is the GCP KMS client, when a document first needs
// it (Application Default Credentials are looked up then), shared by every
// render that follows.
type Decrypter struct {
	identities []age.Identity
	// recipients[i] is the public key of identities[i].
	recipients []string
	gcp        gcpKMS
}

// Option changes how a Decrypter reaches what it decrypts with.
type Option func(*Decrypter)

// WithKMSClientOptions dials Cloud KMS with opts instead of Application
// Default Credentials and Google's endpoint (tests point it at kmstest).
func WithKMSClientOptions(opts ...option.ClientOption) Option {
	return func(d *Decrypter) { d.gcp.opts = opts }
}

// NewDecrypter reads the contents of an age key file: AGE-SECRET-KEY-1…
// lines (or post-quantum AGE-SECRET-KEY-PQ-1… ones), comments and blank
// lines. It may be empty: then only GCP KMS can decrypt.
func NewDecrypter(ageKeys []byte, opts ...Option) (*Decrypter, error) {
	d := &Decrypter{}
	for _, o := range opts {
		o(d)
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(ageKeys))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// Errors name the line but never quote it: it is key material.
		var id age.Identity
		var recipient string
		switch {
		case strings.HasPrefix(line, "AGE-SECRET-KEY-PQ-1"):
			h, err := age.ParseHybridIdentity(line)
			if err != nil {
				return nil, fmt.Errorf("age keys: line %d: malformed post-quantum age secret key", n)
			}
			id, recipient = h, h.Recipient().String()
		case strings.HasPrefix(line, "AGE-SECRET-KEY-1"):
			x, err := age.ParseX25519Identity(line)
			if err != nil {
				return nil, fmt.Errorf("age keys: line %d: malformed age secret key", n)
			}
			id, recipient = x, x.Recipient().String()
		default:
			return nil, fmt.Errorf("age keys: line %d: not an age secret key (AGE-SECRET-KEY-1…), a comment (#…) or a blank line", n)
		}
		if seen[recipient] {
			continue
		}
		seen[recipient] = true
		d.identities = append(d.identities, id)
		d.recipients = append(d.recipients, recipient)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("age keys: %w", err)
	}
	return d, nil
}

// LoadDecrypter reads the age key file once; "" means no age keys. A file
// that holds no key is an error: whoever named it meant to give keys.
func LoadDecrypter(ageKeyFile string) (*Decrypter, error) {
	if ageKeyFile == "" {
		return NewDecrypter(nil)
	}
	data, err := os.ReadFile(ageKeyFile)
	if err != nil {
		return nil, fmt.Errorf("age key file: %w", err)
	}
	d, err := NewDecrypter(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ageKeyFile, err)
	}
	if len(d.identities) == 0 {
		return nil, fmt.Errorf("%s: holds no age secret key (AGE-SECRET-KEY-1…)", ageKeyFile)
	}
	return d, nil
}

// Recipients returns the age public keys of the identities held, sorted.
func (d *Decrypter) Recipients() []string {
	r := slices.Clone(d.recipients)
	slices.Sort(r)
	return r
}

// Options say what one render may use.
type Options struct {
	// App is the app the release belongs to, for errors.
	App string
	// Tombstone: the release is a tombstone, which must be empty and
	// renders to nothing.
	Tombstone bool
	// AllowKey, when not nil, is asked about every key a SOPS document's
	// data key is encrypted for, before it is tried: only the keys it
	// allows can decrypt (a tenancy policy's keys for the app's prefix).
	// keyType is "age" or "gcp_kms"; id the recipient or the KMS key name.
	AllowKey func(keyType, id string) bool
	// Check, when not nil, judges the release's objects as stored, before
	// anything is decrypted; its error is Render's.
	Check func(objs []render.Object) error
}

// Output is a rendered release.
type Output struct {
	// Body is the YAML stream Argo CD applies.
	Body []byte
	// Objects are the release's objects as stored: encrypted documents
	// with their ciphertext, identities as read before decryption.
	Objects []render.Object
}

// Render turns a stored release into what Argo CD applies: it parses data
// with the same validation as Parse, decrypts every SOPS document in memory,
// checks that each decrypted document is a Kubernetes object, and writes one
// YAML stream, each document after its "# Source:" line. Plain documents
// pass through byte for byte; the same input always gives the same output.
//
// A tombstone must be empty and renders to nothing. Anything else that
// would render to nothing is an error: Argo CD would prune the whole app.
func (d *Decrypter) Render(data []byte, opts Options) (Output, error) {
	if opts.Tombstone {
		if len(data) != 0 {
			return Output{}, &render.InputError{
				Problem: fmt.Sprintf("a tombstone release must be empty, this one holds %d bytes", len(data)),
				Hint:    "the release was written by something other than bucketops retire",
			}
		}
		return Output{Body: []byte{}}, nil
	}
	if len(data) == 0 {
		return Output{}, &render.InputError{
			Problem: "the release is empty but is not a tombstone",
			Hint:    "refusing to render nothing, which would prune every object of the app; retire an app with bucketops retire",
		}
	}
	rel, err := render.Parse(data)
	if err != nil {
		return Output{}, err
	}
	if opts.Check != nil {
		if err := opts.Check(rel.Objects); err != nil {
			return Output{}, err
		}
	}

	type where struct {
		source string
		doc    int
	}
	var out bytes.Buffer
	out.Grow(len(data) + len(data)/4)
	perSource := map[string]int{}
	seen := make(map[string]where, len(rel.Objects))
	for i, o := range rel.Objects {
		perSource[o.Source]++
		n := perSource[o.Source]
		obj := o
		if o.Encrypted {
			if obj, err = d.decrypt(o, n, opts); err != nil {
				return Output{}, err
			}
		}
		// Parse rejected duplicates among the identities it could read; a
		// document whose identity was encrypted may only now collide.
		k := obj.Key()
		if w, dup := seen[k]; dup {
			return Output{}, &DecryptError{
				Source: o.Source, Document: n, Object: objectName(o), Reason: ReasonInvalidDocument,
				Detail: fmt.Sprintf("%s is already defined in %s document %d", obj, cmp.Or(w.source, "release"), w.doc),
			}
		}
		seen[k] = where{o.Source, n}

		if i > 0 {
			out.WriteString("---\n")
		}
		if o.Source != "" {
			out.WriteString("# Source: " + o.Source + "\n")
		}
		out.Write(obj.Body)
	}
	return Output{Body: out.Bytes(), Objects: rel.Objects}, nil
}

// objectName is the object's name for a DecryptError: "" when encrypted.
func objectName(o render.Object) string {
	if o.APIVersion == "" {
		return ""
	}
	return o.String()
}

// decrypt decrypts the n-th document of its source and validates the result.
func (d *Decrypter) decrypt(o render.Object, n int, opts Options) (dec render.Object, err error) {
	fail := func(reason, detail string) (render.Object, error) {
		return render.Object{}, &DecryptError{Source: o.Source, Document: n, Object: objectName(o), Reason: reason, Detail: oneLine(detail)}
	}
	// sops was written for a CLI that exits on failure; in a server, hostile
	// input must be an error, never a crash (aes.Cipher panics on a value
	// of type bytes, for one).
	defer func() {
		if r := recover(); r != nil {
			dec, err = fail(ReasonInvalidDocument, fmt.Sprintf("sops cannot process it (%v)", r))
		}
	}()

	store := &sopsyaml.Store{}
	tree, err := store.LoadEncryptedFile(o.Body)
	if err != nil {
		return fail(ReasonBadMetadata, "sops cannot read it: "+err.Error())
	}
	if len(tree.Branches) != 1 {
		return fail(ReasonBadMetadata, fmt.Sprintf("sops reads %d documents in it", len(tree.Branches)))
	}

	// Age keys held come first: sops tries a group's keys in order, and
	// every age key tried costs a scalar multiplication per identity held.
	// The order of the keys is not covered by the MAC.
	for _, g := range tree.Metadata.KeyGroups {
		slices.SortStableFunc(g, func(a, b keys.MasterKey) int {
			return cmp.Compare(d.rank(a), d.rank(b))
		})
	}
	ks := &keyServer{d: d, allow: opts.AllowKey, app: opts.App}
	order := []string{sopsage.KeyTypeIdentifier, gcpkms.KeyTypeIdentifier}
	dataKey, err := tree.Metadata.GetDataKeyWithKeyServices([]keyservice.KeyServiceClient{keyservice.NewCustomLocalClient(ks)}, order)
	if err != nil {
		reason, detail := d.explainKeyFailure(tree.Metadata, ks, err)
		return fail(reason, detail)
	}

	// As sops' own decrypt package does: decrypt every value, hashing the
	// cleartext, and compare with the MAC stored encrypted under the data
	// key, bound to lastmodified.
	cipher := aes.NewCipher()
	mac, err := tree.Decrypt(dataKey, cipher)
	if err != nil {
		return fail(ReasonMACMismatch, valueError(err))
	}
	stored, err := cipher.Decrypt(tree.Metadata.MessageAuthenticationCode, dataKey, tree.Metadata.LastModified.Format(time.RFC3339))
	if err != nil {
		return fail(ReasonMACMismatch, "the mac does not decrypt with the document's data key: the mac or lastmodified was changed")
	}
	if s, ok := stored.(string); !ok || subtle.ConstantTimeCompare([]byte(s), []byte(mac)) != 1 {
		return fail(ReasonMACMismatch, "the content does not match the mac: a key, value or comment was changed after encryption")
	}

	plain, err := store.EmitPlainFile(tree.Branches)
	if err != nil {
		return fail(ReasonInvalidDocument, "sops cannot write it back as YAML")
	}
	// The same validation as the stored stream: a decrypted document is
	// checked like one that was never encrypted. A comment line ends the
	// text given to Parse, which trims trailing blank lines: they belong to
	// the value of a |+ block scalar that sops may end the document with.
	rel, err := render.Parse(append(slices.Clip(plain), "#\n"...))
	if err != nil {
		var ie *render.InputError
		if errors.As(err, &ie) {
			detail := strings.TrimPrefix(ie.Field+": "+ie.Problem, ": ")
			if ie.Hint != "" {
				detail += "; " + ie.Hint
			}
			return fail(ReasonInvalidDocument, detail)
		}
		return fail(ReasonInvalidDocument, err.Error())
	}
	if len(rel.Objects) != 1 {
		return fail(ReasonInvalidDocument, fmt.Sprintf("it decrypts to %d YAML documents", len(rel.Objects)))
	}
	dec = rel.Objects[0]
	if dec.Encrypted {
		return fail(ReasonInvalidDocument, "it still has a sops key once decrypted")
	}
	if o.APIVersion != "" && dec.Key() != o.Key() {
		return fail(ReasonInvalidDocument, fmt.Sprintf("it decrypts to %s", dec))
	}
	dec.Source, dec.Body = o.Source, plain
	return dec, nil
}

// rank orders a document's keys for decryption: age keys held first.
func (d *Decrypter) rank(k keys.MasterKey) int {
	if a, ok := k.(*sopsage.MasterKey); ok && slices.Contains(d.recipients, a.Recipient) {
		return 0
	}
	return 1
}

// valueError explains a failure of sops.Tree.Decrypt without quoting it:
// sops' messages can hold a value, in clear when a secret was pasted
// unencrypted or once decrypted.
func valueError(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "message authentication failed"):
		return "a value was changed after encryption (its AES-GCM tag does not verify)"
	case strings.Contains(msg, "does not match sops' data format"):
		return "a value the document's encryption rules cover is not sops ciphertext"
	}
	return "a value cannot be decrypted with the document's data key"
}

// explainKeyFailure says why no data key came out of the document's keys.
func (d *Decrypter) explainKeyFailure(md sops.Metadata, ks *keyServer, err error) (reason, detail string) {
	if md.MasterKeyCount() == 0 {
		return ReasonBadMetadata, "it names no key"
	}
	for _, a := range ks.failed {
		if a.corrupt {
			return ReasonBadMetadata, fmt.Sprintf("the data key encrypted for %s is unreadable: %v", a.key, a.err)
		}
	}
	var ue sops.UserError
	if !errors.As(err, &ue) {
		// Not sops' "no group decrypted" error: Shamir parts that don't combine.
		return ReasonBadMetadata, err.Error()
	}
	var b strings.Builder
	b.WriteString("the document is encrypted for " + describeKeys(md.KeyGroups))
	if len(md.KeyGroups) > 1 {
		need := md.ShamirThreshold
		if need <= 0 {
			need = len(md.KeyGroups)
		}
		fmt.Fprintf(&b, " (split in %d key groups, %d needed)", len(md.KeyGroups), need)
	}
	if len(d.recipients) == 0 {
		b.WriteString("; this bridge holds no age key")
	} else {
		b.WriteString("; this bridge holds age keys for " + strings.Join(d.Recipients(), ", "))
	}
	said := map[string]bool{}
	for _, a := range ks.failed {
		if msg := fmt.Sprintf("; %s: %v", a.key, a.err); a.kind != sopsage.KeyTypeIdentifier && !said[msg] {
			said[msg] = true
			b.WriteString(msg)
		}
	}
	return ReasonNoKey, b.String()
}

// describeKeys lists the keys of a document: "age recipients a, b and GCP
// KMS key p".
func describeKeys(groups []sops.KeyGroup) string {
	kinds := []struct{ id, one, many string }{
		{"age", "age recipient", "age recipients"},
		{"gcp_kms", "GCP KMS key", "GCP KMS keys"},
		{"kms", "AWS KMS key", "AWS KMS keys"},
		{"azure_kv", "Azure Key Vault key", "Azure Key Vault keys"},
		{"hc_vault", "Vault transit key", "Vault transit keys"},
		{"hckms", "HuaweiCloud KMS key", "HuaweiCloud KMS keys"},
		{"pgp", "PGP key", "PGP keys"},
	}
	byKind := map[string][]string{}
	for _, g := range groups {
		for _, k := range g {
			byKind[k.TypeToIdentifier()] = append(byKind[k.TypeToIdentifier()], k.ToString())
		}
	}
	var parts []string
	for _, kind := range kinds {
		names := byKind[kind.id]
		switch len(names) {
		case 0:
		case 1:
			parts = append(parts, kind.one+" "+names[0])
		default:
			parts = append(parts, kind.many+" "+strings.Join(names, ", "))
		}
	}
	return joinAnd(parts)
}

func joinAnd(parts []string) string {
	if len(parts) <= 1 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// oneLine keeps an error message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// keyServer is the sops key service one document's data key is recovered
// through: age with the Decrypter's identities, GCP KMS with its client,
// and nothing else. Every other key type would read the environment, the
// home directory or run programs (gpg), which a render must not do. It is
// made per document and records why each key failed, for the error.
type keyServer struct {
	d *Decrypter
	// allow, when not nil, says which keys may be tried (Options.AllowKey).
	allow  func(keyType, id string) bool
	app    string
	failed []keyAttempt
}

type keyAttempt struct {
	kind, key string
	err       error
	// corrupt is true when the key is ours but its ciphertext is damaged,
	// as opposed to a key this process cannot use.
	corrupt bool
}

var errNoAgeKeys = errors.New("this bridge holds no age key")

// Encrypt is never needed to render.
func (s *keyServer) Encrypt(context.Context, *keyservice.EncryptRequest) (*keyservice.EncryptResponse, error) {
	return nil, errors.New("rendering does not encrypt")
}

// Decrypt recovers the data key (or a Shamir part of it) from one key.
func (s *keyServer) Decrypt(ctx context.Context, req *keyservice.DecryptRequest) (*keyservice.DecryptResponse, error) {
	var (
		a     keyAttempt
		plain []byte
	)
	switch k := req.GetKey().GetKeyType().(type) {
	case *keyservice.Key_AgeKey:
		a = keyAttempt{kind: sopsage.KeyTypeIdentifier, key: "age recipient " + k.AgeKey.GetRecipient()}
		if a.err = s.allowed(sopsage.KeyTypeIdentifier, k.AgeKey.GetRecipient(), &a); a.err == nil {
			plain, a.corrupt, a.err = s.d.decryptAge(k.AgeKey.GetRecipient(), req.GetCiphertext(), s.allow)
			if errors.Is(a.err, errRelabelled) {
				// Said in the error, unlike a key this process doesn't hold.
				a.kind = "policy"
				a.err = fmt.Errorf("%w; none of the age keys the tenancy policy allows for %s opens it", a.err, cmp.Or(s.app, "this app"))
			}
		}
	case *keyservice.Key_GcpKmsKey:
		a = keyAttempt{kind: gcpkms.KeyTypeIdentifier, key: "GCP KMS key " + k.GcpKmsKey.GetResourceId()}
		if a.err = s.allowed(gcpkms.KeyTypeIdentifier, k.GcpKmsKey.GetResourceId(), &a); a.err == nil {
			plain, a.corrupt, a.err = s.d.gcp.decrypt(ctx, k.GcpKmsKey.GetResourceId(), req.GetCiphertext())
		}
	default:
		a = keyAttempt{kind: "other", key: keyTypeName(req.GetKey()), err: errors.New("not used by the bridge, which decrypts with age keys and GCP KMS only")}
	}
	if a.err != nil {
		s.failed = append(s.failed, a)
		return nil, a.err
	}
	return &keyservice.DecryptResponse{Plaintext: plain}, nil
}

// allowed refuses a key Options.AllowKey doesn't allow, marking the
// attempt so the error lists it.
func (s *keyServer) allowed(keyType, id string, a *keyAttempt) error {
	if s.allow == nil || s.allow(keyType, id) {
		return nil
	}
	a.kind = "policy"
	return fmt.Errorf("not a decryption key the tenancy policy allows for %s", cmp.Or(s.app, "this app"))
}

func keyTypeName(k *keyservice.Key) string {
	switch k.GetKeyType().(type) {
	case *keyservice.Key_KmsKey:
		return "AWS KMS keys"
	case *keyservice.Key_AzureKeyvaultKey:
		return "Azure Key Vault keys"
	case *keyservice.Key_VaultKey:
		return "Vault transit keys"
	case *keyservice.Key_HckmsKey:
		return "HuaweiCloud KMS keys"
	case *keyservice.Key_PgpKey:
		return "PGP keys"
	}
	return "unknown keys"
}

// decryptAge opens an age-encrypted data key with the identities held,
// through sops' own age MasterKey. The identities are always injected:
// with none, MasterKey.Decrypt would look for keys in SOPS_AGE_KEY*,
// ~/.ssh and ~/.config/sops/age/keys.txt, so it is never called then.
//
// allow, when not nil, is the tenancy policy's say on each identity: only
// the identities whose own recipient it allows are tried. The recipient a
// document names is a label outside sops' MAC, which anyone can rewrite:
// what may open a data key is judged by the identity that opens it, not
// by the label.
func (d *Decrypter) decryptAge(recipient string, enc []byte, allow func(keyType, id string) bool) (plain []byte, corrupt bool, err error) {
	if len(d.identities) == 0 {
		return nil, false, errNoAgeKeys
	}
	// The identity named by the recipient goes first: age tries identities
	// in order, each costing a scalar multiplication per stanza.
	ids := make(sopsage.ParsedIdentities, 0, len(d.identities))
	for i, id := range d.identities {
		switch {
		case allow != nil && !allow(sopsage.KeyTypeIdentifier, d.recipients[i]):
		case d.recipients[i] == recipient:
			ids = slices.Insert(ids, 0, id)
		default:
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, false, errors.New("no age key held for it")
	}
	key := &sopsage.MasterKey{Recipient: recipient, EncryptedKey: string(enc)}
	ids.ApplyToMasterKey(key)
	plain, err = key.Decrypt()
	if err != nil {
		var noMatch *age.NoIdentityMatchError
		if errors.As(err, &noMatch) {
			if slices.Contains(d.recipients, recipient) {
				// The identity of the recipient named was tried and
				// doesn't open it: the data key is another recipient's.
				return nil, false, errRelabelled
			}
			return nil, false, errors.New("no age key held for it")
		}
		return nil, true, errors.New(oneLine(err.Error()))
	}
	return plain, false, nil
}

// errRelabelled: a data key that the identity of the recipient it is
// labelled with doesn't open. sops' MAC doesn't cover the label.
var errRelabelled = errors.New("its data key is not encrypted for the recipient it names: the recipient was rewritten after encryption")

// gcpKMS decrypts data keys with Cloud KMS through Application Default
// Credentials. sops' own GCP KMS key reads GOOGLE_CREDENTIALS and SOPS_GCP_KMS_*
// from the environment and dials a new client for every data key; this
// dials one, on first use, and shares it.
type gcpKMS struct {
	opts   []option.ClientOption
	mu     sync.Mutex
	client *kms.KeyManagementClient
}

var gcpKeyRE = regexp.MustCompile(`^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$`)

func (g *gcpKMS) decrypt(ctx context.Context, resourceID string, enc []byte) (plain []byte, corrupt bool, err error) {
	if !gcpKeyRE.MatchString(resourceID) {
		return nil, true, errors.New("not a Cloud KMS key name (projects/…/locations/…/keyRings/…/cryptoKeys/…)")
	}
	// sops stores Cloud KMS ciphertext base64-encoded.
	ciphertext, err := base64.StdEncoding.DecodeString(string(enc))
	if err != nil {
		return nil, true, errors.New("its enc is not base64")
	}
	c, err := g.get()
	if err != nil {
		return nil, false, fmt.Errorf("cannot reach Cloud KMS: %s", oneLine(err.Error()))
	}
	ctx, cancel := context.WithTimeout(ctx, kmsTimeout)
	defer cancel()
	resp, err := c.Decrypt(ctx, &kmspb.DecryptRequest{Name: resourceID, Ciphertext: ciphertext})
	if err != nil {
		return nil, false, fmt.Errorf("refused by Cloud KMS: %s", oneLine(err.Error()))
	}
	if sum := resp.GetPlaintextCrc32C(); sum != nil && int64(crc32.Checksum(resp.GetPlaintext(), crc32.MakeTable(crc32.Castagnoli))) != sum.GetValue() {
		return nil, false, errors.New("the answer from Cloud KMS was corrupted in transit")
	}
	return resp.GetPlaintext(), false, nil
}

func (g *gcpKMS) get() (*kms.KeyManagementClient, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.client == nil {
		// The client outlives any one render, so it isn't dialled with one's
		// context; each call has its own deadline.
		c, err := kms.NewKeyManagementClient(context.Background(), g.opts...)
		if err != nil {
			return nil, err
		}
		g.client = c
	}
	return g.client, nil
}
