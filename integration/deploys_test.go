//go:build e2e

package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDeploys runs issue 26's scenario: after three releases and a
// rollback in Argo CD, the bridge's record of deploys (bucketops log
// --deploys) is Argo CD's own history, entry for entry.
func TestDeploys(t *testing.T) {
	const app, ns, name = "prod/deploys", "deploys", "deploys"
	createApplication(t, name, app, ns)
	for i := 1; i <= 3; i++ {
		if out, code := push(t, app, release(t, ns, fmt.Sprintf("d%d", i), ""), "--sequence", strconv.Itoa(i)); code != 0 {
			t.Fatalf("release %d: exit %d:\n%s", i, code, out)
		}
	}
	generationOf := map[string]int64{}
	out, errOut, code := st.bucketops("", "log", app, "-o", "json")
	if code != 0 {
		t.Fatalf("log: %s%s", out, errOut)
	}
	var releases []releaseLog
	if err := json.Unmarshal([]byte(out), &releases); err != nil || len(releases) != 3 {
		t.Fatalf("log: %v %s", err, out)
	}
	for _, r := range releases {
		generationOf[r.Commit] = r.Generation
	}
	first := releases[2] // newest first
	history := func() []argoDeploy {
		t.Helper()
		var a struct {
			Status struct {
				History []argoDeploy `json:"history"`
			} `json:"status"`
		}
		if err := st.kube.get("/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/"+name, &a); err != nil {
			t.Fatal(err)
		}
		return a.Status.History
	}
	eventually(t, "the three releases in Argo CD's History", 30*time.Second, func() (bool, string) {
		seen := map[string]bool{}
		for _, h := range history() {
			if generationOf[h.Revision] != 0 {
				seen[h.Revision] = true
			}
		}
		return len(seen) == 3, fmt.Sprintf("history %+v", history())
	})
	// Argo CD's rollback to the first release's History entry: one more
	// deploy, of the first release.
	before := history()
	var id int64
	for _, h := range before {
		if h.Revision == first.Commit {
			id = h.ID
			break
		}
	}
	if err := st.argoREST(http.MethodPost, "/api/v1/applications/"+name+"/rollback", map[string]any{"id": id}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first release's value after the rollback", 60*time.Second, hasValue(t, ns, "d1"))
	eventually(t, "the rollback in Argo CD's History", 30*time.Second, func() (bool, string) {
		h := history()
		return len(h) == len(before)+1 && h[len(h)-1].Revision == first.Commit, fmt.Sprintf("history %+v", h)
	})
	want := history()
	// The bridge hears of the rollback through its watch of Applications.
	var rec deploysRecord
	eventually(t, "the bridge's record of every deploy", 30*time.Second, func() (bool, string) {
		out, errOut, code := st.bucketops("", "log", app, "--deploys", "-o", "json")
		if code != 0 {
			return false, out + errOut
		}
		rec = deploysRecord{}
		if err := json.Unmarshal([]byte(out), &rec); err != nil {
			return false, err.Error()
		}
		return len(rec.Applications) == 1 && len(rec.Applications[0].Deploys) == len(want), out
	})
	got := rec.Applications[0].Deploys
	for i, h := range want {
		deployed, _ := time.Parse(time.RFC3339, h.DeployedAt)
		g := got[i]
		if g.HistoryID != h.ID || g.Revision != h.Revision || g.Generation != generationOf[h.Revision] || !g.DeployedAt.Equal(deployed) {
			t.Errorf("deploy %d: the bridge says %+v, Argo CD's History %+v (generation %d)", i, g, h, generationOf[h.Revision])
		}
		if last := i == len(want)-1; last != (g.Until == nil) || !last && !g.Until.Equal(got[i+1].DeployedAt) {
			t.Errorf("deploy %d live until %v, want the next deploy's time, or now for the last", i, g.Until)
		}
	}
	// Per release, newest first: the third live until the rollback, the
	// first live twice, the second time until now.
	lines := map[int64][]string{}
	for _, r := range rec.Releases {
		lines[r.Generation] = r.Summary
	}
	g1, g3 := first.Generation, releases[0].Generation
	if s := lines[g1]; len(s) < 2 || !strings.HasPrefix(s[0], "live on "+name+" from ") || !strings.HasPrefix(s[len(s)-1], "live on "+name+" since ") {
		t.Errorf("the first release: %q, want live twice, the second time until now", s)
	}
	if s := lines[g3]; len(s) == 0 || !strings.HasPrefix(s[0], "live on "+name+" from ") || strings.Contains(strings.Join(s, "\n"), " since ") {
		t.Errorf("the third release: %q, want live until the rollback", s)
	}
	out, errOut, code = st.bucketops("", "log", app, "--deploys")
	if code != 0 || !strings.Contains(out, "live on "+name+" since ") {
		t.Errorf("log --deploys: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("bucketops log %s --deploys:\n%s", app, out)

	// A release Argo CD can't generate (its bytes tampered with behind
	// bucketops' back) is reported refused, with Argo CD's message, and
	// the record of deploys is unchanged.
	out, errOut, code = st.bucketops("", "show", app, "--raw")
	if code != 0 {
		t.Fatalf("show: %s%s", out, errOut)
	}
	if err := tamper(st, app, strings.Replace(out, `"d3"`, `"evil"`, 1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the tampered release refused in the bridge's record", 90*time.Second, func() (bool, string) {
		out, errOut, code := st.bucketops("", "log", app, "--deploys", "--limit", "1", "-o", "json")
		if code != 0 {
			return false, out + errOut
		}
		var r struct {
			Releases []struct {
				Verdict string   `json:"verdict"`
				Summary []string `json:"summary"`
			} `json:"releases"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Releases) != 1 {
			return false, out
		}
		s := r.Releases[0]
		return s.Verdict == "refused" && len(s.Summary) == 1 && strings.HasPrefix(s.Summary[0], "refused by Argo CD on "+name+": ") && strings.Contains(s.Summary[0], "digest"), out
	})
	if h := history(); len(h) != len(want) {
		t.Errorf("Argo CD's History has %d entries after the refused release, want %d", len(h), len(want))
	}
}

// argoDeploy is an entry of an Application's status.history as the
// Kubernetes API holds it.
type argoDeploy struct {
	ID         int64  `json:"id"`
	Revision   string `json:"revision"`
	DeployedAt string `json:"deployedAt"`
}

// deploysRecord is the part of bucketops log --deploys -o json the
// scenario reads.
type deploysRecord struct {
	Applications []struct {
		Name    string `json:"name"`
		Deploys []struct {
			Generation int64      `json:"generation"`
			Revision   string     `json:"revision"`
			HistoryID  int64      `json:"history_id"`
			DeployedAt time.Time  `json:"deployed_at"`
			Until      *time.Time `json:"until"`
		} `json:"deploys"`
	} `json:"applications"`
	Releases []struct {
		Generation int64    `json:"generation"`
		Summary    []string `json:"summary"`
	} `json:"releases"`
}
