// Package emulator runs the embedded GCS emulator of the bridge's local mode:
// a versioned bucket served by fakestorage on a loopback port and, given a
// data directory, every generation of every object (the history) kept across
// restarts.
//
// The contract: once a mutating request (POST, PUT, PATCH, DELETE) has been
// answered, its effect is on disk. A bridge killed with SIGKILL loses at most
// the requests still in flight. If the directory can't be written, the
// failure is logged at error level and mutating requests fail with 500 until
// a write succeeds again, so the bucket and the directory never silently
// diverge.
//
// fakestorage's own filesystem backend can't keep versions (a versioned
// bucket answers 500, which the client retries until its deadline), so the
// bucket lives in fakestorage's memory backend and this package persists it:
// after every mutating request it compares the bucket with what is on disk
// and writes the difference.
//
// # Data directory
//
//	DIR/
//	  layout.json               {"layout":1}: marks DIR as ours, names the format
//	  lock                      held (flock) while an emulator uses DIR
//	  BUCKET/
//	    <sha256 of the object name, hex>/
//	      object.json           the name and every generation's attributes
//	      <generation>          that generation's content, decimal name
//
// A content file is written once, before the object.json that refers to it;
// object.json is replaced atomically (temporary file, fsync, rename, fsync of
// the directory). Object directories are named by a hash because object
// names contain "/" and may be 1024 bytes long, more than a file name may be:
// a name can't escape DIR, and object.json holds the real name. Files that no
// object.json refers to are leftovers of an interrupted write and are removed
// at start. A directory that can't be read back (bad JSON, a missing or
// altered content file) stops Start with an error naming the file.
//
// Only the emulator's own bucket is persisted, and only its objects: a
// restarted bucket is versioned whatever a client set. Other buckets a client
// creates live in memory. Requests that would bypass persistence (deleting
// or updating the bucket itself, fakestorage's /_internal/ endpoints) are
// refused with 403.
package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// Defaults for the zero values of Config.
const (
	DefaultAddr   = "127.0.0.1:0"
	DefaultBucket = "bucketops"
)

// shutdownTimeout bounds how long Close waits for in-flight requests.
const shutdownTimeout = 5 * time.Second

// Config configures an emulator.
type Config struct {
	Addr   string       // listen address, default "127.0.0.1:0" (port 0 = a free port)
	Bucket string       // bucket name, default "bucketops"
	Dir    string       // data directory; empty = in memory only
	Logger *slog.Logger // required
}

func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.Bucket == "" {
		c.Bucket = DefaultBucket
	}
	return c
}

// bucketName is GCS's naming rule, less the longer names allowed with dots.
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$`)

// Validate reports every problem with c, joined; empty fields that have a
// default are valid.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if _, port, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("addr %q: %w", c.Addr, err))
	} else if port == "" {
		errs = append(errs, fmt.Errorf("addr %q: missing port (use 0 for a free one)", c.Addr))
	}
	switch {
	case !bucketName.MatchString(c.Bucket):
		errs = append(errs, fmt.Errorf("bucket %q: want 3 to 63 characters of a-z, 0-9, '-', '_' and '.', starting and ending with a letter or digit", c.Bucket))
	case strings.Contains(c.Bucket, ".."):
		errs = append(errs, fmt.Errorf("bucket %q: must not contain \"..\"", c.Bucket))
	case strings.HasPrefix(c.Bucket, "goog") || strings.Contains(c.Bucket, "google"):
		errs = append(errs, fmt.Errorf("bucket %q: must not start with \"goog\" or contain \"google\"", c.Bucket))
	case net.ParseIP(c.Bucket) != nil:
		errs = append(errs, fmt.Errorf("bucket %q: must not be an IP address", c.Bucket))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("logger is required"))
	}
	return errors.Join(errs...)
}

// Emulator is a running emulator. Its methods are safe for concurrent use.
type Emulator struct {
	bucket string
	host   string
	gcs    *fakestorage.Server
	disk   *disk // nil in memory-only mode
	http   *http.Server
	served chan struct{} // closed when the serving goroutine returns
	log    *slog.Logger

	closeOnce sync.Once
	closeErr  error
}

// Start loads cfg.Dir, if any, into a new versioned bucket and serves it on
// cfg.Addr. ctx bounds the start only; the emulator runs until Close.
func Start(ctx context.Context, cfg Config) (*Emulator, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("start emulator: %w", err)
	}

	var (
		d       *disk
		ln      net.Listener
		gcs     *fakestorage.Server
		started bool
	)
	defer func() {
		if started {
			return
		}
		if gcs != nil {
			gcs.Stop()
		}
		if ln != nil {
			ln.Close()
		}
		if d != nil {
			d.close()
		}
	}()

	var err error
	if cfg.Dir != "" {
		if d, err = openDisk(cfg.Dir, cfg.Bucket, cfg.Logger); err != nil {
			return nil, fmt.Errorf("start emulator: %w", err)
		}
	}
	var lc net.ListenConfig
	if ln, err = lc.Listen(ctx, "tcp", cfg.Addr); err != nil {
		return nil, fmt.Errorf("start emulator: %w", err)
	}
	host := dialable(ln.Addr().(*net.TCPAddr))
	gcs, err = fakestorage.NewServerWithOptions(fakestorage.Options{
		NoListener: true,
		Scheme:     "http",
		// With PublicHost set to the listen address, XML-API reads (the
		// client's default with STORAGE_EMULATOR_HOST) reach the object
		// instead of a 404.
		PublicHost:  host,
		ExternalURL: "http://" + host,
	})
	if err != nil {
		return nil, fmt.Errorf("start emulator: %w", err)
	}
	gcs.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: cfg.Bucket, VersioningEnabled: true})
	if d != nil {
		// Restoring creates every generation through fakestorage, which
		// fires its object events: events configured on the server at
		// creation would replay the whole history.
		if err := d.restore(ctx, gcs); err != nil {
			return nil, fmt.Errorf("start emulator: %w", err)
		}
	}

	e := &Emulator{
		bucket: cfg.Bucket,
		host:   host,
		gcs:    gcs,
		disk:   d,
		served: make(chan struct{}),
		log:    cfg.Logger,
	}
	e.http = &http.Server{
		Handler:           http.HandlerFunc(e.serveHTTP),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	started = true
	go func() {
		defer close(e.served)
		if err := e.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.log.Error("emulator stopped serving", "addr", host, "err", err)
		}
	}()
	e.log.Info("gcs emulator serving", "addr", host, "bucket", cfg.Bucket, "dir", cfg.Dir)
	return e, nil
}

// dialable turns a listen address into one a client can dial: an unspecified
// IP (":0", "0.0.0.0:0") becomes loopback.
func dialable(a *net.TCPAddr) string {
	ip := a.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(a.Port))
}

// Host returns "127.0.0.1:PORT", the value for STORAGE_EMULATOR_HOST.
func (e *Emulator) Host() string { return e.host }

// URL returns the base URL, "http://127.0.0.1:PORT".
func (e *Emulator) URL() string { return "http://" + e.host }

// Bucket returns the name of the versioned bucket.
func (e *Emulator) Bucket() string { return e.bucket }

// Server returns the fakestorage server behind the emulator. Changes made
// through it, rather than over HTTP, reach the data directory only with the
// next mutating request or at Close.
func (e *Emulator) Server() *fakestorage.Server { return e.gcs }

// Close stops serving, waits for in-flight requests (up to a few seconds),
// writes what isn't on disk yet and releases the port and the directory.
// Calling it again returns the first call's result.
func (e *Emulator) Close() error {
	e.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		var errs []error
		if err := e.http.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop serving: %w", err), e.http.Close())
		}
		<-e.served
		if e.disk != nil {
			if err := e.disk.flush(e.gcs); err != nil {
				errs = append(errs, err)
			}
			errs = append(errs, e.disk.close())
		}
		e.gcs.Stop()
		if err := errors.Join(errs...); err != nil {
			e.closeErr = fmt.Errorf("close emulator: %w", err)
		}
	})
	return e.closeErr
}

// serveHTTP serves fakestorage and, with a data directory, holds the answer
// to a mutating request until its effect is on disk.
func (e *Emulator) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if !mutating(r.Method) {
		e.gcs.HTTPHandler().ServeHTTP(w, r)
		return
	}
	if reason := e.refuse(r); reason != "" {
		writeError(w, http.StatusForbidden, reason)
		return
	}
	if e.disk == nil {
		e.gcs.HTTPHandler().ServeHTTP(w, r)
		return
	}
	if err := e.disk.ready(e.gcs); err != nil {
		writeError(w, http.StatusInternalServerError, "emulator data directory is not writable, request refused: "+err.Error())
		return
	}
	// Every mutating request is followed by a sync, whatever its status: a
	// batch answers 200 whatever its parts did, and a sync that finds
	// nothing to write writes nothing.
	buf := &bufferedResponse{header: make(http.Header)}
	e.gcs.HTTPHandler().ServeHTTP(buf, r)
	if err := e.disk.commit(e.gcs); err != nil {
		writeError(w, http.StatusInternalServerError, "request applied in memory but not saved to the emulator data directory: "+err.Error())
		return
	}
	buf.send(w)
}

func mutating(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// refuse says why a mutating request must not reach fakestorage, or "".
func (e *Emulator) refuse(r *http.Request) string {
	p := strings.TrimSuffix(r.URL.EscapedPath(), "/")
	switch {
	case strings.HasPrefix(p, "/_internal/"):
		return "fakestorage's internal endpoints are disabled: they would bypass the emulator's persistence"
	case p == "/storage/v1/b/"+e.bucket:
		return fmt.Sprintf("bucket %s is managed by the emulator: it can't be deleted or updated", e.bucket)
	case r.Method == http.MethodDelete:
		return e.retained(r, p)
	}
	return ""
}

// retained refuses, as GCS does, to delete a generation whose Object
// Retention lasts beyond now. fakestorage keeps an object's retention but
// doesn't enforce it. A delete without a generation only makes the live
// version noncurrent, which GCS allows under retention.
func (e *Emulator) retained(r *http.Request, p string) string {
	escaped, ok := strings.CutPrefix(p, "/storage/v1/b/"+e.bucket+"/o/")
	gen, err := strconv.ParseInt(r.URL.Query().Get("generation"), 10, 64)
	if !ok || err != nil {
		return ""
	}
	name, err := url.PathUnescape(escaped)
	if err != nil {
		return ""
	}
	obj, err := e.gcs.GetObjectWithGeneration(e.bucket, name, gen)
	if err != nil || obj.Retention == nil || !obj.Retention.RetainUntil.After(time.Now()) {
		return ""
	}
	return fmt.Sprintf("object %s generation %d is retained until %s (Object Retention, %s): it can't be deleted before", name, gen, obj.Retention.RetainUntil.Format(time.RFC3339), obj.Retention.Mode)
}

// writeError answers in the JSON API's error format, so that clients show
// the message.
func writeError(w http.ResponseWriter, status int, msg string) {
	body, _ := json.Marshal(map[string]any{
		"error": map[string]any{"code": status, "message": msg},
	})
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(body)
}

// bufferedResponse holds a response until the request's effect is on disk.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

func (b *bufferedResponse) send(w http.ResponseWriter) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	if b.status == 0 {
		b.status = http.StatusOK
	}
	w.WriteHeader(b.status)
	w.Write(b.body.Bytes())
}
