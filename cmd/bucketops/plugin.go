package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/store"
)

// releaseFile reads the release.json Argo CD checked out from the bridge's
// git view, in the working directory; pinned is false when there is none
// (an Application whose repoURL is another repository).
func releaseFile() (gitview.ReleaseFile, bool, error) {
	data, err := os.ReadFile(gitview.FileName)
	if errors.Is(err, fs.ErrNotExist) {
		return gitview.ReleaseFile{}, false, nil
	}
	if err != nil {
		return gitview.ReleaseFile{}, false, err
	}
	f, err := gitview.ParseReleaseFile(data)
	if err != nil {
		return gitview.ReleaseFile{}, false, fmt.Errorf("the revision Argo CD checked out: %w", err)
	}
	return f, true, nil
}

// maxManifestBytes bounds what generate buffers: a rendered release is a
// 10 MiB release with its Secrets decrypted.
const maxManifestBytes = 64 << 20

func newPlugin(e *env) *cobra.Command {
	plugin := &cobra.Command{
		Use:   "plugin",
		Short: "Commands run by Argo CD's Config Management Plugin",
	}
	generate := &cobra.Command{
		Use:   "generate",
		Short: "Print an app's rendered manifests for Argo CD (the CMP generate command)",
		Long: `generate asks the bridge for the app's rendered release and prints it. It reads
the app from the plugin parameter app (PARAM_APP), else the Application's env
entry BUCKETOPS_APP (ARGOCD_ENV_BUCKETOPS_APP); an optional parameter generation
(PARAM_GENERATION) pins a release. The bridge comes from BUCKETOPS_BRIDGE and the
bearer token (role plugin) from the file BUCKETOPS_TOKEN_FILE.

It fails closed: on any failure it prints nothing on stdout, one line on stderr
saying what failed for which app and generation, and exits non-zero, so Argo CD
reports an error instead of pruning the app. For a release the bridge refuses,
the line is the bridge's: app@generation, the rule that refused it, what to do,
and the reason code in brackets. It writes no files.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Argo CD kills the plugin after ARGOCD_EXEC_TIMEOUT (90s):
			// answer well before, unless told otherwise.
			ctx := cmd.Context()
			if !cmd.Flags().Changed("timeout") {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 50*time.Second)
				defer cancel()
			}
			body, err := e.generate(ctx)
			if err != nil {
				// One line, whatever the cause said.
				return errors.New(strings.Join(strings.Fields(err.Error()), " "))
			}
			_, err = e.stdout.Write(body)
			return err
		},
	}
	plugin.AddCommand(generate)
	return plugin
}

func (e *env) generate(ctx context.Context) ([]byte, error) {
	app := e.getenv("PARAM_APP")
	if app == "" {
		app = e.getenv("ARGOCD_ENV_BUCKETOPS_APP")
	}
	// From the bridge's git view, the revision Argo CD checked out names
	// its release: render exactly that one.
	file, pinned, err := releaseFile()
	if err != nil {
		return nil, err
	}
	ref := store.Ref{App: app}
	if pinned {
		if app != "" && app != file.App {
			return nil, usagef("the Application names app %s, but its revision is a release of %s: fix the plugin parameter app, or the repoURL", app, file.App)
		}
		if g := e.getenv("PARAM_GENERATION"); g != "" {
			return nil, usagef("%s: parameter generation %s and a revision of the git view both pin a release: pin with targetRevision (a commit SHA) alone", file.App, g)
		}
		ref = store.Ref{App: file.App, Generation: file.Generation}
	}
	if ref.App == "" {
		return nil, usagef("no app: point the Application's repoURL at the bridge's git view (…/git/APP.git), or set the plugin parameter app (or the env entry BUCKETOPS_APP)")
	}
	if g := e.getenv("PARAM_GENERATION"); g != "" {
		gen, err := strconv.ParseInt(g, 10, 64)
		if err != nil || gen <= 0 {
			return nil, usagef("%s: parameter generation %q is not a generation number", ref.App, g)
		}
		ref.Generation = gen
	}
	if err := store.ValidateApp(ref.App); err != nil {
		return nil, err
	}
	app = ref.App
	what := ref.String()
	if ref.Generation == 0 {
		what += " (head)"
	}
	bridge, token, err := e.bridge("plugin")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}

	u := bridge + "/v1/apps/" + app + "/-/manifests"
	if ref.Generation != 0 {
		u += "?generation=" + url.QueryEscape(strconv.FormatInt(ref.Generation, 10))
	}
	resp, body, err := e.askBridge(ctx, u, token)
	for _, delay := range pluginRetryDelays {
		if !mayPass(err) || sleep(ctx, delay) != nil {
			break
		}
		resp, body, err = e.askBridge(ctx, u, token)
	}
	var refused *bridgeError
	if errors.As(err, &refused) && refused.line != "" {
		// The bridge's line for Argo CD: the release, what refused it,
		// what to do, and the reason code.
		return nil, errors.New(refused.line)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(body) > maxManifestBytes {
		return nil, fmt.Errorf("%s: the rendered release exceeds %d MiB", what, maxManifestBytes>>20)
	}
	if gen := resp.Header.Get("X-Bucketops-Generation"); gen != "" {
		what = app + "@" + gen
	}
	if pinned && (resp.Header.Get("X-Bucketops-Generation") != strconv.FormatInt(file.Generation, 10) || resp.Header.Get("X-Bucketops-Digest") != file.Digest) {
		return nil, fmt.Errorf("%s: the bridge answered with release %s (%s), not the one the revision names (%s): refusing it", what,
			resp.Header.Get("X-Bucketops-Generation"), resp.Header.Get("X-Bucketops-Digest"), file.Digest)
	}
	if len(bytes.TrimSpace(body)) == 0 && resp.Header.Get("X-Bucketops-Kind") != store.KindTombstone {
		return nil, fmt.Errorf("%s: the bridge answered with no manifests for a release that isn't a tombstone; refusing to let Argo CD prune the app", what)
	}
	return body, nil
}

// pluginRetryDelays are the waits before the plugin asks the bridge again
// after a failure that may pass (mayPass). Argo CD's repo-server stops
// generating a revision for 60 minutes after 3 failed attempts in a row
// (ARGOCD_PAUSE_GEN_AFTER_FAILED_ATTEMPTS, ARGOCD_PAUSE_GEN_MINUTES), so a
// bridge restarting, or busy for a few seconds, must not cost a release an
// hour. 3.5 s in all, well inside the cmp-server's timeout.
var pluginRetryDelays = []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}

// passingReasons are the bridge's refusals that may pass on their own:
// its render memory taken, the bucket or the floor out of reach or slow;
// and a gateway's 502, 503 or 504 in front of it. A refusal of the release
// itself (policy, digest, YAML, secrets), of the caller, or of the
// bridge's configuration (bucket_unavailable, bucket_access_denied) is
// final.
var passingReasons = []string{"render_busy", "floor_unavailable", "bucket_unreachable", "bucket_error", "timeout", "http_502", "http_503", "http_504"}

// mayPass says whether asking the bridge again may answer differently.
func mayPass(err error) bool {
	var refused *bridgeError
	if errors.As(err, &refused) {
		return slices.Contains(passingReasons, refused.reason)
	}
	return errors.Is(err, errUnreachable) || errors.Is(err, errCut)
}

// askBridge GETs the release at u with the plugin's token and the
// Application Argo CD names. Argo CD's repo-server names the Application,
// its destination namespace and (from v3.0) its project, in variables an
// Application can't override: the bridge's status API records which
// generation each Application was served, and a tenancy policy judges who
// asks.
func (e *env) askBridge(ctx context.Context, u, token string) (*http.Response, []byte, error) {
	header := http.Header{}
	for name, variable := range map[string]string{
		"X-Bucketops-Application":           "ARGOCD_APP_NAME",
		"X-Bucketops-Destination-Namespace": "ARGOCD_APP_NAMESPACE",
		"X-Bucketops-Project":               "ARGOCD_APP_PROJECT_NAME",
	} {
		if v := e.getenv(variable); v != "" {
			header.Set(name, v)
		}
	}
	return getBridge(ctx, u, token, header, maxManifestBytes+1)
}
