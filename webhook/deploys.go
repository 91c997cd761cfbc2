package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/store"
)

// pushEnvelope is what a Pub/Sub push subscription POSTs
// (https://cloud.google.com/pubsub/docs/push#receive_push).
type pushEnvelope struct {
	Message *struct {
		Attributes map[string]string `json:"attributes"`
		// Data is base64 in JSON; encoding/json decodes it into bytes.
		Data      []byte `json:"data"`
		MessageID string `json:"messageId"`
	} `json:"message"`
	Subscription string `json:"subscription"`
}

// pushResponse tells whoever reads the delivery log what became of it.
type pushResponse struct {
	Outcome    string `json:"outcome"`
	App        string `json:"app,omitempty"`
	Generation int64  `json:"generation,omitempty"`
	Detail     string `json:"detail,omitempty"`
}

// pubsubPush answers POST /v1/pubsub/push. After authentication, every
// delivery is acknowledged with 200, whatever it held: redelivering a
// message we can't use (another bucket, another object, a garbled payload,
// a generation the bucket doesn't have) would only repeat the same answer.
// Only authentication failures (401, 403) and a bucket that can't be asked
// to check the notification (503) are refused, which Pub/Sub retries with
// back-off.
func (s *Server) pubsubPush(w http.ResponseWriter, r *http.Request) {
	// The bridge's own tokens never push: a caller holding one is told
	// so, not asked for another token.
	if c, err := s.authenticate(r); err == nil {
		s.metrics.authFailures.WithLabelValues("forbidden").Inc()
		s.fail(w, r, http.StatusForbidden, "forbidden", fmt.Errorf("%w: the token's role is %s; Pub/Sub push authenticates with Google's OIDC token", errWrongRole, c.roles[0]))
		s.logAuditor(r, c, http.StatusForbidden)
		return
	}
	id, err := s.push.Verify(r)
	if err != nil {
		s.deploys.Ignored(deploy.SourcePush, "rejected")
		status, reason := http.StatusUnauthorized, "unauthenticated"
		if errors.Is(err, ErrPushForbidden) {
			status, reason = http.StatusForbidden, "forbidden"
		}
		s.metrics.authFailures.WithLabelValues(reason).Inc()
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="bucketops"`)
		}
		var denied interface{ Detail() string }
		if errors.As(err, &denied) {
			s.log.Info("pubsub push refused", "detail", denied.Detail())
		}
		s.fail(w, r, status, reason, err)
		return
	}
	var env pushEnvelope
	if err := json.NewDecoder(r.Body).Decode(&env); err != nil || env.Message == nil {
		if err == nil {
			err = errors.New("no message field")
		}
		s.deploys.Ignored(deploy.SourcePush, "malformed")
		s.log.Warn("malformed push delivery dropped", "error", err, "sender", id.Email)
		writeJSON(w, http.StatusOK, pushResponse{Outcome: "malformed", Detail: "not a Pub/Sub push envelope: " + err.Error()})
		return
	}
	ev, isNew, err := s.deploys.Take(r.Context(), s.location, deploy.SourcePush, env.Message.Attributes, env.Message.Data, time.Now())
	switch {
	case errors.Is(err, deploy.ErrUnverified):
		// Pub/Sub delivers it again, with back-off.
		s.fail(w, r, http.StatusServiceUnavailable, "bucket_unreachable", errors.New("the notification can't be checked against the bucket now; deliver it again"))
	case errors.Is(err, deploy.ErrIgnored):
		writeJSON(w, http.StatusOK, pushResponse{Outcome: "ignored", Detail: err.Error()})
	case err != nil:
		writeJSON(w, http.StatusOK, pushResponse{Outcome: "malformed", Detail: err.Error()})
	case !isNew:
		writeJSON(w, http.StatusOK, pushResponse{Outcome: "duplicate", App: ev.App, Generation: ev.Generation})
	default:
		writeJSON(w, http.StatusOK, pushResponse{Outcome: "accepted", App: ev.App, Generation: ev.Generation})
	}
}

// deployStatus answers GET /v1/apps/{app}/-/status[?generation=G]: where
// the generation (default: the head) stands in Argo CD.
func (s *Server) deployStatus(w http.ResponseWriter, r *http.Request, app string) {
	if s.deploys == nil {
		s.fail(w, r, http.StatusNotImplemented, "no_argocd", deploy.ErrNoArgoCD)
		return
	}
	ref := store.Ref{App: app}
	if g := r.URL.Query().Get("generation"); g != "" {
		gen, err := strconv.ParseInt(g, 10, 64)
		if err != nil || gen <= 0 {
			s.fail(w, r, http.StatusBadRequest, "invalid_parameter", fmt.Errorf("generation %q: want a positive generation number, as bucketops push prints", g))
			return
		}
		ref.Generation = gen
	}
	st, err := s.deploys.Status(r.Context(), app, ref.Generation)
	switch {
	case errors.Is(err, deploy.ErrNoArgoCD):
		s.fail(w, r, http.StatusNotImplemented, "no_argocd", err)
	case errors.Is(err, deploy.ErrIndexLoading):
		w.Header().Set("Retry-After", "2")
		s.fail(w, r, http.StatusServiceUnavailable, "argocd_loading", err)
	case err != nil:
		s.storeError(w, r, ref, err)
	default:
		writeJSON(w, http.StatusOK, st)
	}
}

// deploysResponse is GET /v1/apps/{app}/-/deploys's answer: Argo CD's
// record of the app, and a page of its releases judged by it.
type deploysResponse struct {
	deploy.Deploys
	Releases []deploy.ReleaseDeploys `json:"releases"`
	// NextBefore is the before= of the next page, 0 on the last page.
	NextBefore int64 `json:"next_before"`
}

// deploysOf answers GET /v1/apps/{app}/-/deploys[?limit=N&before=G]: per
// Application, the releases Argo CD ran and when, and for a page of the
// releases, newest first, where and when each was live, refused, never
// deployed or older than what Argo CD keeps. It reads the index and the
// bucket's history; it asks Argo CD nothing.
func (s *Server) deploysOf(w http.ResponseWriter, r *http.Request, app string) {
	if s.deploys == nil {
		s.fail(w, r, http.StatusNotImplemented, "no_argocd", deploy.ErrNoArgoCD)
		return
	}
	limit, before, ok := s.page(w, r)
	if !ok {
		return
	}
	ds, err := s.deploys.Deploys(r.Context(), app)
	switch {
	case errors.Is(err, deploy.ErrNoArgoCD):
		s.fail(w, r, http.StatusNotImplemented, "no_argocd", err)
		return
	case errors.Is(err, deploy.ErrIndexLoading):
		w.Header().Set("Retry-After", "2")
		s.fail(w, r, http.StatusServiceUnavailable, "argocd_loading", err)
		return
	case err != nil:
		s.storeError(w, r, store.Ref{App: app}, err)
		return
	}
	rels, err := s.releases.History(r.Context(), app, store.HistoryOptions{Limit: int(limit) + 1, Before: before})
	if err != nil {
		s.storeError(w, r, store.Ref{App: app}, err)
		return
	}
	resp := deploysResponse{Deploys: ds, Releases: []deploy.ReleaseDeploys{}}
	if len(rels) > int(limit) {
		rels = rels[:limit]
		resp.NextBefore = rels[limit-1].Generation
	}
	for _, rel := range rels {
		resp.Releases = append(resp.Releases, ds.Release(rel))
	}
	writeJSON(w, http.StatusOK, resp)
}
