package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/bucketops/bucketops/store"
)

// exitNotDeployed is wait's exit code when the release failed or the wait
// timed out.
const exitNotDeployed = 5

// errNotDeployed marks a release Argo CD didn't deploy, or not in time.
var errNotDeployed = errors.New("not deployed")

// waitPollInterval is how often wait asks the bridge.
const waitPollInterval = 2 * time.Second

// waitFlags are the flags of push --wait and wait.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

func (f *waitFlags) register(cmd *cobra.Command, withSwitch bool) {
	if withSwitch {
		cmd.Flags().BoolVar(&f.wait, "wait", false, "after publishing, wait until Argo CD deployed the release (exit 0) or failed (exit 5); needs BUCKETOPS_BRIDGE and a reader token in BUCKETOPS_TOKEN_FILE")
	}
	cmd.Flags().DurationVar(&f.timeout, "wait-timeout", 5*time.Minute, "give up waiting (exit 5) after this long; --timeout still bounds the publish")
}

func newWait(e *env) *cobra.Command {
	var f waitFlags
	var generation int64
	cmd := &cobra.Command{
		Use:   "wait APP",
		Short: "Wait until Argo CD has deployed a release of APP",
		Long: `wait asks the bridge every 2 seconds how the release's deploy stands, until Argo
CD has deployed it (exit 0), the sync failed or the app went Degraded (exit 5),
every Application of the app is pinned to another release (exit 5), or
--wait-timeout passes (exit 5). The release is --generation, or the head.

A release replaced by a newer one before Argo CD compared it is "superseded";
wait then follows the newer one, since Argo CD deploys it instead: deployed
means the app runs this release or a newer one.

The bridge comes from BUCKETOPS_BRIDGE and its bearer token (role reader) from
the file BUCKETOPS_TOKEN_FILE. On a terminal, progress is one updating line on
stderr; elsewhere, a line per change.`,
		Example: `  bucketops wait prod/payments --generation 1733150000123456
  bucketops push prod/payments ./rendered --wait --wait-timeout 10m`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			app := a[0]
			if err := store.ValidateApp(app); err != nil {
				return err
			}
			if generation < 0 {
				return usagef("--generation %d: give a generation number, as push and log print", generation)
			}
			return e.waitDeployed(cmd, store.Ref{App: app, Generation: generation}, f.timeout)
		},
	}
	cmd.Flags().Int64Var(&generation, "generation", 0, "the release to wait for (default: the head)")
	f.register(cmd, false)
	return cmd
}

// deployStatus is the bridge's GET /v1/apps/{app}/-/status answer.
type deployStatus struct {
	App          string `json:"app"`
	Generation   int64  `json:"generation"`
	State        string `json:"state"`
	Message      string `json:"message"`
	Head         int64  `json:"head"`
	Applications []struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		State     string `json:"state"`
		Message   string `json:"message"`
		Revision  string `json:"revision,omitempty"`
		Compared  int64  `json:"compared_generation,omitempty"`
	} `json:"applications"`
}

// waitOutput is wait's -o json answer.
type waitOutput struct {
	deployStatus
	Deployed bool    `json:"deployed"`
	Seconds  float64 `json:"seconds"`
}

// bridgeError is an error answer of the bridge.
type bridgeError struct {
	status  int
	reason  string
	message string
	// line is the bridge's one line for Argo CD (its JSON message), when
	// it wrote one: the release, what refused it, what to do, the reason.
	line string
}

func (b *bridgeError) Error() string {
	return fmt.Sprintf("%s (%d): %s", b.reason, b.status, b.message)
}

// retryable says whether asking again may help: the bridge restarting,
// overloaded, or still loading Argo CD's Applications.
func (b *bridgeError) retryable() bool {
	return b.status == http.StatusServiceUnavailable || b.status == http.StatusBadGateway ||
		b.status == http.StatusGatewayTimeout || b.status == http.StatusTooManyRequests
}

// bridge returns the bridge's URL and bearer token from the environment.
func (e *env) bridge(role string) (string, string, error) {
	base := strings.TrimRight(e.getenv("BUCKETOPS_BRIDGE"), "/")
	if base == "" {
		return "", "", usagef("BUCKETOPS_BRIDGE is not set; it is the bridge's URL, e.g. http://bucketops-bridge.argocd.svc:8080")
	}
	tokenFile := e.getenv("BUCKETOPS_TOKEN_FILE")
	if tokenFile == "" {
		return "", "", usagef("BUCKETOPS_TOKEN_FILE is not set; it names the file holding the bridge's bearer token (role %s)", role)
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return "", "", fmt.Errorf("read the bearer token: %w", err)
	}
	return base, strings.TrimSpace(string(token)), nil
}

// getStatus asks the bridge once.
func getStatus(ctx context.Context, base, token string, ref store.Ref) (deployStatus, error) {
	u := base + "/v1/apps/" + ref.App + "/-/status"
	if ref.Generation != 0 {
		u += "?generation=" + strconv.FormatInt(ref.Generation, 10)
	}
	_, body, err := getBridge(ctx, u, token, nil, 1<<20)
	if err != nil {
		return deployStatus{}, err
	}
	var st deployStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return deployStatus{}, fmt.Errorf("the bridge's status answer isn't JSON: %w", err)
	}
	return st, nil
}

// activityQuery is the window of the bridge's activity export, as the
// auditors' activity page takes it.
type activityQuery struct {
	from, to, prefix, author string
	// format is csv or json.
	format string
}

// errorMessage matches the message of the pages' error page.
var errorMessage = regexp.MustCompile(`(?s)id="error-message">(.*?)</p>`)

// getActivity copies the bridge's activity export (GET /ui/activity with
// format=csv or json) to w, authenticated with the bearer token.
func getActivity(ctx context.Context, base, token string, q activityQuery, w, warn io.Writer) error {
	v := url.Values{"format": {q.format}}
	for k, s := range map[string]string{"from": q.from, "to": q.to, "prefix": q.prefix, "author": q.author} {
		if s != "" {
			v.Set(k, s)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/ui/activity?"+v.Encode(), nil)
	if err != nil {
		return usagef("BUCKETOPS_BRIDGE %q: %v", base, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("bridge unreachable: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if _, err := io.Copy(w, resp.Body); err != nil {
			return fmt.Errorf("reading the activity export: %w", err)
		}
		// ui.TruncatedHeader (the CLI doesn't link the pages).
		if listed, seen, ok := strings.Cut(resp.Header.Get("Bucketops-Truncated"), " of "); ok {
			fmt.Fprintf(warn, "warning: the window holds %s publishes and the export lists only the newest %s: narrow it with --from/--to, --prefix or --author\n", seen, listed)
		}
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg := strings.TrimSpace(string(body))
	switch {
	case strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html"):
		// The pages' error page: its message says what was wrong.
		if m := errorMessage.FindSubmatch(body); m != nil {
			msg = html.UnescapeString(strings.TrimSpace(string(m[1])))
		}
	case strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"):
		var eb struct{ Error string }
		if json.Unmarshal(body, &eb) == nil && eb.Error != "" {
			msg = eb.Error
		}
	}
	switch resp.StatusCode {
	case http.StatusNotFound:
		msg += " (the bridge serves no auditors' pages: started with --no-ui, or without a reader or auditor token?)"
	case http.StatusUnauthorized, http.StatusForbidden:
		msg += " (BUCKETOPS_TOKEN_FILE must hold a reader or auditor token)"
	}
	err = &bridgeError{status: resp.StatusCode, reason: "http_" + strconv.Itoa(resp.StatusCode), message: msg}
	if resp.StatusCode == http.StatusBadRequest {
		return usageError{err}
	}
	return err
}

// waitDeployed polls the status of ref until it is deployed or failed, or
// the wait times out.
func (e *env) waitDeployed(cmd *cobra.Command, ref store.Ref, timeout time.Duration) error {
	if timeout <= 0 {
		return usagef("--wait-timeout %s: give a positive duration such as 10m", timeout)
	}
	base, token, err := e.bridge("reader")
	if err != nil {
		return err
	}
	// The wait has its own deadline; --timeout bounds each request.
	ctx, cancel := context.WithTimeout(e.base, timeout)
	defer cancel()
	p := newProgress(e.stderr)
	defer p.done()
	start := time.Now()
	var last deployStatus
	var lastErr error
	for {
		rctx, rcancel := context.WithTimeout(ctx, min(e.timeout, 30*time.Second))
		st, err := getStatus(rctx, base, token, ref)
		rcancel()
		var be *bridgeError
		switch {
		case err == nil:
			last, lastErr = st, nil
			if ref.Generation == 0 {
				ref.Generation = st.Generation
			}
			p.show(fmt.Sprintf("%s@%d: %s: %s", st.App, st.Generation, st.State, st.Message), time.Since(start))
			switch st.State {
			case "deployed":
				p.done()
				return e.printWait(st, true, time.Since(start))
			case "failed":
				p.done()
				e.printWait(st, false, time.Since(start))
				return fmt.Errorf("%w: %s@%d failed: %s", errNotDeployed, st.App, st.Generation, st.Message)
			case "pinned":
				p.done()
				e.printWait(st, false, time.Since(start))
				return fmt.Errorf("%w: %s@%d won't be deployed: every Application of the app is pinned to another release: %s", errNotDeployed, st.App, st.Generation, st.Message)
			}
		case errors.As(err, &be) && !be.retryable():
			if be.status == http.StatusNotFound || be.status == http.StatusBadRequest {
				return fmt.Errorf("%s: %w", ref, err)
			}
			return fmt.Errorf("%s: the bridge can't tell: %w", ref, err)
		case ctx.Err() != nil:
		default:
			// The bridge restarting or busy: keep asking.
			lastErr = err
			p.show(fmt.Sprintf("%s: waiting for the bridge: %v", ref, err), time.Since(start))
		}
		select {
		case <-ctx.Done():
			p.done()
			if e.base.Err() != nil {
				return e.base.Err()
			}
			why := "no answer from the bridge yet"
			switch {
			case lastErr != nil:
				why = "last error: " + lastErr.Error()
			case last.State != "":
				why = fmt.Sprintf("still %s: %s", last.State, last.Message)
				e.printWait(last, false, time.Since(start))
			}
			return fmt.Errorf("%w: %s not deployed after %s; %s", errNotDeployed, ref, timeout, why)
		case <-time.After(waitPollInterval):
		}
	}
}

func (e *env) printWait(st deployStatus, deployed bool, took time.Duration) error {
	if e.json() {
		return e.printJSON(waitOutput{deployStatus: st, Deployed: deployed, Seconds: took.Round(time.Millisecond).Seconds()})
	}
	if !deployed {
		return nil
	}
	_, err := fmt.Fprintf(e.stdout, "deployed %s@%d in %s (%s)\n", st.App, st.Generation, took.Round(time.Second), st.Message)
	return err
}

// progress shows what wait is waiting for: one line rewritten in place on
// a terminal, a line per change elsewhere (CI logs).
type progress struct {
	w        io.Writer
	terminal bool
	last     string
	shown    bool
}

func newProgress(w io.Writer) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, terminal: ok && term.IsTerminal(int(f.Fd()))}
}

func (p *progress) show(line string, elapsed time.Duration) {
	if p.terminal {
		width := 100
		if f, ok := p.w.(*os.File); ok {
			if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 20 {
				width = w - 1
			}
		}
		text := []rune(fmt.Sprintf("[%3ds] %s", int(elapsed.Seconds()), line))
		if len(text) > width {
			text = append(text[:width-1], '…')
		}
		fmt.Fprintf(p.w, "\r\033[K%s", string(text))
		p.shown = true
		return
	}
	if line != p.last {
		fmt.Fprintf(p.w, "[%3ds] %s\n", int(elapsed.Seconds()), line)
		p.last = line
	}
}

// done ends the updating line, once.
func (p *progress) done() {
	if p.terminal && p.shown {
		fmt.Fprintln(p.w)
		p.shown = false
	}
}

// checkWait asks the bridge, before push --wait publishes anything,
// whether it could tell that app's release deployed: a bridge that can't
// be reached, refuses the token, or has no Argo CD fails the push with
// nothing published. An app the bridge doesn't know yet (its first
// release), or Applications still loading, are fine.
func (e *env) checkWait(ctx context.Context, app string) error {
	base, token, err := e.bridge("reader")
	if err != nil {
		return err
	}
	_, err = getStatus(ctx, base, token, store.Ref{App: app})
	var b *bridgeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &b) && (b.status == http.StatusNotFound || b.retryable()):
		return nil
	case errors.As(err, &b):
		return err
	}
	return fmt.Errorf("%w (BUCKETOPS_BRIDGE=%s)", err, base)
}
