package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"github.com/bucketops/bucketops/floor"
	"github.com/bucketops/bucketops/memory"
	"github.com/bucketops/bucketops/policy"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/secrets"
	"github.com/bucketops/bucketops/store"
)

const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

type appsResponse struct {
	Apps []store.Release `json:"apps"`
}

// listApps answers GET /v1/apps[?prefix=P]: every app with its head release.
func (s *Server) listApps(w http.ResponseWriter, r *http.Request) {
	prefix := r.URL.Query().Get("prefix")
	if err := store.ValidatePrefix(prefix); err != nil {
		s.fail(w, r, http.StatusBadRequest, "invalid_app", err)
		return
	}
	apps, err := s.releases.List(r.Context(), prefix)
	if err != nil {
		s.storeError(w, r, store.Ref{}, err)
		return
	}
	if apps == nil {
		apps = []store.Release{}
	}
	writeJSON(w, http.StatusOK, appsResponse{Apps: apps})
}

type releasesResponse struct {
	App      string          `json:"app"`
	Releases []store.Release `json:"releases"`
	// NextBefore is the before= of the next page, 0 on the last page.
	NextBefore int64 `json:"next_before"`
}

// page reads a paged route's ?limit=N&before=G, answering 400 when they
// aren't a page size and a generation.
func (s *Server) page(w http.ResponseWriter, r *http.Request) (limit, before int64, ok bool) {
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), defaultPageSize)
	if err != nil || limit < 1 || limit > maxPageSize {
		s.fail(w, r, http.StatusBadRequest, "invalid_parameter", fmt.Errorf("limit %q: want 1 to %d", q.Get("limit"), maxPageSize))
		return 0, 0, false
	}
	before, err = intParam(q.Get("before"), 0)
	if err != nil || before < 0 {
		s.fail(w, r, http.StatusBadRequest, "invalid_parameter", fmt.Errorf("before %q: want a generation", q.Get("before")))
		return 0, 0, false
	}
	return limit, before, true
}

// releasesOf answers GET /v1/apps/{app}/-/releases[?limit=N&before=G]:
// the app's history, newest first, a page at a time.
func (s *Server) releasesOf(w http.ResponseWriter, r *http.Request, app string) {
	limit, before, ok := s.page(w, r)
	if !ok {
		return
	}
	// One more than asked tells whether there is a next page.
	rels, err := s.releases.History(r.Context(), app, store.HistoryOptions{Limit: int(limit) + 1, Before: before})
	if err != nil {
		s.storeError(w, r, store.Ref{App: app}, err)
		return
	}
	resp := releasesResponse{App: app, Releases: rels}
	if len(rels) > int(limit) {
		resp.Releases = rels[:limit]
		resp.NextBefore = rels[limit-1].Generation
	}
	if resp.Releases == nil {
		resp.Releases = []store.Release{}
	}
	writeJSON(w, http.StatusOK, resp)
}

func intParam(s string, def int64) (int64, error) {
	if s == "" {
		return def, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// storeError maps a failure to a status and a stable reason, once.
func (s *Server) storeError(w http.ResponseWriter, r *http.Request, ref store.Ref, err error) {
	status, reason := classify(ref, err)
	s.fail(w, r, status, reason, err)
}

func classify(ref store.Ref, err error) (int, string) {
	var decryptErr *secrets.DecryptError
	var violation *policy.Violation
	var untrusted *UntrustedError
	switch {
	case errors.As(err, &violation):
		return http.StatusForbidden, "policy_" + violation.Reason
	case errors.As(err, &untrusted):
		return http.StatusForbidden, "untrusted_release"
	case errors.Is(err, floor.ErrRollback):
		return http.StatusForbidden, "rollback_refused"
	case errors.Is(err, floor.ErrUnavailable):
		return http.StatusServiceUnavailable, "floor_unavailable"
	case errors.Is(err, memory.ErrBusy):
		return http.StatusServiceUnavailable, "render_busy"
	case errors.Is(err, store.ErrInvalidApp):
		return http.StatusBadRequest, "invalid_app"
	case errors.Is(err, store.ErrNotFound) && ref.Generation != 0:
		return http.StatusNotFound, "generation_not_found"
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, "app_not_found"
	case errors.Is(err, store.ErrCorrupt):
		return http.StatusBadGateway, "digest_mismatch"
	case errors.As(err, &decryptErr):
		return http.StatusUnprocessableEntity, decryptErr.Reason
	case errors.Is(err, render.ErrInvalid):
		return http.StatusUnprocessableEntity, "invalid_release"
	case errors.Is(err, store.ErrBucket):
		return http.StatusServiceUnavailable, "bucket_unavailable"
	case errors.Is(err, store.ErrAccess):
		return http.StatusServiceUnavailable, "bucket_access_denied"
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "timeout"
	case isNetError(err):
		// The bucket can't be reached at all (a name that doesn't
		// resolve, a route that is gone), as /readyz says too.
		return http.StatusServiceUnavailable, "bucket_unreachable"
	}
	return http.StatusBadGateway, "bucket_error"
}

func isNetError(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr)
}
