package deploy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/argoproj/argo-cd/v2/pkg/apiclient"
	"github.com/argoproj/argo-cd/v2/pkg/apiclient/application"
)

// ArgoCD says how to reach Argo CD's API server.
type ArgoCD struct {
	// Server is host:port of argocd-server.
	Server string
	// TokenFile holds the API token (a project-scoped role's JWT).
	TokenFile string
	// GRPCWeb talks gRPC-web over HTTP/1.1, for ingresses without HTTP/2.
	GRPCWeb bool
	// PlainText talks without TLS; Insecure skips verifying the server's
	// certificate.
	PlainText, Insecure bool
}

// Validate reports a missing server or token file.
func (c ArgoCD) Validate() error {
	var errs []error
	if c.Server == "" {
		errs = append(errs, errors.New("no Argo CD server: give --argocd-server host:port"))
	}
	if c.TokenFile == "" {
		errs = append(errs, errors.New("no Argo CD token: give --argocd-token-file, a file holding an API token with get and sync on the apps"))
	}
	return errors.Join(errs...)
}

// Connect returns Argo CD's application service through Argo CD's own
// client (pkg/apiclient), and what closes the connection. The token is read
// from its file on every connect; the Deployer reconnects when Argo CD
// refuses a token, so a rotated token is picked up without a restart.
func (c ArgoCD) Connect() (application.ApplicationServiceClient, io.Closer, error) {
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	data, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return nil, nil, fmt.Errorf("argo cd token: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return nil, nil, fmt.Errorf("argo cd token file %s is empty", c.TokenFile)
	}
	client, err := apiclient.NewClient(&apiclient.ClientOptions{
		ServerAddr: c.Server,
		AuthToken:  token,
		GRPCWeb:    c.GRPCWeb,
		PlainText:  c.PlainText,
		Insecure:   c.Insecure,
		UserAgent:  "bucketops-bridge",
		// ConfigPath stays empty: the argocd CLI's config file is not read.
	})
	if err != nil {
		return nil, nil, fmt.Errorf("argo cd client for %s: %w", c.Server, err)
	}
	closer, apps, err := client.NewApplicationClient()
	if err != nil {
		return nil, nil, fmt.Errorf("argo cd %s: %w", c.Server, err)
	}
	return apps, closer, nil
}
