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
