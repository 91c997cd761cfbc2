package integration

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// logLine reads one line of an Argo CD process's log, JSON (3.x) or
// logrus' text (2.14: key=value, quoted when needed), into its message
// and its fields. ok is false for anything else, such as a line cut in
// the middle.
func logLine(line string) (msg string, fields map[string]string, ok bool) {
	if strings.HasPrefix(line, "{") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			return "", nil, false
		}
		fields = make(map[string]string, len(m))
		for k, v := range m {
			switch v := v.(type) {
			case string:
				fields[k] = v
			case map[string]any:
				// A Kubernetes NamespacedName, as logrus' JSON formatter
				// writes it: namespace/name, as its text formatter does.
				ns, _ := v["Namespace"].(string)
				name, _ := v["Name"].(string)
				if name != "" {
					fields[k] = ns + "/" + name
				}
			}
		}
		return fields["msg"], fields, true
	}
	fields = map[string]string{}
	for rest := strings.TrimSpace(line); rest != ""; rest = strings.TrimLeft(rest, " ") {
		key, after, found := strings.Cut(rest, "=")
		if !found || key == "" || strings.ContainsAny(key, ` "`) {
			return "", nil, false
		}
		var value string
		if strings.HasPrefix(after, `"`) {
			q, err := strconv.QuotedPrefix(after)
			if err != nil {
				return "", nil, false
			}
			value, _ = strconv.Unquote(q)
			rest = after[len(q):]
		} else {
			value, rest, _ = strings.Cut(after, " ")
		}
		fields[key] = value
	}
	msg, ok = fields["msg"]
	return msg, fields, ok
}

// isReconcile reports whether line, from argocd-application-controller's
// log, ends a reconciliation (a comparison, with or without a sync) of an
// Application whose name starts with appPrefix (2.14 names it
// namespace/name, 3.x name).
func isReconcile(line, appPrefix string) bool {
	msg, f, ok := logLine(line)
	return ok && msg == "Reconciliation completed" && strings.HasPrefix(applicationName(f), appPrefix)
}

// applicationName is the Application a controller log line is about: 2.14
// names it namespace/name, 3.x name.
func applicationName(fields map[string]string) string {
	name := fields["application"]
	if _, n, qualified := strings.Cut(name, "/"); qualified {
		return n
	}
	return name
}

// isAppSetReconcile reports whether line, from the ApplicationSet
// controller's log, ends a reconciliation (a render of every Application
// it generates) of the ApplicationSet set in namespace argocd.
func isAppSetReconcile(line, set string) bool {
	msg, f, ok := logLine(line)
	return ok && strings.HasPrefix(msg, "end reconcile in") && f["applicationset"] == "argocd/"+set
}

// isAppSetRequeue reports whether line, from the ApplicationSet
// controller's debug log, requeues an ApplicationSet because one of its
// Applications whose name starts with appPrefix changed (a refresh
// annotation set or cleared, its status or spec).
func isAppSetRequeue(line, appPrefix string) bool {
	msg, _, ok := logLine(line)
	return ok && strings.HasPrefix(msg, "requeue caused by application "+appPrefix)
}

// webhookLog is what argocd-server's log says of the push webhooks and
// the refreshes they queue for Applications whose names start with a
// prefix.
type webhookLog struct {
	// Received counts push events taken up ("Received push event",
	// v2.14 and 3.x); Started and Completed the handlers that began and
	// ended (3.x only).
	Received, Started, Completed int
	// Queued counts the refreshes a handler queued for the prefix's
	// Applications ("refreshing app from webhook"); Requested the lines
	// of those a worker asked of the Application ("Requested app 'NAME'
	// refresh", twice per refresh in 3.6: util/argo's RefreshApp logs it,
	// then util/webhook's processAppRefresh again); Failed those it
	// couldn't ("Failed to refresh app 'NAME' ...", once). 3.x only:
	// v2.14 refreshes within the handler and logs none of them.
	Queued, Requested, Failed int
	// Moved counts the prefix's Applications whose files a push didn't
	// touch (manifest-generate-paths) and whose cached manifests
	// argocd-server moved to the push's revision ("manifests cache
	// moved"), so that their next comparison generates nothing; Missed
	// those it couldn't move, because nothing was cached at the revision
	// before the push ("manifest cache miss while moving ..."), or for an
	// error ("Failed to store cached manifests ..."). 3.x only.
	Moved, Missed int
}

// webhookLogMessages are the messages webhookLog counts, matched before a
// line is parsed: teardown reads the whole log four times a second.
var webhookLogMessages = []string{"Received push event", "Webhook handler", "refreshing app from webhook", "Requested app '", "Failed to refresh app '", "manifests cache moved", "manifest cache miss while moving", "Failed to store cached manifests"}

// add counts line of argocd-server's log.
func (w *webhookLog) add(line, appPrefix string) {
	if !slices.ContainsFunc(webhookLogMessages, func(m string) bool { return strings.Contains(line, m) }) {
		return
	}
	msg, fields, ok := logLine(line)
	if !ok {
		return
	}
	switch {
	case strings.HasPrefix(msg, "Received push event"):
		w.Received++
	case msg == "Webhook handler started":
		w.Started++
	case strings.HasPrefix(msg, "Webhook handler completed"):
		w.Completed++
	case msg == "refreshing app from webhook" && strings.HasPrefix(fields["application"], appPrefix):
		w.Queued++
	case strings.HasPrefix(msg, "Requested app '"+appPrefix):
		w.Requested++
	case strings.HasPrefix(msg, "Failed to refresh app '"+appPrefix):
		w.Failed++
	case !strings.HasPrefix(fields["application"], appPrefix): // another feed's
	case msg == "manifests cache moved":
		w.Moved++
	case strings.HasPrefix(msg, "manifest cache miss while moving"), strings.HasPrefix(msg, "Failed to store cached manifests"):
		w.Missed++
	}
}

// done: every one of posted webhooks taken up, no handler running and no
// refresh of the prefix's Applications left in the queue.
func (w webhookLog) done(posted int) bool {
	return w.Received >= posted && w.Completed >= w.Started && w.Requested/2+w.Failed >= w.Queued
}

// isExpiredComparison reports whether line, from
// argocd-application-controller's log, starts a comparison of the
// Application name because its last one is older than
// timeout.reconciliation:
//
//	Refreshing app status (comparison expired, requesting refresh. reconciledAt: …, expiry: 1m0s), level (2)
func isExpiredComparison(line, name string) bool {
	msg, f, ok := logLine(line)
	return ok && applicationName(f) == name && strings.HasPrefix(msg, "Refreshing app status (comparison expired")
}
