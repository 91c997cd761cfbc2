package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bucketops/bucketops/floor"
	"github.com/bucketops/bucketops/memory"
	"github.com/bucketops/bucketops/policy"
	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/secrets"
	"github.com/bucketops/bucketops/store"
)

// refusal is the one line a failed render answers with, in the error
// body's message: the plugin prints it, and Argo CD shows it in the
// Application's ComparisonError, which is where whoever owns the app looks.
// It names the release (app@generation, or "app (head)" when the head
// wasn't read), what refused it (the trust rule, the tenancy policy rule,
// the rollback floor, the digest), what to do, and last, in brackets, the
// stable reason code (and a trust problem) that metrics and docs use. The
// Go error chain stays in the bridge's log.
func refusal(ref store.Ref, reason string, err error) string {
	what := ref.App + " (head)"
	if ref.Generation != 0 {
		what = ref.String()
	}
	code := reason
	text := explain(ref, err)
	var untrusted *UntrustedError
	if errors.As(err, &untrusted) {
		code += ": " + untrusted.Finding.Problem
	}
	return oneLine(what + ": " + text + " [" + code + "]")
}

// explain says what refused the release ref names and what to do.
func explain(ref store.Ref, err error) string {
	app := ref.App
	var (
		untrusted *UntrustedError
		violation *policy.Violation
		rollback  *floor.RollbackError
		decrypt   *secrets.DecryptError
		input     *render.InputError
	)
	switch {
	case errors.As(err, &untrusted):
		return explainUntrusted(app, untrusted)
	case errors.As(err, &violation):
		if violation.Reason == policy.ReasonNoRule {
			return "no rule of the tenancy policy covers this app; add a rule for its prefix to the bridge's policy file"
		}
		return fmt.Sprintf("refused by tenancy policy rule %q: %s", violation.Prefix, violation.Detail)
	case errors.As(err, &rollback):
		m := rollback.Floor
		why := fmt.Sprintf("and the head %s@%d replaced %s@%d, older than the floor: an older signed release was copied back as the head", app, rollback.Head.Generation, app, rollback.Head.Replaced)
		switch {
		case rollback.HeadErr != nil:
			why = "and the head doesn't verify, so it can't show that it descends from the floor"
		case rollback.Head.Generation < m.Generation:
			why = fmt.Sprintf("and the head %s@%d is older than the floor: the generations after it were deleted", app, rollback.Head.Generation)
		}
		return fmt.Sprintf("older than the app's rollback floor %s@%d (the newest signed release the bridge accepted, %s), %s; "+
			"to go back deliberately, publish a signed rollback: bucketops rollback %s --to GEN --sign-key KEY (docs/signing.md)",
			app, m.Generation, m.Accepted.Format("2006-01-02 15:04 UTC"), why, app)
	case errors.Is(err, floor.ErrUnavailable):
		return "the bridge can't read or write this app's rollback floor (" + floor.Dir + "/ in the bucket), and under require: signed it serves nothing without it; " +
			"let the bridge's identity create and delete objects under " + floor.Dir + "/ (docs/argocd.md); the bridge's log says what failed"
	case errors.Is(err, memory.ErrBusy):
		return "the bridge's render memory (--render-memory) stayed taken by other renders for the whole wait; Argo CD tries again at its next refresh; " +
			"if it lasts, raise --render-memory (and the pod's memory limit) or run more bridge replicas"
	case errors.Is(err, store.ErrInvalidApp):
		return "not an app name: " + err.Error()
	case errors.Is(err, store.ErrNotFound) && ref.Generation != 0:
		return fmt.Sprintf("no generation %d of %s in the bucket (deleted, or never published); pin a release bucketops log %s lists", ref.Generation, app, app)
	case errors.Is(err, store.ErrNotFound):
		return fmt.Sprintf("no release of %s in the bucket; publish one (bucketops push %s DIR), or fix the app the Application names (its repoURL, or the plugin parameter app)", app, app)
	case errors.Is(err, store.ErrCorrupt):
		return fmt.Sprintf("the stored bytes don't match the release's bucketops-digest: they were rewritten behind bucketops, or damaged; "+
			"publish the release again (bucketops push %s DIR), or roll back to a good one (bucketops rollback %s --to GEN)", app, app)
	case errors.As(err, &decrypt):
		return explainDecrypt(decrypt)
	case errors.As(err, &input):
		return "the release is not a valid manifest stream: " + input.Error() + "; fix the manifests and publish again (bucketops push checks them before writing)"
	case errors.Is(err, render.ErrInvalid):
		return "the release is not a valid manifest stream; fix the manifests and publish again (bucketops push checks them before writing)"
	case errors.Is(err, context.DeadlineExceeded):
		return "the render took longer than the bridge's --timeout; Argo CD tries again at its next refresh; the bridge's log says what it waited for"
	case errors.Is(err, store.ErrBucket), errors.Is(err, store.ErrAccess), isNetError(err):
		return "the bridge can't read the bucket; Argo CD tries again at its next refresh; the bridge's /readyz and log say why"
	}
	var invalid *invalidParameter
	if errors.As(err, &invalid) {
		return invalid.Error()
	}
	return "the bridge failed to read or render the release; Argo CD tries again at its next refresh; the bridge's log says why"
}

// invalidParameter is a request the plugin made wrong.
type invalidParameter struct{ msg string }

func (e *invalidParameter) Error() string { return e.msg }

// explainUntrusted says which trust rule refused the release and how to
// publish one it accepts.
func explainUntrusted(app string, e *UntrustedError) string {
	f := e.Finding
	rule := fmt.Sprintf("trust rule %q", e.Prefix)
	sign := fmt.Sprintf("publish it signed: bucketops push %s DIR --sign-key KEY", app)
	chain := fmt.Sprintf("publish a new signed release on top of the head (bucketops push %s DIR --sign-key KEY), which links to the history as it is (docs/signing.md)", app)
	switch f.Problem {
	case noTrustRule:
		return "no rule of the trust policy covers this app; add a rule for its prefix to the bridge's trust policy (require: off leaves it unverified)"
	case provenance.MissingSignature:
		return fmt.Sprintf("not signed, and %s accepts only releases signed by its keys; %s", rule, sign)
	case provenance.UnknownKey:
		signedBy, _, _ := strings.Cut(f.Detail, ", which")
		return fmt.Sprintf("not signed by a key that %s accepts (%s); sign it with one of the rule's keys (bucketops push %s DIR --sign-key KEY), or add the key to the rule if it is yours",
			rule, signedBy, app)
	case provenance.BadSignature:
		return fmt.Sprintf("its signature doesn't verify with the keys of %s: %s; %s", rule, f.Detail, sign)
	case provenance.DigestMismatch, provenance.MetadataMismatch:
		return fmt.Sprintf("not what was signed, so %s refuses it: %s; %s", rule, f.Detail, sign)
	case provenance.WrongApp:
		return fmt.Sprintf("%s refuses it: %s; to copy a release between apps, promote it signed: bucketops promote SRC %s --sign-key KEY", rule, f.Detail, app)
	case provenance.Gap, provenance.Fork, provenance.Replay:
		return fmt.Sprintf("its signed history is broken, so %s refuses it: %s; %s", rule, f.Detail, chain)
	}
	return fmt.Sprintf("%s refuses it: %s: %s; %s", rule, f.Problem, f.Detail, sign)
}

// explainDecrypt says which document didn't decrypt and what to do.
func explainDecrypt(e *secrets.DecryptError) string {
	var do string
	switch e.Reason {
	case secrets.ReasonNoKey:
		do = "encrypt it for a key the bridge holds (sops updatekeys), or give the bridge the key it is encrypted for, and publish again"
	case secrets.ReasonMACMismatch:
		do = "its values were changed after encryption; encrypt the document again with sops and publish again"
	case secrets.ReasonBadMetadata:
		do = "encrypt the document again with sops and publish again"
	default:
		do = "fix the document and publish again"
	}
	return "cannot decrypt " + e.Error() + "; " + do
}

// oneLine keeps a message on one line, whatever its parts held.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
