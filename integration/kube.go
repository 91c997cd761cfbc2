//go:build e2e

package integration

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// kube talks to the kube-apiserver's REST API with the admin token: what
// the scenarios assert is what the API server holds.
type kube struct {
	url   string
	token string
	http  *http.Client
}

func newKube(url, token string) *kube {
	return &kube{url: url, token: token, http: &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, // the apiserver's self-made cert on loopback
	}}
}

// errNotFound is a 404 from the API server.
type apiError struct {
	status int
	body   string
}

func (e *apiError) Error() string { return fmt.Sprintf("kube-apiserver %d: %s", e.status, e.body) }

func isNotFound(err error) bool {
	e, ok := err.(*apiError)
	return ok && e.status == http.StatusNotFound
}

func (k *kube) do(method, path, contentType string, body []byte, out any) error {
	req, err := http.NewRequest(method, k.url+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if k.token != "" {
		req.Header.Set("Authorization", "Bearer "+k.token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return &apiError{status: resp.StatusCode, body: strings.TrimSpace(string(data))}
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// apply server-side applies one object (YAML or JSON) at path, the
// object's own URL.
func (k *kube) apply(path string, object []byte) error {
	return k.do(http.MethodPatch, path+"?fieldManager=bucketops-e2e&force=true", "application/apply-patch+yaml", object, nil)
}

// get reads the object at path into out.
func (k *kube) get(path string, out any) error {
	return k.do(http.MethodGet, path, "", nil, out)
}

// configMapData returns a ConfigMap's data, or nil when it doesn't exist.
func (k *kube) configMapData(namespace, name string) (map[string]string, error) {
	var cm struct {
		Data map[string]string `json:"data"`
	}
	err := k.get(fmt.Sprintf("/api/v1/namespaces/%s/configmaps/%s", namespace, name), &cm)
	if isNotFound(err) {
		return nil, nil
	}
	if cm.Data == nil && err == nil {
		cm.Data = map[string]string{}
	}
	return cm.Data, err
}

// secretData returns a Secret's decoded data, or nil when it doesn't exist.
func (k *kube) secretData(namespace, name string) (map[string]string, error) {
	var s struct {
		Data map[string][]byte `json:"data"`
	}
	err := k.get(fmt.Sprintf("/api/v1/namespaces/%s/secrets/%s", namespace, name), &s)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}

// application is the part of an Argo CD Application the scenarios read.
type application struct {
	Status struct {
		Sync struct {
			Status   string `json:"status"`
			Revision string `json:"revision"`
		} `json:"sync"`
		History []struct {
			ID       int64  `json:"id"`
			Revision string `json:"revision"`
		} `json:"history"`
		ReconciledAt string `json:"reconciledAt"`
		Health       struct {
			Status string `json:"status"`
		} `json:"health"`
		Conditions []struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"conditions"`
		OperationState *struct {
			Phase   string `json:"phase"`
			Message string `json:"message"`
		} `json:"operationState"`
	} `json:"status"`
}

// String is what a failure message says of an Application: its sync
// status and revision, health, last operation and conditions.
func (a application) String() string {
	st := a.Status
	out := fmt.Sprintf("sync %s at %.12s, health %s", st.Sync.Status, st.Sync.Revision, st.Health.Status)
	if op := st.OperationState; op != nil {
		out += fmt.Sprintf(", operation %s: %q", op.Phase, op.Message)
	}
	for _, c := range st.Conditions {
		out += fmt.Sprintf(", %s: %q", c.Type, c.Message)
	}
	return out
}

func (k *kube) application(name string) (application, error) {
	var a application
	err := k.get("/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/"+name, &a)
	return a, err
}
