package webhook

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/bucketops/bucketops/store"
)

// HeaderApplication carries the Argo CD Application instance name
// (ARGOCD_APP_NAME) on a manifest request from the plugin.
const HeaderApplication = "X-Bucketops-Application"

// rendered is one release as Argo CD gets it.
type rendered struct {
	release store.Release
	body    []byte
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
			s.renderFailed(w, r, http.StatusBadRequest, "invalid_parameter", fmt.Errorf("generation %q: want a positive generation number, as bucketops log shows", g))
			return
		}
		ref.Generation = gen
	}
	if ref.Generation == 0 {
		head, err := s.releases.Head(r.Context(), app)
		if err != nil {
			s.renderError(w, r, ref, err)
			return
		}
		ref.Generation = head.Generation
	}
	key := ref.String()
	out, hit := s.cache.get(key)
	if !hit {
		// Concurrent cold renders of one release share a single read and
		// decryption; none is cancelled by another caller going away.
		v, err, _ := s.inflight.Do(key, func() (any, error) {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.timeout)
			defer cancel()
			rel, data, err := s.releases.Read(ctx, ref)
			if err != nil {
				return nil, err
			}
			body, err := s.renderer.Render(data, rel.Kind == store.KindTombstone)
			if err != nil {
				return nil, fmt.Errorf("render %s: %w", rel.Ref(), err)
			}
			out := rendered{release: rel, body: body}
			s.cache.add(key, out)
			return out, nil
		})
		if err != nil {
			s.renderError(w, r, ref, err)
			return
		}
		out = v.(rendered)
	}
	cacheLabel := map[bool]string{true: "hit", false: "miss"}[hit]
	s.metrics.cache.WithLabelValues(cacheLabel).Inc()
	s.metrics.renders.WithLabelValues("ok").Inc()
	s.metrics.renderSeconds.WithLabelValues(cacheLabel).Observe(time.Since(start).Seconds())
	s.metrics.cacheBytes.Set(float64(s.cache.size()))

	if s.deploys != nil {
		// Argo CD's repo-server passes the Application's instance name to
		// the plugin, which passes it on: the status API needs to know what
		// each Application was given.
		s.deploys.Served(out.release.App, r.Header.Get(HeaderApplication), out.release.Generation)
	}
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

func (s *Server) renderError(w http.ResponseWriter, r *http.Request, ref store.Ref, err error) {
	status, reason := classify(ref, err)
	s.renderFailed(w, r, status, reason, err)
}

func (s *Server) renderFailed(w http.ResponseWriter, r *http.Request, status int, reason string, err error) {
	s.metrics.renders.WithLabelValues("error").Inc()
	s.metrics.renderErrors.WithLabelValues(reason).Inc()
	s.fail(w, r, status, reason, err)
}
