//go:build e2e

package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
)

// balancer stands in for the bridge's Kubernetes Service: one address for
// Argo CD, the plugin and the CLI, spreading requests over the bridge
// replicas in turn and passing over one that refuses connections (killed,
// restarting), as a Service's endpoints drop a pod that is gone.
type balancer struct {
	srv *http.Server
	ln  net.Listener

	mu       sync.Mutex
	backends []string // host:port
	next     int
	served   map[string]int
}

func newBalancer(addr string) (*balancer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	b := &balancer{ln: ln, served: map[string]int{}}
	b.srv = &http.Server{Handler: b}
	go b.srv.Serve(ln)
	return b, nil
}

func (b *balancer) close() { b.srv.Close() }

// set replaces the replicas requests go to.
func (b *balancer) set(backends ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = backends
}

// counts returns how many requests each replica answered.
func (b *balancer) counts() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for k, v := range b.served {
		out[k] = v
	}
	return out
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	backends := append([]string(nil), b.backends...)
	start := b.next
	b.next++
	b.mu.Unlock()
	for i := range backends {
		backend := backends[(start+i)%len(backends)]
		req := r.Clone(r.Context())
		req.RequestURI = ""
		req.URL.Scheme, req.URL.Host = "http", backend
		req.Body = io.NopCloser(bytes.NewReader(body))
		resp, err := http.DefaultTransport.RoundTrip(req)
		if errors.Is(err, syscall.ECONNREFUSED) {
			continue // gone: the next replica
		}
		if err != nil {
			http.Error(w, fmt.Sprintf("balancer: %s: %v", backend, err), http.StatusBadGateway)
			return
		}
		b.mu.Lock()
		b.served[backend]++
		b.mu.Unlock()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
		resp.Body.Close()
		return
	}
	http.Error(w, "balancer: no bridge replica answers", http.StatusServiceUnavailable)
}
