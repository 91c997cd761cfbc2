package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bucketops/bucketops/floor"
	"github.com/bucketops/bucketops/memory"
	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/secrets"
	"github.com/bucketops/bucketops/store"
)

// TestRefusalLines: every class of failed render has a line for Argo CD
// that names the release, what refused it and what to do, ends with its
// reason code, and holds none of the Go error chain beneath. The classes
// the bridge reaches through a real bucket and policy are also checked
// end to end (TestPolicyBindsAppsToTheirTeam, and cmd/bucketops's
// TestPluginRefusesUntrustedReleases and TestPluginGenerateFailsClosed).
func TestRefusalLines(t *testing.T) {
	pinned := store.Ref{App: "prod/payments", Generation: 1796000000000002}
	head := store.Ref{App: "prod/payments"}
	untrusted := func(problem, detail string) error {
		return fmt.Errorf("verify: %w", &UntrustedError{Prefix: "prod", Finding: provenance.Finding{App: "prod/payments", Generation: pinned.Generation, Problem: problem, Detail: detail}})
	}
	accepted := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	mark := floor.Mark{App: "prod/payments", Generation: 1796000000000005, Digest: "sha256:5555", Accepted: accepted}
	chain := errors.New("googleapi: Error 403: caller does not have storage.objects.create access")
	for _, tc := range []struct {
		name string
		ref  store.Ref
		err  error
		// line is the whole line, or with prefix set, its start and end.
		line   string
		prefix bool
		code   string
	}{
		{"an unsigned release", pinned, untrusted(provenance.MissingSignature, "the release is not signed; publish it with --sign-key"),
			`prod/payments@1796000000000002: not signed, and trust rule "prod" accepts only releases signed by its keys; publish it signed: bucketops push prod/payments DIR --sign-key KEY [untrusted_release: missing_signature]`, false, ""},
		{"a release signed by a key the rule doesn't hold", pinned, untrusted(provenance.UnknownKey, "signed by 1a2b3c, which is not a trusted key; trust it (--key, or the trust policy's keys) if it is yours"),
			`prod/payments@1796000000000002: not signed by a key that trust rule "prod" accepts (signed by 1a2b3c); sign it with one of the rule's keys (bucketops push prod/payments DIR --sign-key KEY), or add the key to the rule if it is yours [untrusted_release: unknown_key]`, false, ""},
		{"an altered signature", pinned, untrusted(provenance.BadSignature, "the signature by key ci (1a2b3c) does not verify: the statement or the signature was altered"),
			`prod/payments@1796000000000002: its signature doesn't verify with the keys of trust rule "prod": the signature by key ci (1a2b3c) does not verify: the statement or the signature was altered; publish it signed: bucketops push prod/payments DIR --sign-key KEY [untrusted_release: bad_signature]`, false, ""},
		{"bytes other than the signed ones", pinned, untrusted(provenance.DigestMismatch, "the bytes hash to sha256:bad, but the signed statement says sha256:good: they were rewritten after signing"),
			`prod/payments@1796000000000002: not what was signed, so trust rule "prod" refuses it: the bytes hash to sha256:bad, but the signed statement says sha256:good: they were rewritten after signing; publish it signed: bucketops push prod/payments DIR --sign-key KEY [untrusted_release: digest_mismatch]`, false, ""},
		{"a release signed for another app", pinned, untrusted(provenance.WrongApp, "the statement was signed for prod/other, not prod/payments: it was copied from another app"),
			`prod/payments@1796000000000002: trust rule "prod" refuses it: the statement was signed for prod/other, not prod/payments: it was copied from another app; to copy a release between apps, promote it signed: bucketops promote SRC prod/payments --sign-key KEY [untrusted_release: wrong_app]`, false, ""},
		{"a gap", pinned, untrusted(provenance.Gap, "it replaced prod/payments@1796000000000001, which is gone from the history: that release was deleted (or expired by a lifecycle rule)"),
			`prod/payments@1796000000000002: its signed history is broken, so trust rule "prod" refuses it: it replaced prod/payments@1796000000000001, which is gone from the history: that release was deleted (or expired by a lifecycle rule); publish a new signed release on top of the head (bucketops push prod/payments DIR --sign-key KEY), which links to the history as it is (docs/signing.md) [untrusted_release: gap]`, false, ""},
		{"a fork", pinned, untrusted(provenance.Fork, "it replaced prod/payments@1, but prod/payments@2 came between them: the history was rewritten"),
			`prod/payments@1796000000000002: its signed history is broken, so trust rule "prod" refuses it: it replaced prod/payments@1, but prod/payments@2 came between them: the history was rewritten; publish a new signed release on top of the head`, true, "untrusted_release: fork"},
		{"an app no trust rule covers", head, &UntrustedError{Finding: provenance.Finding{App: "prod/payments", Problem: noTrustRule}},
			`prod/payments (head): no rule of the trust policy covers this app; add a rule for its prefix to the bridge's trust policy (require: off leaves it unverified) [untrusted_release: no_trust_rule]`, false, ""},
		{"a rollback below the floor by deletion", pinned, fmt.Errorf("admit: %w", &floor.RollbackError{Floor: mark, Served: floor.Claim{Generation: pinned.Generation}, Head: floor.Claim{Generation: 1796000000000003, Replaced: 1796000000000002}}),
			`prod/payments@1796000000000002: older than the app's rollback floor prod/payments@1796000000000005 (the newest signed release the bridge accepted, 2026-12-01 09:30 UTC), and the head prod/payments@1796000000000003 is older than the floor: the generations after it were deleted; to go back deliberately, publish a signed rollback: bucketops rollback prod/payments --to GEN --sign-key KEY (docs/signing.md) [rollback_refused]`, false, ""},
		{"a rollback below the floor by copy", pinned, &floor.RollbackError{Floor: mark, Served: floor.Claim{Generation: pinned.Generation}, Head: floor.Claim{Generation: 1796000000000009, Replaced: 1796000000000001}},
			`prod/payments@1796000000000002: older than the app's rollback floor prod/payments@1796000000000005 (the newest signed release the bridge accepted, 2026-12-01 09:30 UTC), and the head prod/payments@1796000000000009 replaced prod/payments@1796000000000001, older than the floor: an older signed release was copied back as the head;`, true, "rollback_refused"},
		{"a floor the bridge can't write", pinned, fmt.Errorf("%w: raise the floor of prod/payments in gs://b: %w; …", floor.ErrUnavailable, chain),
			`prod/payments@1796000000000002: the bridge can't read or write this app's rollback floor (.bucketops/floor/ in the bucket), and under require: signed it serves nothing without it; let the bridge's identity create and delete objects under .bucketops/floor/ (docs/argocd.md); the bridge's log says what failed [floor_unavailable]`, false, ""},
		{"render memory taken", pinned, fmt.Errorf("render prod/payments@1 (5 bytes): %w: waited 10s", memory.ErrBusy),
			`prod/payments@1796000000000002: the bridge's render memory (--render-memory) stayed taken by other renders for the whole wait; Argo CD tries again at its next refresh; if it lasts, raise --render-memory (and the pod's memory limit) or run more bridge replicas [render_busy]`, false, ""},
		{"bytes that don't match their digest", pinned, fmt.Errorf("read prod/payments@1796000000000002: %w: sha256:aa != sha256:bb", store.ErrCorrupt),
			`prod/payments@1796000000000002: the stored bytes don't match the release's bucketops-digest: they were rewritten behind bucketops, or damaged; publish the release again (bucketops push prod/payments DIR), or roll back to a good one (bucketops rollback prod/payments --to GEN) [digest_mismatch]`, false, ""},
		{"a Secret no key of the bridge opens", pinned, fmt.Errorf("render prod/payments@1: %w", &secrets.DecryptError{Source: "secret.yaml", Document: 1, Object: "Secret pay/db", Reason: secrets.ReasonNoKey, Detail: "the document is encrypted for age recipient age1x; this bridge holds age keys for age1y"}),
			`prod/payments@1796000000000002: cannot decrypt secret.yaml: document 1 (Secret pay/db): no key fits: the document is encrypted for age recipient age1x; this bridge holds age keys for age1y; encrypt it for a key the bridge holds (sops updatekeys), or give the bridge the key it is encrypted for, and publish again [no_key]`, false, ""},
		{"a Secret whose MAC fails", pinned, &secrets.DecryptError{Source: "secret.yaml", Document: 2, Reason: secrets.ReasonMACMismatch},
			`prod/payments@1796000000000002: cannot decrypt secret.yaml: document 2: integrity check failed; its values were changed after encryption; encrypt the document again with sops and publish again [mac_mismatch]`, false, ""},
		{"a render past the deadline", pinned, fmt.Errorf("read: %w", context.DeadlineExceeded),
			`prod/payments@1796000000000002: the render took longer than the bridge's --timeout; Argo CD tries again at its next refresh; the bridge's log says what it waited for [timeout]`, false, ""},
		{"a bucket the bridge may not read", pinned, fmt.Errorf("read: %w: %w", store.ErrAccess, chain),
			`prod/payments@1796000000000002: the bridge can't read the bucket; Argo CD tries again at its next refresh; the bridge's /readyz and log say why [bucket_access_denied]`, false, ""},
		{"a generation that is gone", pinned, fmt.Errorf("read: %w", store.ErrNotFound),
			`prod/payments@1796000000000002: no generation 1796000000000002 of prod/payments in the bucket (deleted, or never published); pin a release bucketops log prod/payments lists [generation_not_found]`, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, reason := classify(tc.ref, tc.err)
			got := refusal(tc.ref, reason, tc.err)
			switch {
			case !tc.prefix && got != tc.line:
				t.Errorf("line\n\t%s\nwant\n\t%s", got, tc.line)
			case tc.prefix && (!strings.HasPrefix(got, tc.line) || !strings.HasSuffix(got, " ["+tc.code+"]")):
				t.Errorf("line\n\t%s\nwant it to start with\n\t%s\nand end with [%s]", got, tc.line, tc.code)
			}
			if strings.Contains(got, "googleapi") || strings.Contains(got, "\n") {
				t.Errorf("the line holds the error chain or a newline: %q", got)
			}
		})
	}
}
