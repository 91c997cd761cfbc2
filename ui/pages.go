package ui

import (
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/store"
)

// pageSize is the releases of one timeline page.
const pageSize = 50

// asOfPageSize is the apps of one as-of page.
const asOfPageSize = 100

var funcs = template.FuncMap{
	"time": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"short": func(s string) string {
		if len(s) > 19 {
			return s[:19] + "…"
		}
		return s
	},
	"orDash": func(s string) string { return cmp.Or(s, "-") },
	// shortSHA: a commit as a release URL and the CLI read it back, with a
	// letter among its digits.
	"shortSHA": func(sha string) string { return gitview.ShortSHA(sha, 12) },
	"seq": func(n uint64) string {
		if n == 0 {
			return "-"
		}
		return strconv.FormatUint(n, 10)
	},
	"query": func(pairs ...any) template.URL {
		v := url.Values{}
		for i := 0; i+1 < len(pairs); i += 2 {
			if s := fmt.Sprint(pairs[i+1]); s != "" && s != "0" {
				v.Set(fmt.Sprint(pairs[i]), s)
			}
		}
		return template.URL(v.Encode())
	},
	"link":      sourceLink,
	"add":       func(a, b int) int { return a + b },
	"diffLines": diffLines,
}

// sourceLink makes a release's source a link when it is one (a pipeline
// URL); anything else is text.
func sourceLink(s string) template.HTML {
	if u, err := url.Parse(s); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" {
		return template.HTML(fmt.Sprintf(`<a href="%s" rel="noopener noreferrer">%s</a>`, template.HTMLEscapeString(s), template.HTMLEscapeString(s)))
	}
	return template.HTML(template.HTMLEscapeString(cmp.Or(s, "-")))
}

// diffLine is one line of a unified diff with its class for colour.
type diffLine struct{ Class, Text string }

func diffLines(d string) []diffLine {
	var out []diffLine
	for _, l := range strings.Split(strings.TrimSuffix(d, "\n"), "\n") {
		class := ""
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			class = "file"
		case strings.HasPrefix(l, "+"):
			class = "add"
		case strings.HasPrefix(l, "-"):
			class = "del"
		case strings.HasPrefix(l, "@@"):
			class = "hunk"
		}
		out = append(out, diffLine{class, l})
	}
	return out
}

// page is what every template gets besides its own data.
type page struct {
	Title     string
	Who       string
	Permalink string
	CLI       string
	Data      any
}

func (u *UI) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	u.renderPage(w, r, status, name, page{Title: name, Who: who(r), Permalink: r.URL.RequestURI(), Data: data})
}

func (u *UI) renderPage(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	var b bytes.Buffer
	if err := u.pages[name].Execute(&b, p); err != nil {
		u.log.Error("ui: rendering a page failed", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// fail answers with an error page: what was wrong and what to do.
func (u *UI) fail(w http.ResponseWriter, r *http.Request, status int, title, message string) {
	u.renderPage(w, r, status, "error", page{Title: title, Who: who(r), Data: map[string]any{"Status": status, "Title": title, "Message": message}})
}

// storeFail maps a bucket error to an error page.
func (u *UI) storeFail(w http.ResponseWriter, r *http.Request, what string, err error) {
	switch {
	case errors.Is(err, store.ErrInvalidApp):
		u.fail(w, r, http.StatusBadRequest, "Not an app", err.Error())
	case errors.Is(err, store.ErrNotFound):
		u.fail(w, r, http.StatusNotFound, "Not found", what+": "+err.Error())
	case errors.Is(err, store.ErrCorrupt):
		u.fail(w, r, http.StatusBadGateway, "Tampered release", what+": "+err.Error())
	default:
		u.log.Warn("ui: reading the bucket failed", "what", what, "error", err)
		u.fail(w, r, http.StatusServiceUnavailable, "The bucket can't be read", what+": the bucket didn't answer; try again in a moment.")
	}
}

// appRow is one app on the apps page.
type appRow struct {
	store.Release
	Dir, Leaf string
	Status    string
}

func (u *UI) apps(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	prefix, text := strings.Trim(q.Get("prefix"), "/"), strings.ToLower(strings.TrimSpace(q.Get("q")))
	if err := store.ValidatePrefix(prefix); err != nil {
		u.fail(w, r, http.StatusBadRequest, "Bad prefix", err.Error())
		return
	}
	heads, err := u.cfg.Releases.List(r.Context(), prefix)
	if err != nil {
		u.storeFail(w, r, "the apps", err)
		return
	}
	var rows []appRow
	for _, h := range heads {
		if text != "" && !strings.Contains(strings.ToLower(h.App+" "+h.Author+" "+h.Message), text) {
			continue
		}
		row := appRow{Release: h, Leaf: h.App}
		if i := strings.LastIndex(h.App, "/"); i >= 0 {
			row.Dir, row.Leaf = h.App[:i], h.App[i+1:]
		}
		if u.cfg.Statuses != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
			if st, err := u.cfg.Statuses.Status(ctx, h.App, h.Generation); err == nil {
				row.Status = string(st.State)
			} else {
				row.Status = "unknown"
			}
			cancel()
		}
		rows = append(rows, row)
	}
	// The tree: each app under the path of its other segments.
	slices.SortFunc(rows, func(a, b appRow) int { return cmp.Or(cmp.Compare(a.Dir, b.Dir), cmp.Compare(a.Leaf, b.Leaf)) })
	type group struct {
		Name string
		Apps []appRow
	}
	var groups []group
	for _, row := range rows {
		if len(groups) == 0 || groups[len(groups)-1].Name != row.Dir {
			groups = append(groups, group{Name: row.Dir})
		}
		groups[len(groups)-1].Apps = append(groups[len(groups)-1].Apps, row)
	}
	cli := "bucketops ls"
	if prefix != "" {
		cli += " " + prefix
	}
	u.renderPage(w, r, http.StatusOK, "apps", page{Title: "Apps", Who: who(r), Permalink: r.URL.RequestURI(), CLI: cli, Data: map[string]any{
		"Prefix": prefix, "Q": q.Get("q"), "Groups": groups, "Count": len(rows), "Live": u.cfg.Statuses != nil, "Bucket": u.cfg.Location.String(),
	}})
}

// appRoute dispatches /ui/apps/{app}/-/releases[/{generation}] and
// /ui/apps/{app}/-/diff.
func (u *UI) appRoute(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), "/ui/apps/")
	app, action, found := strings.Cut(rest, "/-/")
	if !found || strings.Contains(app, "%") {
		u.fail(w, r, http.StatusNotFound, "No such page", "An app's pages are /ui/apps/APP/-/releases and /ui/apps/APP/-/diff.")
		return
	}
	if err := store.ValidateApp(app); err != nil {
		u.fail(w, r, http.StatusBadRequest, "Not an app", err.Error())
		return
	}
	switch {
	case action == "releases":
		u.timeline(w, r, app, r.URL.Query().Get("q"))
	case strings.HasPrefix(action, "releases/"):
		rev := strings.TrimPrefix(action, "releases/")
		gen, err := strconv.ParseInt(rev, 10, 64)
		if err != nil || gen <= 0 {
			if hex := strings.TrimPrefix(rev, "sha256:"); len(hex) < minSearch || strings.Trim(hex, "0123456789abcdef") != "" {
				u.fail(w, r, http.StatusBadRequest, "Not a release", fmt.Sprintf("%q is not a generation, a commit or a digest: a release is /ui/apps/%s/-/releases/GENERATION, or a commit (7 or more hex digits) as Argo CD's History shows it.", rev, app))
				return
			}
			// A commit (what Argo CD's History shows) or a digest: find it.
			u.timeline(w, r, app, rev)
			return
		}
		u.release(w, r, app, gen, rev)
	case action == "diff":
		u.diff(w, r, app)
	default:
		u.fail(w, r, http.StatusNotFound, "No such page", fmt.Sprintf("%s has no page %q: use releases or diff.", app, action))
	}
}

// timeline is an app's releases, newest first, a page at a time; with a
// query, those it names (find): one is shown at once, on its own page.
func (u *UI) timeline(w http.ResponseWriter, r *http.Request, app, q string) {
	all, err := u.histories.get(r.Context(), app)
	if err != nil {
		u.storeFail(w, r, app, err)
		return
	}
	byGen, err := u.commits.of(app, all)
	if err != nil {
		u.fail(w, r, http.StatusInternalServerError, "No commits", err.Error())
		return
	}
	rels := all
	previous := map[int64]int64{}
	for i := range all[:max(len(all)-1, 0)] {
		previous[all[i].Generation] = all[i+1].Generation
	}
	if q = strings.TrimSpace(q); q != "" {
		rels = find(q, all, byGen)
		switch {
		case len(rels) == 1:
			http.Redirect(w, r, "/ui/apps/"+app+"/-/releases/"+strconv.FormatInt(rels[0].Generation, 10), http.StatusSeeOther)
			return
		case len(rels) == 0:
			u.fail(w, r, http.StatusNotFound, "No such release", fmt.Sprintf("%s@%s not found: no release of %s has that generation, or a commit or digest that starts with it. Give a generation, or 7 or more hex digits of a commit (as Argo CD's History and bucketops log show it) or of a digest.", app, q, app))
			return
		}
	}
	pages := max(1, (len(rels)+pageSize-1)/pageSize)
	n := 1
	if p := r.URL.Query().Get("page"); p != "" {
		var err error
		if n, err = strconv.Atoi(p); err != nil || n < 1 || n > pages {
			u.fail(w, r, http.StatusNotFound, "No such page", fmt.Sprintf("%s has %d releases, %d pages of %d: page %q isn't one of them.", app, len(rels), pages, pageSize, p))
			return
		}
	}
	start := (n - 1) * pageSize
	end := min(start+pageSize, len(rels))
	type row struct {
		store.Release
		Commit   string
		Previous int64
		// SignatureStatus is judged from the listing (signatures.listed).
		SignatureStatus provenance.Status
	}
	rows := make([]row, 0, end-start)
	judge, policy := u.signatures.judge()
	for i := start; i < end; i++ {
		rw := row{Release: rels[i], Commit: byGen[rels[i].Generation], Previous: previous[rels[i].Generation]}
		rw.SignatureStatus = u.signatures.listed(judge, policy, rels[i], all)
		rows = append(rows, rw)
	}
	u.renderPage(w, r, http.StatusOK, "timeline", page{Title: app, Who: who(r), Permalink: r.URL.RequestURI(),
		CLI:  fmt.Sprintf("bucketops log %s --limit %d", app, pageSize) + cond(start > 0, fmt.Sprintf(" --before %d", rels[max(start-1, 0)].Generation)),
		Data: map[string]any{"App": app, "Rows": rows, "Page": n, "Pages": pages, "Total": len(all), "Query": q, "Matches": len(rels), "Deploys": u.deploysOf(r.Context(), app, rels[start:end])}})
}

func cond(ok bool, s string) string {
	if ok {
		return s
	}
	return ""
}

// shownObject is an object of a release as the release page shows it.
type shownObject struct {
	render.Object
	Text string
}

// admit waits for the render memory a page over releases of these sizes
// needs; false when it answered 503 instead.
func (u *UI) admit(w http.ResponseWriter, r *http.Request, sizes ...int64) (func(), bool) {
	done, err := u.cfg.Memory.Acquire(r.Context(), u.cfg.MemoryWait, sizes...)
	if err != nil {
		w.Header().Set("Retry-After", strconv.Itoa(int(max(u.cfg.MemoryWait/time.Second, 1))))
		u.fail(w, r, http.StatusServiceUnavailable, "The bridge is busy",
			"Other requests hold the memory this page needs ("+err.Error()+"). Try again in a moment.")
		return nil, false
	}
	return done, true
}

// release is the page of app's release gen, as rev named it in the URL.
// Digits that name no generation may be a commit's short SHA (Argo CD's
// History shows 7 hex digits, and 1 commit in 27 starts with 7 decimal
// ones) or a digest's prefix: they are searched as the timeline's query.
func (u *UI) release(w http.ResponseWriter, r *http.Request, app string, gen int64, rev string) {
	ref := store.Ref{App: app, Generation: gen}
	attrs, err := u.cfg.Releases.Stat(r.Context(), ref)
	if errors.Is(err, store.ErrNotFound) && len(rev) >= minSearch {
		u.timeline(w, r, app, rev)
		return
	}
	if err != nil {
		u.storeFail(w, r, ref.String(), err)
		return
	}
	done, ok := u.admit(w, r, attrs.Size)
	if !ok {
		return
	}
	defer done()
	rel, data, err := u.cfg.Releases.Read(r.Context(), ref)
	if err != nil {
		u.storeFail(w, r, ref.String(), err)
		return
	}
	var objs []shownObject
	problem := ""
	if rel.Kind != store.KindTombstone {
		parsed, err := render.Parse(data)
		if err != nil {
			problem = err.Error()
		} else {
			for _, o := range parsed.Objects {
				objs = append(objs, shownObject{Object: o, Text: string(o.Redacted())})
			}
		}
	}
	// The release before this one, for "compare with previous".
	var previous int64
	rels, histErr := u.histories.get(r.Context(), app)
	if histErr == nil {
		for i, x := range rels {
			if x.Generation == gen && i+1 < len(rels) {
				previous = rels[i+1].Generation
			}
		}
	}
	// Its signature, the bytes read above checked too, the link judged from
	// the same history.
	judge, _ := u.signatures.judge()
	sig := judge.Read(rel, rels, data)
	commit := ""
	if histErr == nil {
		if byGen, err := u.commits.of(app, rels); err == nil {
			commit = byGen[gen]
		}
	}
	if histErr != nil && judge.Checks() {
		sig = provenance.Status{State: provenance.StateNotChecked, Detail: "the app's history could not be read: try again in a moment"}
	}
	u.renderPage(w, r, http.StatusOK, "release", page{Title: ref.String(), Who: who(r), Permalink: r.URL.RequestURI(),
		CLI:  "bucketops show " + ref.String(),
		Data: map[string]any{"Release": rel, "Objects": objs, "Problem": problem, "Previous": previous, "Signature": sig, "Commit": commit, "Deploys": u.deploysOf(r.Context(), app, []store.Release{rel})}})
}

func (u *UI) diff(w http.ResponseWriter, r *http.Request, app string) {
	q := r.URL.Query()
	var refs [2]store.Ref
	for i, name := range []string{"from", "to"} {
		g, err := strconv.ParseInt(q.Get(name), 10, 64)
		if err != nil || g <= 0 {
			u.fail(w, r, http.StatusBadRequest, "Not a release", fmt.Sprintf("%s=%q: compare two generations of %s, ?from=G1&to=G2, as its timeline shows them.", name, q.Get(name), app))
			return
		}
		refs[i] = store.Ref{App: app, Generation: g}
	}
	cli := fmt.Sprintf("bucketops diff %s %s", refs[0], refs[1])
	var sizes [2]int64
	for i, ref := range refs {
		attrs, err := u.cfg.Releases.Stat(r.Context(), ref)
		if err != nil {
			u.storeFail(w, r, ref.String(), err)
			return
		}
		if attrs.Size > MaxDiffBytes {
			u.renderPage(w, r, http.StatusRequestEntityTooLarge, "error", page{Title: "Release too large to diff here", Who: who(r), CLI: cli,
				Data: map[string]any{"Status": http.StatusRequestEntityTooLarge, "Title": "Release too large to diff here",
					"Message": fmt.Sprintf("%s is %.1f MiB; these pages diff releases of up to %d MiB. Run %s instead: it compares them object by object on your machine.", ref, float64(attrs.Size)/(1<<20), MaxDiffBytes>>20, cli)}})
			return
		}
		sizes[i] = attrs.Size
	}
	done, ok := u.admit(w, r, sizes[:]...)
	if !ok {
		return
	}
	defer done()
	var objs [2][]render.Object
	var rels [2]store.Release
	for i, ref := range refs {
		rel, data, err := u.cfg.Releases.Read(r.Context(), ref)
		if err != nil {
			u.storeFail(w, r, ref.String(), err)
			return
		}
		rels[i] = rel
		if rel.Kind == store.KindTombstone {
			continue
		}
		parsed, err := render.Parse(data)
		if err != nil {
			u.fail(w, r, http.StatusUnprocessableEntity, "Invalid release", ref.String()+": "+err.Error())
			return
		}
		objs[i] = parsed.Objects
	}
	changes, unchanged := render.DiffObjects(refs[0].String(), objs[0], refs[1].String(), objs[1], render.Object.Redacted)
	count := map[string]int{}
	for _, c := range changes {
		count[c.Change]++
	}
	u.renderPage(w, r, http.StatusOK, "diff", page{Title: "Diff of " + app, Who: who(r), Permalink: r.URL.RequestURI(),
		CLI: cli,
		Data: map[string]any{"App": app, "From": rels[0], "To": rels[1], "Changes": changes, "Unchanged": unchanged,
			"Added": count[render.Added], "Removed": count[render.Removed], "Changed": count[render.Changed]}})
}

// parseTime reads a time as people type it: RFC 3339, or a UTC date and
// time without zone, or a date (its start, UTC).
func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, strings.TrimSpace(s)); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: write 2026-12-04T10:00:00Z, 2026-12-04T10:00 (UTC) or 2026-12-04", s)
}

// asOfRow is an app and what was its head at a time (nil: none yet).
type asOfRow struct {
	App     string
	Release *store.Release
}

func (u *UI) asOf(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	prefix := strings.Trim(q.Get("prefix"), "/")
	if err := store.ValidatePrefix(prefix); err != nil {
		u.fail(w, r, http.StatusBadRequest, "Bad prefix", err.Error())
		return
	}
	data := map[string]any{"Prefix": prefix, "T": q.Get("t")}
	if q.Get("t") == "" {
		u.renderPage(w, r, http.StatusOK, "asof", page{Title: "As of", Who: who(r), Permalink: r.URL.RequestURI(), Data: data})
		return
	}
	t, err := parseTime(q.Get("t"))
	if err != nil {
		u.fail(w, r, http.StatusBadRequest, "Bad time", err.Error())
		return
	}
	from := q.Get("from")
	if from != "" {
		if err := store.ValidateApp(from); err != nil {
			u.fail(w, r, http.StatusBadRequest, "Bad page", "from: "+err.Error())
			return
		}
	}
	// A page of apps at a time: its heads in one request, and the
	// histories the cache misses in one listing of their versions.
	heads, next, err := u.cfg.Releases.ListPage(r.Context(), prefix, store.ListOptions{From: from, Limit: asOfPageSize})
	if err != nil {
		u.storeFail(w, r, "the apps", err)
		return
	}
	var rows []asOfRow
	err = u.histories.each(r.Context(), prefix, heads, next, func(head store.Release, rels []store.Release) {
		row := asOfRow{App: head.App}
		if rel, ok := store.HeadAt(rels, t); ok {
			row.Release = &rel
		}
		rows = append(rows, row)
	})
	if err != nil {
		u.storeFail(w, r, "the apps' histories", err)
		return
	}
	data["From"], data["Next"], data["PageSize"] = from, next, asOfPageSize
	data["Time"], data["Rows"] = t, rows
	// And what each Argo CD Application had deployed at t, by its history.
	apps := make([]string, len(rows))
	for i, row := range rows {
		apps[i] = row.App
	}
	data["Live"] = u.liveAt(r.Context(), apps, t)
	cli := "bucketops log APP --as-of " + t.Format(time.RFC3339) + "  # for each app"
	u.renderPage(w, r, http.StatusOK, "asof", page{Title: "As of " + t.Format(time.RFC3339), Who: who(r), Permalink: r.URL.RequestURI(), CLI: cli, Data: data})
}

func (u *UI) activity(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	prefix := strings.Trim(q.Get("prefix"), "/")
	if err := store.ValidatePrefix(prefix); err != nil {
		u.fail(w, r, http.StatusBadRequest, "Bad prefix", err.Error())
		return
	}
	to := u.now().UTC()
	from := to.Add(-7 * 24 * time.Hour)
	for name, dst := range map[string]*time.Time{"from": &from, "to": &to} {
		if s := q.Get(name); s != "" {
			t, err := parseTime(s)
			if err != nil {
				u.fail(w, r, http.StatusBadRequest, "Bad time", name+": "+err.Error())
				return
			}
			*dst = t
		}
	}
	if !from.Before(to) {
		u.fail(w, r, http.StatusBadRequest, "Bad window", fmt.Sprintf("from %s is not before to %s.", from.Format(time.RFC3339), to.Format(time.RFC3339)))
		return
	}
	format := q.Get("format")
	if format != "" && format != "csv" && format != "json" {
		u.fail(w, r, http.StatusBadRequest, "Bad format", fmt.Sprintf("format %q: use csv or json, or none for the page.", format))
		return
	}
	author := strings.ToLower(strings.TrimSpace(q.Get("author")))
	heads, err := u.cfg.Releases.List(r.Context(), prefix)
	if err != nil {
		u.storeFail(w, r, "the apps", err)
		return
	}
	// Every app's history, the cached ones from memory, the others from
	// one listing of the bucket's versions; only the newest MaxActivity
	// publishes of the window are held.
	window := &newestPublishes{limit: u.cfg.MaxActivity}
	// Each publish's signature is judged while its app's history is at
	// hand, if the window keeps it, and forgotten with it.
	judge, policy := u.signatures.judge()
	sigs := map[store.Ref]provenance.Status{}
	err = u.histories.each(r.Context(), prefix, heads, "", func(_ store.Release, rels []store.Release) {
		for _, rel := range rels {
			if rel.Time.Before(from) || !rel.Time.Before(to) || (author != "" && !strings.Contains(strings.ToLower(rel.Author), author)) {
				continue
			}
			if window.admits(rel) {
				if dropped, ok := window.full(); ok {
					delete(sigs, dropped.Ref())
				}
				sigs[rel.Ref()] = u.signatures.listed(judge, policy, rel, rels)
			}
			window.add(rel)
		}
	})
	if err != nil {
		u.storeFail(w, r, "the apps' histories", err)
		return
	}
	rows, truncated := window.sorted(), window.seen > u.cfg.MaxActivity
	name := fmt.Sprintf("bucketops-activity-%s-%s", from.Format("20060102T150405Z"), to.Format("20060102T150405Z"))
	if truncated && format != "" {
		// A file has no room to say it is partial without breaking its
		// readers: the answer's header says it, for the CLI to repeat.
		w.Header().Set(TruncatedHeader, fmt.Sprintf("%d of %d", len(rows), window.seen))
	}
	switch format {
	case "csv":
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.csv"`)
		cw := csv.NewWriter(w)
		cw.Write(append([]string{"time", "app", "generation", "kind", "sequence", "author", "source", "origin", "digest", "message"}, signatureColumns...))
		for _, rel := range rows {
			cw.Write(spreadsheetCells(append([]string{rel.Time.UTC().Format(time.RFC3339Nano), rel.App, strconv.FormatInt(rel.Generation, 10), rel.Kind,
				strconv.FormatUint(rel.Sequence, 10), rel.Author, rel.Source, rel.Origin, rel.Digest, rel.Message}, signatureCells(sigs[rel.Ref()])...)...))
		}
		cw.Flush()
		return
	case "json":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.json"`)
		out := make([]judgedRelease, len(rows))
		for i, rel := range rows {
			out[i] = judgedRelease{Release: rel, SignatureStatus: sigs[rel.Ref()]}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(map[string]any{"from": from, "to": to, "prefix": prefix, "author": q.Get("author"), "truncated": truncated, "releases": out})
		return
	}
	u.renderPage(w, r, http.StatusOK, "activity", page{Title: "Activity", Who: who(r), Permalink: r.URL.RequestURI(),
		CLI: "bucketops log APP  # one app's releases; the activity page spans every app",
		Data: map[string]any{"Rows": rows, "From": from.Format(time.RFC3339), "To": to.Format(time.RFC3339), "Prefix": prefix,
			"Author": q.Get("author"), "Truncated": truncated, "Max": u.cfg.MaxActivity}})
}
