package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bucketops/bucketops/store"
)

// deploysPage is a page of the bridge's GET /v1/apps/{app}/-/deploys: Argo
// CD's record of the app, and releases judged by it (package deploy's
// Deploys and ReleaseDeploys; the CLI links no Argo CD code).
type deploysPage struct {
	App          string            `json:"app"`
	At           time.Time         `json:"at"`
	Applications []json.RawMessage `json:"applications"`
	Releases     []releaseDeploys  `json:"releases"`
	NextBefore   int64             `json:"next_before"`
}

// releaseDeploys is one release's record: the fields log shows, the rest
// kept for -o json.
type releaseDeploys struct {
	Generation int64     `json:"generation"`
	Published  time.Time `json:"published"`
	Verdict    string    `json:"verdict"`
	Summary    []string  `json:"summary"`
	raw        json.RawMessage
}

func (r *releaseDeploys) UnmarshalJSON(b []byte) error {
	type plain releaseDeploys
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	r.raw = append(json.RawMessage(nil), b...)
	return nil
}

func (r releaseDeploys) MarshalJSON() ([]byte, error) { return r.raw, nil }

// applicationRecord is the part of an Application's record log's header
// shows.
type applicationRecord struct {
	Name         string `json:"name"`
	Namespace    string `json:"namespace"`
	Deploys      []any  `json:"deploys"`
	HistoryLimit int    `json:"history_limit"`
	HistoryFull  bool   `json:"history_full"`
}

// logDeploys is log --deploys: per release, newest first, where and when
// Argo CD ran it, from the bridge, which reads Argo CD's own record. Pages
// of the bridge's answer are followed up to limit releases (0: all).
func (e *env) logDeploys(ctx context.Context, app string, limit int, before int64) error {
	base, token, err := e.bridge("reader")
	if err != nil {
		return err
	}
	var all deploysPage
	for first := true; first || before != 0; first = false {
		n := 1000
		if limit > 0 {
			n = min(n, limit-len(all.Releases))
		}
		page, err := getDeploys(ctx, base, token, app, n, before)
		if err != nil {
			return fmt.Errorf("%s: %w", app, err)
		}
		if first {
			all = page
		} else {
			all.Releases = append(all.Releases, page.Releases...)
		}
		before = page.NextBefore
		if limit > 0 && len(all.Releases) >= limit {
			break
		}
	}
	all.NextBefore = 0
	if e.json() {
		return e.printJSON(all)
	}
	var apps []string
	for _, raw := range all.Applications {
		var a applicationRecord
		if json.Unmarshal(raw, &a) == nil {
			apps = append(apps, fmt.Sprintf("%s/%s (%d of its last %d deploys kept)", a.Namespace, a.Name, len(a.Deploys), a.HistoryLimit))
		}
	}
	if len(apps) == 0 {
		fmt.Fprintf(e.stdout, "No Argo CD Application deploys %s (Argo CD's record as of %s).\n", app, formatTime(all.At))
	} else {
		fmt.Fprintf(e.stdout, "Argo CD's record as of %s: %s.\n", formatTime(all.At), strings.Join(apps, ", "))
	}
	tw := e.table()
	fmt.Fprintln(tw, "GENERATION\tPUBLISHED\tDEPLOYS")
	for _, r := range all.Releases {
		lines := r.Summary
		if len(lines) == 0 {
			lines = []string{"-"}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\n", r.Generation, formatTime(r.Published), lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(tw, "\t\t%s\n", l)
		}
	}
	return tw.Flush()
}

// getDeploys asks the bridge for a page of app's deploys.
func getDeploys(ctx context.Context, base, token, app string, limit int, before int64) (deploysPage, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if before != 0 {
		q.Set("before", strconv.FormatInt(before, 10))
	}
	_, body, err := getBridge(ctx, base+"/v1/apps/"+app+"/-/deploys?"+q.Encode(), token, nil, 64<<20)
	var refused *bridgeError
	if errors.As(err, &refused) && refused.status == http.StatusNotFound && refused.reason == "app_not_found" {
		return deploysPage{}, fmt.Errorf("%w: %s", store.ErrNotFound, refused.message)
	}
	if err != nil {
		return deploysPage{}, err
	}
	var page deploysPage
	if err := json.Unmarshal(body, &page); err != nil {
		return deploysPage{}, fmt.Errorf("the bridge's deploys answer isn't JSON: %w", err)
	}
	return page, nil
}
