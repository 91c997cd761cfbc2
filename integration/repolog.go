package integration

import (
	"encoding/json"
	"strings"
)

// isGeneration reports whether line, from argocd-repo-server's log, records
// a fresh manifest generation of an Application whose name starts with
// appPrefix: what the fleet race counts, since the repo-server has no
// metric for it. Its repoURL isn't in the line (v2.14 blanks it), so a
// feed is told by its Applications' names.
//
// v2.14 logs it in text at debug level,
//
//	level=debug msg="setting manifests cache" appName=NAME … reason="fresh GenerateManifests response"
//
// and 3.x in JSON at info level, once per generation that succeeded (a
// failed one is "setting manifests cache (error)"),
//
//	{"application":"NAME","cacheKey":"…","level":"info","msg":"setting manifests cache",…}
func isGeneration(line, appPrefix string) bool {
	if strings.HasPrefix(line, "{") {
		var l struct {
			Msg         string `json:"msg"`
			Application string `json:"application"`
		}
		return json.Unmarshal([]byte(line), &l) == nil && l.Msg == "setting manifests cache" && strings.HasPrefix(l.Application, appPrefix)
	}
	return strings.Contains(line, `msg="setting manifests cache"`) && strings.Contains(line, `reason="fresh GenerateManifests response"`) &&
		strings.Contains(line, " appName="+appPrefix)
}
