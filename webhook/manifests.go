package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/floor"
	"github.com/bucketops/bucketops/policy"
	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/secrets"
	"github.com/bucketops/bucketops/store"
)

// Headers the plugin sends with a manifest request, from what Argo CD sets
// in its environment and an Application author can't override.
const (
	// HeaderApplication carries the Application's instance name
	// (ARGOCD_APP_NAME).
	HeaderApplication = "X-Bucketops-Application"
	// HeaderDestination carries its destination namespace
	// (ARGOCD_APP_NAMESPACE).
	HeaderDestination = "X-Bucketops-Destination-Namespace"
	// HeaderProject carries its project (ARGOCD_APP_PROJECT_NAME, which
	// Argo CD sets from v3.0).
	HeaderProject = "X-Bucketops-Project"
)

// rendered is one release as Argo CD gets it.
type rendered struct {
	release store.Release
	// replaced is the generation the verified signed statement says the
	// release replaced, for the rollback floor.
	replaced int64
	body     []byte
	// objects are the release's objects (identities, no bodies), for the
	// policy's content rules, checked on every request.
	objects []render.Object
}

// manifests answers GET /v1/apps/{app}/-/manifests[?generation=G]: the
// release rendered, Secrets decrypted. Generations are immutable, so renders
// are cached by app@generation; serving the head of a cached app costs one
// attributes request.
func (s *Server) manifests(w http.ResponseWriter, r *http.Request, app string) {
	start := time.Now()
	ref := store.Ref{App: app}
	if g := r.URL.Query().Get("generation"); g != "" {
		gen, err := strconv.ParseInt(g, 10, 64)
		if err != nil || gen <= 0 {
			s.renderFailed(w, r, ref, http.StatusBadRequest, "invalid_parameter", &invalidParameter{fmt.Sprintf("generation %q: want a positive generation number, as bucketops log shows", g)})
			return
		}
		ref.Generation = gen
	}
	check, err := s.admission(r, app)
	if err != nil {
		s.renderError(w, r, ref, err)
		return
	}
	size := int64(-1) // unknown until the attributes are read
	if ref.Generation == 0 {
		head, err := s.releases.Head(r.Context(), app)
		if err != nil {
			s.renderError(w, r, ref, err)
			return
		}
		ref.Generation, size = head.Generation, head.Size
	}
	// A policy's keys decide what decrypts: a render made under one rule
	// is never served under another.
	key := ref.String() + check.cacheKey()
	out, hit := s.cache.Get(key)
	if !hit {
		// Concurrent cold renders of one release share a single read and
		// decryption; none is cancelled by another caller going away.
		v, err, _ := s.inflight.Do(key, func() (any, error) {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.timeout)
			defer cancel()
			out, err := s.render(ctx, ref, size, check)
			if err != nil {
				return nil, err
			}
			s.cache.Add(key, out, renderSize(key, out))
			return out, nil
		})
		if err != nil {
			s.renderError(w, r, ref, err)
			return
		}
		out = v.(rendered)
	}
	if err := check.release(out); err != nil {
		s.renderError(w, r, ref, err)
		return
	}
	// The floor is judged on every request, cached render or not: it is
	// the bucket's, so every replica judges alike.
	if err := s.admitFloor(r.Context(), check, out); err != nil {
		s.renderError(w, r, ref, err)
		return
	}
	cacheLabel := map[bool]string{true: "hit", false: "miss"}[hit]
	s.metrics.cache.WithLabelValues(cacheLabel).Inc()
	s.metrics.renders.WithLabelValues("ok").Inc()
	s.metrics.renderSeconds.WithLabelValues(cacheLabel).Observe(time.Since(start).Seconds())
	s.metrics.cacheBytes.Set(float64(s.cache.Bytes()))

	h := w.Header()
	h.Set("Content-Type", "application/yaml")
	h.Set("Content-Length", strconv.Itoa(len(out.body)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Bucketops-App", out.release.App)
	h.Set("X-Bucketops-Generation", strconv.FormatInt(out.release.Generation, 10))
	h.Set("X-Bucketops-Digest", out.release.Digest)
	h.Set("X-Bucketops-Kind", out.release.Kind)
	w.WriteHeader(http.StatusOK)
	w.Write(out.body)
}

// render reads and renders one release, admitted by its size (size < 0:
// not known yet, read from its attributes first).
func (s *Server) render(ctx context.Context, ref store.Ref, size int64, check admission) (rendered, error) {
	if s.memory != nil {
		if size < 0 {
			attrs, err := s.releases.Stat(ctx, ref)
			if err != nil {
				return rendered{}, err
			}
			size = attrs.Size
		}
		done, err := s.memory.Acquire(ctx, s.timeout, size)
		if err != nil {
			return rendered{}, fmt.Errorf("render %s (%d bytes): %w", ref, size, err)
		}
		defer done()
	}
	rel, data, err := s.releases.Read(ctx, ref)
	if err != nil {
		return rendered{}, err
	}
	replaced, err := s.verify(ctx, check, rel)
	if err != nil {
		return rendered{}, err
	}
	if err := check.copied(rel); err != nil {
		return rendered{}, err
	}
	opts := secrets.Options{App: rel.App, Tombstone: rel.Kind == store.KindTombstone}
	if check.rule != nil {
		// What the rule refuses whoever asks is refused before anything
		// is decrypted; the destination is checked per request.
		opts.AllowKey = check.rule.AllowsKey
		opts.Check = func(objs []render.Object) error { return check.rule.CheckObjects(rel.App, objs, "") }
	}
	res, err := s.renderer.Render(data, opts)
	if err != nil {
		return rendered{}, fmt.Errorf("render %s: %w", rel.Ref(), err)
	}
	for i := range res.Objects {
		res.Objects[i].Body = nil // the identities are kept, not the text
	}
	return rendered{release: rel, replaced: replaced, body: res.Body, objects: res.Objects}, nil
}

// admission is what the tenancy policy lets one request have, and what
// the trust policy requires of the release.
type admission struct {
	app    string
	policy *policy.Policy
	rule   *policy.Rule // nil without a policy
	trust  *provenance.TrustPolicy
	// trustRule is nil without a trust policy.
	trustRule *provenance.TrustRule
	// destination is where objects without a namespace land.
	destination string
}

// admission resolves the policy rule for app and the Application asking,
// and checks its project. Without a policy everything is admitted.
func (s *Server) admission(r *http.Request, app string) (admission, error) {
	a := admission{app: app}
	if s.trust != nil {
		a.trust = s.trust.Current()
		rule, ok := a.trust.RuleFor(app)
		if !ok {
			return admission{}, &UntrustedError{Finding: provenance.Finding{App: app, Problem: noTrustRule,
				Detail: "no rule of the trust policy covers this app; add one (require: off leaves it unverified)"}}
		}
		a.trustRule = rule
	}
	if s.policy == nil {
		return a, nil
	}
	pol := s.policy.Current()
	rule, err := pol.Rule(app)
	if err != nil {
		return admission{}, err
	}
	a.policy, a.rule, a.destination = pol, rule, r.Header.Get(HeaderDestination)
	project := r.Header.Get(HeaderProject)
	// With Argo CD configured, the Application the request names is looked
	// up and its project and destination, as Argo CD holds them, are the
	// only ones judged: the headers are the caller's word, and any holder
	// of the plugin token can send any project. Without Argo CD they are
	// all there is (docs/tenancy.md says what the plugin token reaches).
	if s.callers != nil {
		instance := r.Header.Get(HeaderApplication)
		c, err := s.callers.Caller(r.Context(), instance)
		switch {
		case errors.Is(err, deploy.ErrNoArgoCD):
		case err != nil && instance == "":
			return admission{}, &policy.Violation{App: app, Prefix: rule.Prefix, Reason: policy.ReasonProject,
				Detail: "the request names no Argo CD Application (the plugin sends ARGOCD_APP_NAME as " + HeaderApplication + "); under a policy the bridge judges the project and destination Argo CD holds for it, never ones a caller sends"}
		case err != nil:
			return admission{}, &policy.Violation{App: app, Prefix: rule.Prefix, Reason: policy.ReasonProject, Detail: "can't tell which Argo CD project asks (" + err.Error() + "): check the Application's name, and the bridge's connection to Argo CD"}
		case c.App != app:
			return admission{}, &policy.Violation{App: app, Prefix: rule.Prefix, Reason: policy.ReasonProject,
				Detail: fmt.Sprintf("Application %s/%s deploys %s, not this app: point its repoURL (or plugin parameter app) at its own app", c.Namespace, c.Name, c.App)}
		default:
			project, a.destination = c.Project, c.Destination
		}
	}
	if err := rule.CheckProject(app, project); err != nil {
		return admission{}, err
	}
	return a, nil
}

// cacheKey tells renders made under different rules apart: a release
// served under one trust rule is verified again under another.
func (a admission) cacheKey() string {
	key := ""
	if a.rule != nil {
		key += "|" + a.policy.Digest + "|" + a.rule.Prefix
	}
	if a.trustRule != nil {
		key += "|" + a.trust.Digest + "|" + a.trustRule.Prefix
	}
	return key
}

// UntrustedError refuses a release that doesn't verify under require:
// signed.
type UntrustedError struct {
	Finding provenance.Finding
	// Prefix is the trust rule's.
	Prefix string
}

func (e *UntrustedError) Error() string {
	if e.Finding.Problem == noTrustRule {
		return e.Finding.Detail
	}
	return fmt.Sprintf("%s: %s (the trust policy requires signed releases under %q; Argo CD keeps what it last deployed)", e.Finding.Problem, e.Finding.Detail, e.Prefix)
}

// noTrustRule is the problem of an app the trust policy doesn't cover.
const noTrustRule = "no_trust_rule"

// verify checks rel, whose bytes Read matched to its digest, against the
// keys of its trust rule, before anything is decrypted: under signed a
// release that doesn't verify is refused, under warn it is served with a
// warning, and both are counted. It returns the generation the verified
// statement says the release replaced.
func (s *Server) verify(ctx context.Context, check admission, rel store.Release) (int64, error) {
	rule := check.trustRule
	if rule == nil || rule.Require == provenance.RequireOff {
		return 0, nil
	}
	f, err := rule.Keys().Verify(ctx, s.releases, rel)
	if err != nil {
		return 0, err
	}
	if f.OK() {
		return f.Replaced, nil
	}
	if rule.Require == provenance.RequireWarn {
		s.metrics.untrusted.WithLabelValues(f.Problem, "served").Inc()
		s.log.Warn("serving a release that does not verify (trust rule require: warn)", "app", rel.App, "generation", rel.Generation, "problem", f.Problem, "detail", f.Detail, "rule", rule.Prefix)
		return 0, nil
	}
	s.metrics.untrusted.WithLabelValues(f.Problem, "refused").Inc()
	return 0, &UntrustedError{Finding: f, Prefix: rule.Prefix}
}

// admitFloor judges a release served under require: signed against its
// app's rollback floor, and raises the floor when it is newer. An older
// release is served only while the head, whose signature is checked here,
// still descends from the floor.
func (s *Server) admitFloor(ctx context.Context, check admission, out rendered) error {
	rule := check.trustRule
	if s.floors == nil || rule == nil || rule.Require != provenance.RequireSigned {
		return nil
	}
	rel := out.release
	served := floor.Claim{Generation: rel.Generation, Digest: rel.Digest, Replaced: out.replaced}
	head := func(ctx context.Context) (floor.Claim, error) {
		h, err := s.releases.Head(ctx, rel.App)
		if err != nil {
			return floor.Claim{}, err
		}
		f := rule.Keys().Check(h)
		if !f.OK() {
			return floor.Claim{Generation: h.Generation}, f
		}
		return floor.Claim{Generation: h.Generation, Digest: h.Digest, Replaced: f.Replaced}, nil
	}
	err := s.floors.Admit(ctx, rel.App, served, head)
	if errors.Is(err, floor.ErrRollback) {
		s.metrics.untrusted.WithLabelValues("rollback", "refused").Inc()
	}
	return err
}

// release checks a rendered release against what depends on the
// Application asking: where objects without a namespace land. The rest was
// checked when it was rendered, under the same rule (cacheKey).
func (a admission) release(out rendered) error {
	if a.rule == nil {
		return nil
	}
	return a.rule.CheckDestination(a.app, out.objects, a.destination)
}

// copied refuses a release copied from where the rule doesn't allow.
func (a admission) copied(rel store.Release) error {
	if a.rule == nil || rel.Origin == "" {
		return nil
	}
	src, err := store.ParseRef(rel.Origin)
	if err != nil {
		return &policy.Violation{App: a.app, Prefix: a.rule.Prefix, Reason: policy.ReasonCopy, Detail: fmt.Sprintf("the release's origin %q is not app@generation", rel.Origin)}
	}
	return a.policy.CheckCopy(src.App, a.app)
}

func (s *Server) renderError(w http.ResponseWriter, r *http.Request, ref store.Ref, err error) {
	status, reason := classify(ref, err)
	s.renderFailed(w, r, ref, status, reason, err)
}

// renderFailed answers a failed render with the reason, the error, and the
// line for Argo CD (refusal).
func (s *Server) renderFailed(w http.ResponseWriter, r *http.Request, ref store.Ref, status int, reason string, err error) {
	s.metrics.renders.WithLabelValues("error").Inc()
	s.metrics.renderErrors.WithLabelValues(reason).Inc()
	s.failWith(w, r, status, errorBody{Error: err.Error(), Reason: reason, Message: refusal(ref, reason, err)}, err)
}
