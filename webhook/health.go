package webhook

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// CheckHealth asks the bridge listening on listen (HOST:PORT, as its
// --listen takes it) for /healthz and returns nil if it answers 200 within
// timeout. An unspecified host (0.0.0.0, ::, empty) is asked on loopback:
// the check runs beside the server, as a container's HEALTHCHECK does.
func CheckHealth(ctx context.Context, listen string, timeout time.Duration) error {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	url := "http://" + net.JoinHostPort(host, port) + "/healthz"
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	// No proxy: the server is this host's.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health check: GET %s: %s", url, resp.Status)
	}
	return nil
}
