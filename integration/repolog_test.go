package integration

import "testing"

func TestIsGeneration(t *testing.T) {
	const (
		v214Fresh = `time="2026-12-03T10:00:00Z" level=debug msg="setting manifests cache" appName=bench-app-007 appSrc="{\"path\":\".\"}" clusterInfo="{}" namespace=bench-bucketops reason="fresh GenerateManifests response" revision=0123abcd trackingKey=label:app.kubernetes.io/instance`
		v214Error = `time="2026-12-03T10:00:00Z" level=debug msg="setting manifests cache" appName=bench-app-007 namespace=bench-bucketops reason="GenerateManifests error" revision=0123abcd`
		v36Fresh  = `{"appNamespace":"argocd","application":"bench-app-007","cacheKey":"{\"Revision\":\"0123abcd\",\"TrackingMethod\":\"annotation:app.kubernetes.io/instance\"}","level":"info","msg":"setting manifests cache","time":"2026-12-05T10:00:00Z"}`
		v36Error  = `{"appNamespace":"argocd","application":"bench-app-007","cacheKey":"{}","level":"info","msg":"setting manifests cache (error)","time":"2026-12-05T10:00:00Z"}`
		v36Get    = `{"application":"bench-app-007","level":"debug","msg":"getting manifests cache: GenerateManifests error","time":"2026-12-05T10:00:00Z"}`
	)
	for _, tc := range []struct {
		name, line, prefix string
		want               bool
	}{
		{"v2.14's debug line for a fresh generation counts for its feed", v214Fresh, "bench-app-", true},
		{"v2.14's line counts for no other feed", v214Fresh, "bench-git-paths-app-", false},
		{"v2.14's line for a failed generation doesn't count", v214Error, "bench-app-", false},
		{"3.6's JSON line for a generation counts for its feed", v36Fresh, "bench-app-", true},
		{"3.6's line counts for no other feed", v36Fresh, "bench-git-app-", false},
		{"3.6's line for a failed generation doesn't count", v36Error, "bench-app-", false},
		{"3.6's other manifest cache lines don't count", v36Get, "bench-app-", false},
		{"a line cut in the middle doesn't count", v36Fresh[:60], "bench-app-", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isGeneration(tc.line, tc.prefix); got != tc.want {
				t.Errorf("isGeneration(%q, %q) = %v, want %v", tc.line, tc.prefix, got, tc.want)
			}
		})
	}
}
