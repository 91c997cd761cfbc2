package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/oauth2/google"

	"github.com/bucketops/bucketops/store"
)

// check is one line of bucketops doctor.
type check struct {
	Name   string `json:"name"`
	Result string `json:"result"` // ok, warn, fail or skip
	Detail string `json:"detail"`
}

func newDoctor(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check the credentials, the bucket, the bridge, the token and Argo CD, in one go",
		Long: `doctor checks what the other commands need, one line each, and says what to do
about each problem: whether it talks to Google Cloud Storage or an emulator
(STORAGE_EMULATOR_HOST), the credentials (Application Default Credentials), the
bucket (exists, Object Versioning on, listable), and with BUCKETOPS_BRIDGE the
bridge (answers), the token in BUCKETOPS_TOKEN_FILE (its role) and whether the
bridge has an Argo CD (what push --wait needs).

It exits 1 when a check fails; a warning (no Argo CD, no bridge configured)
leaves it at 0.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			checks := e.doctor(cmd.Context())
			failed := 0
			for _, c := range checks {
				if c.Result == "fail" {
					failed++
				}
			}
			if e.json() {
				if err := e.printJSON(checks); err != nil {
					return err
				}
			} else {
				w := e.table()
				for _, c := range checks {
					fmt.Fprintf(w, "%s\t%s\t%s\n", c.Result, c.Name, c.Detail)
				}
				if err := w.Flush(); err != nil {
					return err
				}
			}
			if failed > 0 {
				return fmt.Errorf("doctor: %d of %d checks failed", failed, len(checks))
			}
			return nil
		},
	}
}

// doctor runs the checks, each within a few seconds; a check that depends
// on one that failed is skipped.
func (e *env) doctor(ctx context.Context) []check {
	var out []check
	add := func(name, result, format string, a ...any) {
		out = append(out, check{Name: name, Result: result, Detail: fmt.Sprintf(format, a...)})
	}
	emulator := e.getenv("STORAGE_EMULATOR_HOST")
	if emulator != "" {
		add("gcs", "ok", "the GCS emulator at %s (STORAGE_EMULATOR_HOST), not Google Cloud Storage", emulator)
		add("credentials", "skip", "an emulator takes none")
	} else {
		add("gcs", "ok", "Google Cloud Storage (set STORAGE_EMULATOR_HOST for an emulator)")
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		creds, err := google.FindDefaultCredentials(cctx, "https://www.googleapis.com/auth/devstorage.read_write")
		cancel()
		if err != nil {
			add("credentials", "fail", "no Application Default Credentials: %v; run gcloud auth application-default login, or set GOOGLE_APPLICATION_CREDENTIALS", errLine(err))
		} else {
			add("credentials", "ok", "Application Default Credentials (%s)", credentialKind(creds.JSON))
		}
	}

	loc, err := e.location()
	if err != nil {
		add("bucket", "fail", "%v", errLine(err))
	} else {
		bctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		s, closeStore, err := e.openStore(bctx)
		if err != nil {
			add("bucket", "fail", "%v", errLine(err))
		} else {
			if err := s.CheckBucket(bctx); err != nil {
				add("bucket", "fail", "%v", errLine(e.waiting.explain(err)))
			} else if _, _, err := s.ListPage(bctx, "", store.ListOptions{Limit: 1}); err != nil {
				add("bucket", "fail", "%s exists but can't be listed: %v; the identity needs roles/storage.objectViewer (objectUser to publish) on it", loc, errLine(e.waiting.explain(err)))
			} else {
				add("bucket", "ok", "%s: exists, Object Versioning on, listable", loc)
			}
			closeStore()
		}
		cancel()
	}

	base, token, err := e.bridge("reader")
	if e.getenv("BUCKETOPS_BRIDGE") == "" {
		add("bridge", "warn", "BUCKETOPS_BRIDGE is not set: push --wait and wait need the bridge's URL")
		return out
	}
	if err != nil {
		add("bridge", "fail", "%v", errLine(err))
		return out
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	code, body, err := get(hctx, base+"/healthz", "")
	if err != nil || code != http.StatusOK {
		add("bridge", "fail", "%s/healthz: %s; is the bridge running, and is BUCKETOPS_BRIDGE its URL?", base, orStatus(code, body, err))
		return out
	}
	add("bridge", "ok", "%s answers", base)
	code, body, err = get(hctx, base+"/v1/apps?prefix=bucketops-doctor", token)
	switch {
	case err != nil:
		add("token", "fail", "%s", orStatus(code, body, err))
		return out
	case code == http.StatusUnauthorized:
		add("token", "fail", "the bridge doesn't know the token in %s (401); give the file holding its --token-file reader token", e.getenv("BUCKETOPS_TOKEN_FILE"))
		return out
	case code == http.StatusForbidden:
		add("token", "fail", "the token in %s is not a reader token (403): the plugin's token, perhaps; push --wait needs the reader token", e.getenv("BUCKETOPS_TOKEN_FILE"))
		return out
	case code != http.StatusOK:
		add("token", "fail", "GET /v1/apps: %s", orStatus(code, body, err))
		return out
	}
	add("token", "ok", "a token that reads the bridge's API, reader or auditor (%s)", e.getenv("BUCKETOPS_TOKEN_FILE"))
	// The status of an app no one publishes: 501 without Argo CD, else
	// the app is unknown (404) or the bridge is loading (503).
	code, body, err = get(hctx, base+"/v1/apps/bucketops-doctor/-/status", token)
	switch {
	case err != nil:
		add("argocd", "fail", "%s", orStatus(code, body, err))
	case code == http.StatusNotImplemented:
		add("argocd", "warn", "the bridge has no Argo CD (--argocd-server): push --wait and wait can't tell deploys")
	case code == http.StatusServiceUnavailable:
		add("argocd", "warn", "the bridge is still loading Argo CD's Applications; try again in a moment")
	case code == http.StatusNotFound || code == http.StatusOK:
		add("argocd", "ok", "the bridge reads Argo CD's Applications: push --wait works")
	default:
		add("argocd", "fail", "%s", orStatus(code, body, err))
	}
	return out
}

// get is one GET with an optional bearer token; the body is capped.
func get(ctx context.Context, url, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return resp.StatusCode, string(body), nil
}

func orStatus(code int, body string, err error) string {
	if err != nil {
		return errLine(err)
	}
	var eb struct{ Error, Reason string }
	if json.Unmarshal([]byte(body), &eb) == nil && eb.Error != "" {
		return fmt.Sprintf("%d %s: %s", code, eb.Reason, eb.Error)
	}
	return fmt.Sprintf("%d %s", code, strings.TrimSpace(body))
}

// credentialKind names the kind of Application Default Credentials from
// their JSON (empty on the metadata server).
func credentialKind(raw []byte) string {
	var c struct {
		Type        string `json:"type"`
		ClientEmail string `json:"client_email"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &c) != nil {
		return "from the metadata server"
	}
	if c.ClientEmail != "" {
		return c.Type + ", " + c.ClientEmail
	}
	return c.Type
}

func errLine(err error) string {
	var ex *explained
	if errors.As(err, &ex) {
		return strings.Join(strings.Fields(ex.msg), " ")
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
