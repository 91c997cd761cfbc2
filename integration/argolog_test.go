package integration

import "testing"

func TestArgoCDLogLines(t *testing.T) {
	const (
		v36Reconcile    = `{"app-namespace":"argocd","application":"bench-app-007-1a2b3c4d","comparison-level":3,"dest-server":"https://kubernetes.default.svc","level":"info","msg":"Reconciliation completed","project":"default","time":"2026-12-05T10:00:00Z","time_ms":112}`
		v214Reconcile   = `time="2026-12-05T10:00:00Z" level=info msg="Reconciliation completed" application=argocd/bench-git-app-007 dest-namespace=bench-git dest-server="https://kubernetes.default.svc" fields.level=2 time_ms=95`
		v36Refreshing   = `{"application":"bench-app-007-1a2b3c4d","level":"info","msg":"Refreshing app status (controller refresh requested), level (2)","time":"2026-12-05T10:00:00Z"}`
		v36AppSetEnd    = `{"applicationset":{"Namespace":"argocd","Name":"bench-bucketops"},"level":"info","msg":"end reconcile in 842.1ms","requeueAfter":0,"time":"2026-12-05T10:00:00Z"}`
		v214AppSetEnd   = `time="2026-12-05T10:00:00Z" level=info msg="end reconcile in 1.2s" applicationset=argocd/bench-git requeueAfter=3m0s`
		v36Requeue      = `{"level":"debug","msg":"requeue caused by application bench-app-007-1a2b3c4d","requeue":true,"time":"2026-12-05T10:00:00Z"}`
		v214RequeueText = `time="2026-12-05T10:00:00Z" level=debug msg="requeue caused by application bench-git-paths-app-007" requeue=true`
	)
	for _, tc := range []struct {
		name  string
		match func(line, arg string) bool
		line  string
		arg   string
		want  bool
	}{
		{"3.6: a reconciliation of the feed's Application", isReconcile, v36Reconcile, "bench-app-", true},
		{"3.6: a reconciliation of another feed's Application", isReconcile, v36Reconcile, "bench-git-app-", false},
		{"2.14: a reconciliation in text, namespace-qualified", isReconcile, v214Reconcile, "bench-git-app-", true},
		{"the start of a refresh is no reconciliation", isReconcile, v36Refreshing, "bench-app-", false},
		{"a line cut in the middle is nothing", isReconcile, v36Reconcile[:70], "bench-app-", false},
		{"3.6: the end of the feed's ApplicationSet's reconciliation", isAppSetReconcile, v36AppSetEnd, "bench-bucketops", true},
		{"3.6: another ApplicationSet's", isAppSetReconcile, v36AppSetEnd, "bench-git", false},
		{"2.14: in text", isAppSetReconcile, v214AppSetEnd, "bench-git", true},
		{"3.6: a requeue caused by the feed's Application", isAppSetRequeue, v36Requeue, "bench-app-", true},
		{"3.6: by another feed's", isAppSetRequeue, v36Requeue, "bench-git-app-", false},
		{"2.14: in text", isAppSetRequeue, v214RequeueText, "bench-git-paths-app-", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.match(tc.line, tc.arg); got != tc.want {
				t.Errorf("%q with %q: %v, want %v", tc.line, tc.arg, got, tc.want)
			}
		})
	}
}

// TestWebhookLog: the teardown of a git feed waits until argocd-server's
// log shows every webhook taken up, no handler running and every refresh
// they queued for the feed's Applications done or failed, as v3.6's
// util/webhook logs them: a refresh done is two lines.
func TestWebhookLog(t *testing.T) {
	lines := []string{
		`{"level":"info","msg":"Webhook handler started","time":"2026-12-07T10:00:00Z"}`,
		`{"level":"info","msg":"Received push event repo: http://127.0.0.1:4000/bench-git, revision: main, touchedHead: true","time":"2026-12-07T10:00:00Z"}`,
		`{"app-namespace":"argocd","app-qualified-name":"argocd/bench-git-app-000","application":"bench-git-app-000","level":"info","msg":"refreshing app from webhook","project":"default","time":"2026-12-07T10:00:00Z"}`,
		`{"app-namespace":"argocd","app-qualified-name":"argocd/bench-git-app-001","application":"bench-git-app-001","level":"info","msg":"refreshing app from webhook","project":"default","time":"2026-12-07T10:00:00Z"}`,
		`{"app-namespace":"argocd","application":"bench-app-001","level":"info","msg":"refreshing app from webhook","project":"default","time":"2026-12-07T10:00:00Z"}`,
		`{"level":"info","msg":"Webhook handler completed in 12ms","time":"2026-12-07T10:00:00Z"}`,
		`{"level":"info","msg":"Requested app 'bench-git-app-000' refresh","time":"2026-12-07T10:00:01Z"}`,
		`{"level":"info","msg":"Requested app 'bench-git-app-000' refresh","time":"2026-12-07T10:00:01Z"}`,
		`{"level":"warning","msg":"Failed to refresh app 'bench-git-app-001' for controller reprocessing: applications.argoproj.io \"bench-git-app-001\" not found","time":"2026-12-07T10:00:02Z"}`,
	}
	var w webhookLog
	for i, line := range lines {
		w.add(line, "bench-git-app-")
		// Until the last line a refresh of the feed is queued, or the
		// handler runs.
		if last := i == len(lines)-1; w.done(1) != last {
			t.Errorf("after line %d (%+v): done %v, want %v", i, w, !last, last)
		}
	}
	if want := (webhookLog{Received: 1, Started: 1, Completed: 1, Queued: 2, Requested: 2, Failed: 1}); w != want {
		t.Errorf("counted %+v, want %+v", w, want)
	}
	if w.done(2) {
		t.Error("done with one of two webhooks posted taken up")
	}
	// With manifest-generate-paths, v3.6 moves the cached manifests of
	// the apps a push didn't touch, or says why it couldn't.
	var moves webhookLog
	for _, line := range []string{
		`{"app-namespace":"argocd","application":"bench-git-paths-app-002","level":"info","msg":"manifests cache moved","new_cacheKey":"b","old_cacheKey":"a","time":"2026-12-07T10:00:00Z"}`,
		`{"app-namespace":"argocd","application":"bench-git-paths-app-003","level":"info","msg":"manifest cache miss while moving manifests cache to the new revision","new_cacheKey":"b","old_cacheKey":"a","time":"2026-12-07T10:00:00Z"}`,
		`{"app-namespace":"argocd","application":"bench-git-paths-app-004","level":"warning","msg":"Failed to store cached manifests of previous revision: error getting cluster info: cache: key is missing","time":"2026-12-07T10:00:00Z"}`,
		`{"app-namespace":"argocd","application":"bench-app-004","level":"info","msg":"manifests cache moved","time":"2026-12-07T10:00:00Z"}`,
	} {
		moves.add(line, "bench-git-paths-app-")
	}
	if want := (webhookLog{Moved: 1, Missed: 2}); moves != want {
		t.Errorf("cache moves counted %+v, want %+v", moves, want)
	}
	// v2.14 logs only that it took the push up.
	var old webhookLog
	old.add(`time="2026-12-07T10:00:00Z" level=info msg="Received push event repo: http://127.0.0.1:4000/bench-git, revision: main, touchedHead: true"`, "bench-git-app-")
	if !old.done(1) {
		t.Errorf("v2.14: %+v not done", old)
	}
}
