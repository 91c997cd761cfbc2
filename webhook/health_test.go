package webhook_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/bucketops/bucketops/webhook"
)

func TestCheckHealth(t *testing.T) {
	serve := func(t *testing.T, h http.HandlerFunc) string {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.Listener.Addr().String()
	}
	ok := func(w http.ResponseWriter, _ *http.Request) {}
	closed := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	tests := []struct {
		name    string
		listen  func(t *testing.T) string
		healthy bool
	}{
		{"a server answering 200 at /healthz is healthy", func(t *testing.T) string {
			return serve(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/healthz" {
					http.NotFound(w, r)
				}
			})
		}, true},
		{"a server listening on all addresses is asked on loopback", func(t *testing.T) string {
			_, port, _ := net.SplitHostPort(serve(t, ok))
			return "0.0.0.0:" + port
		}, true},
		{"a 503 is unhealthy", func(t *testing.T) string {
			return serve(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
		}, false},
		{"a port nobody listens on is unhealthy", closed, false},
		{"a server that doesn't answer in time is unhealthy", func(t *testing.T) string {
			return serve(t, func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			})
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := webhook.CheckHealth(t.Context(), tt.listen(t), 300*time.Millisecond)
			if (err == nil) != tt.healthy {
				t.Errorf("CheckHealth = %v, want healthy %v", err, tt.healthy)
			}
		})
	}
}
