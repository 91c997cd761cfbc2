// Package appset gives fleets of apps to Argo CD's ApplicationSet
// controller: a plugin generator that lists the bucket's live apps, and a
// refresher that makes the controller run it again when the fleet changes.
//
// # The generator's contract
//
// Argo CD's plugin generator POSTs {"applicationSetName": S, "input":
// {"parameters": P}} to /api/v1/getparams.execute, with the bearer token of
// the bridge's generator role. P holds:
//
//   - prefix (string, required): the apps under this path ("prod", or ""
//     for every app of the bucket);
//   - selector (string, optional): a Kubernetes label selector
//     ("team=payments,tier in (gold,silver)") over the labels each app's
//     head release was published with (bucketops push --label).
//
// Any other parameter, or one that isn't a string, is refused (400): a
// typo must not silently widen or narrow a fleet. The answer is
// {"output": {"parameters": [E, ...]}}, one E per app under prefix whose
// head is a release (a retired app's head is a tombstone: it is left out,
// so the ApplicationSet deletes its Application) and whose labels match,
// sorted by app. Each E holds:
//
//   - app: the app's path, prod/payments;
//   - name: an Application name derived from app by Name (stable, unique,
//     valid as a Kubernetes name and label value);
//   - repoURL, targetRevision ("main") and path ("."): the Application's
//     source, the bridge's git view of the app, following its newest
//     release; the plugin is "bucketops";
//   - generation: the head's generation, as a string (it exceeds what a
//     JSON number holds exactly);
//   - labels: the head's labels, an object (empty when it has none);
//     flattened to labels.KEY in an ApplicationSet without goTemplate.
//
// A bucket error is a 502 and no output at all: the controller then keeps
// the Applications it has rather than deleting those it no longer sees.
package appset

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/bucketops/bucketops/store"
)

// Path is where Argo CD's plugin generator calls, under the ConfigMap's
// baseUrl.
const Path = "/api/v1/getparams.execute"

// Lister lists the head release of every app under a prefix (store.Store).
type Lister interface {
	List(ctx context.Context, prefix string) ([]store.Release, error)
}

// Config is what the generator needs.
type Config struct {
	Releases Lister
	// GitURL is the base of each app's git view, as the repo-server
	// reaches it: the entry's repoURL is GitURL/APP.git. Empty means the
	// scheme and host the generator was called at, + "/git": the
	// controller and the repo-server reach the bridge alike in-cluster.
	GitURL string
	Logger *slog.Logger
}

// Generator answers Argo CD's plugin generator.
type Generator struct {
	cfg Config
}

// New returns a Generator for cfg.
func New(cfg Config) (*Generator, error) {
	if cfg.Releases == nil {
		return nil, errors.New("appset: no releases")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.GitURL = strings.TrimSuffix(cfg.GitURL, "/")
	return &Generator{cfg: cfg}, nil
}

// Request is the plugin generator's request body.
type Request struct {
	ApplicationSetName string `json:"applicationSetName"`
	Input              struct {
		Parameters map[string]json.RawMessage `json:"parameters"`
	} `json:"input"`
}

// Response is the plugin generator's answer.
type Response struct {
	Output struct {
		Parameters []Entry `json:"parameters"`
	} `json:"output"`
}

// Entry is one app's parameters for the ApplicationSet template.
type Entry struct {
	App            string            `json:"app"`
	Name           string            `json:"name"`
	RepoURL        string            `json:"repoURL"`
	TargetRevision string            `json:"targetRevision"`
	Path           string            `json:"path"`
	Generation     string            `json:"generation"`
	Labels         map[string]string `json:"labels"`
}

// Query is a generator request's parameters, checked.
type Query struct {
	Prefix   string
	Selector labels.Selector
}

// ParseParameters checks a request's parameters.
func ParseParameters(params map[string]json.RawMessage) (Query, error) {
	q := Query{Selector: labels.Everything()}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if k != "prefix" && k != "selector" {
			return Query{}, fmt.Errorf("unknown parameter %q: the bucketops generator takes prefix and selector", k)
		}
	}
	str := func(k string) (string, bool, error) {
		raw, ok := params[k]
		if !ok {
			return "", false, nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", true, fmt.Errorf("parameter %s is %s, want a string", k, truncate(string(raw)))
		}
		return s, true, nil
	}
	prefix, ok, err := str("prefix")
	switch {
	case err != nil:
		return Query{}, err
	case !ok:
		return Query{}, errors.New(`parameter prefix is missing: name the apps' path ("prod"), or "" for every app of the bucket`)
	}
	if err := store.ValidatePrefix(prefix); err != nil {
		return Query{}, fmt.Errorf("parameter prefix: %w", err)
	}
	q.Prefix = strings.Trim(prefix, "/")
	sel, _, err := str("selector")
	if err != nil {
		return Query{}, err
	}
	if sel != "" {
		if q.Selector, err = labels.Parse(sel); err != nil {
			return Query{}, fmt.Errorf("parameter selector %q: %w", truncate(sel), err)
		}
	}
	return q, nil
}

// maxRequestBytes bounds a request: its parameters are two short strings.
const maxRequestBytes = 64 << 10

func (g *Generator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Errorf("%s is not allowed on %s: the plugin generator POSTs", r.Method, r.URL.Path))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBytes+1))
	if err != nil {
		fail(w, http.StatusBadRequest, "invalid_request", fmt.Errorf("read the request: %w", err))
		return
	}
	if len(body) > maxRequestBytes {
		fail(w, http.StatusRequestEntityTooLarge, "invalid_request", fmt.Errorf("the request is over %d bytes", maxRequestBytes))
		return
	}
	var req Request
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, "invalid_request", fmt.Errorf(`the body is not a plugin generator request {"applicationSetName", "input": {"parameters": {...}}}: %w`, err))
		return
	}
	q, err := ParseParameters(req.Input.Parameters)
	if err != nil {
		fail(w, http.StatusBadRequest, "invalid_parameter", fmt.Errorf("ApplicationSet %q: %w", req.ApplicationSetName, err))
		return
	}
	entries, err := g.Generate(r.Context(), q, g.gitURL(r))
	if err != nil {
		g.cfg.Logger.Error("generator: list apps", "applicationset", req.ApplicationSetName, "prefix", q.Prefix, "error", err)
		fail(w, http.StatusBadGateway, "bucket_unavailable", fmt.Errorf("list the apps under %q: %w", q.Prefix, err))
		return
	}
	g.cfg.Logger.Debug("generator", "applicationset", req.ApplicationSetName, "prefix", q.Prefix, "selector", q.Selector.String(), "apps", len(entries))
	var resp Response
	resp.Output.Parameters = entries
	writeJSON(w, http.StatusOK, resp)
}

// Generate lists the live apps q selects, with gitURL as their git view's
// base.
func (g *Generator) Generate(ctx context.Context, q Query, gitURL string) ([]Entry, error) {
	heads, err := g.cfg.Releases.List(ctx, q.Prefix)
	if err != nil {
		return nil, err
	}
	entries := []Entry{}
	for _, h := range heads {
		if h.Kind == store.KindTombstone || !q.Selector.Matches(labels.Set(h.Labels)) {
			continue
		}
		l := h.Labels
		if l == nil {
			l = map[string]string{}
		}
		entries = append(entries, Entry{
			App:            h.App,
			Name:           Name(h.App),
			RepoURL:        gitURL + "/" + h.App + ".git",
			TargetRevision: "main",
			Path:           ".",
			Generation:     strconv.FormatInt(h.Generation, 10),
			Labels:         l,
		})
	}
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.App, b.App) })
	return entries, nil
}

func (g *Generator) gitURL(r *http.Request) string {
	if g.cfg.GitURL != "" {
		return g.cfg.GitURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/git"
}

// maxNameBytes is what a Kubernetes label value holds; Argo CD puts an
// Application's name in its resources' tracking label.
const maxNameBytes = 63

// Name derives an Application name from an app path: the path with '/',
// '.' and '_' turned into '-', cut to 54 bytes (at no trailing '-'), then
// '-' and the first 8 hex digits of the path's SHA-256. prod/payments is
// prod-payments-<hash>. The hash keeps names unique where the rest would
// collide (prod/a_b and prod/a.b, prod-a/b and prod/a-b, long paths) and
// is stable: the same app always gets the same name. The result is at most
// 63 bytes of [a-z0-9-], starting and ending with an alphanumeric: a valid
// DNS-1123 label, so valid as a name, a label value and a namespace.
func Name(app string) string {
	sum := sha256.Sum256([]byte(app))
	suffix := "-" + hex.EncodeToString(sum[:4])
	slug := strings.Map(func(r rune) rune {
		switch r {
		case '/', '.', '_':
			return '-'
		}
		return r
	}, app)
	if n := maxNameBytes - len(suffix); len(slug) > n {
		slug = slug[:n]
	}
	return strings.TrimRight(slug, "-") + suffix
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

type errorBody struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

// fail answers an error in the bridge's error shape; Argo CD shows its
// "error" field in the ApplicationSet's conditions.
func fail(w http.ResponseWriter, status int, reason string, err error) {
	writeJSON(w, status, errorBody{Error: err.Error(), Reason: reason})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
