package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/bucketops/bucketops/emulator"
	"github.com/bucketops/bucketops/render"
	"github.com/bucketops/bucketops/store"
)

// config is the bridge's command line.
type config struct {
	listen   string
	bucket   string
	dataDir  string
	seedDir  string
	logLevel string
}

func (c config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.listen); err != nil {
		errs = append(errs, fmt.Errorf("--listen %q: want HOST:PORT (port 0 picks a free one): %w", c.listen, err))
	}
	if c.bucket != "" {
		if _, err := store.ParseLocation(c.bucket); err != nil {
			errs = append(errs, fmt.Errorf("--bucket: %w", err))
		}
		if c.dataDir != "" || c.seedDir != "" {
			errs = append(errs, errors.New("--data and --seed are for local mode only; drop them or drop --bucket"))
		}
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		errs = append(errs, fmt.Errorf("--log-level %q: use debug, info, warn or error", c.logLevel))
	}
	return errors.Join(errs...)
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("bucketops-bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "HTTP listen address; port 0 picks a free one")
	fs.StringVar(&c.bucket, "bucket", "", "gs://BUCKET[/PREFIX] to serve; empty starts local mode with an embedded GCS emulator")
	fs.StringVar(&c.dataDir, "data", "", "local mode: keep the bucket, history included, in this directory across restarts")
	fs.StringVar(&c.seedDir, "seed", "", "local mode: publish every app directory under this one at start (examples/)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return c, usageError{err}
	}
	if fs.NArg() > 0 {
		return c, usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if err := c.Validate(); err != nil {
		return c, usageError{err}
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.logLevel))
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))

	var (
		client *storage.Client
		loc    store.Location
	)
	if cfg.bucket == "" {
		emu, err := emulator.Start(ctx, emulator.Config{Dir: cfg.dataDir, Logger: log.With("component", "emulator")})
		if err != nil {
			return fmt.Errorf("local mode: %w", err)
		}
		defer emu.Close()
		client, err = storage.NewClient(ctx, option.WithEndpoint(emu.URL()+"/storage/v1/"), option.WithoutAuthentication(), storage.WithJSONReads())
		if err != nil {
			return err
		}
		loc = store.Location{Bucket: emu.Bucket()}
		log.Info("local mode: embedded GCS emulator", "url", emu.URL(), "bucket", loc.String(), "data", cfg.dataDir)
		st := store.New(client, loc, log)
		if cfg.seedDir != "" {
			if err := seed(ctx, st, cfg.seedDir, log); err != nil {
				return fmt.Errorf("local mode: --seed %s: %w", cfg.seedDir, err)
			}
		}
		defer client.Close()
		return serve(ctx, cfg, st, log, stdout, func(w io.Writer) {
			fmt.Fprintf(w, "export BUCKETOPS_BUCKET=%s\n", loc)
			fmt.Fprintf(w, "export STORAGE_EMULATOR_HOST=%s\n", emu.Host())
		})
	}
	loc, _ = store.ParseLocation(cfg.bucket)
	client, err = storage.NewClient(ctx)
	if err != nil {
		return fmt.Errorf("connect to GCS: %w", err)
	}
	defer client.Close()
	st := store.New(client, loc, log)
	if err := st.CheckBucket(ctx); err != nil {
		return err
	}
	return serve(ctx, cfg, st, log, stdout, nil)
}

// serve runs the HTTP surface until ctx ends, then shuts down gracefully.
func serve(ctx context.Context, cfg config, st *store.Store, log *slog.Logger, stdout io.Writer, exports func(io.Writer)) error {
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.listen, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	addr := "http://" + ln.Addr().String()
	log.Info("bridge listening", "url", addr, "bucket", st.Location().String())
	if exports != nil {
		exports(stdout)
		fmt.Fprintf(stdout, "# bridge: %s (health: %s/healthz); stop with Ctrl-C\n", addr, addr)
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// seed publishes every app directory under dir: a directory that directly
// holds manifest files is the app named by its path (examples/dev/guestbook
// is dev/guestbook). Publishing is idempotent, so a restart with --data
// finds the seeds unchanged.
func seed(ctx context.Context, st *store.Store, dir string, log *slog.Logger) error {
	apps := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		ext := strings.ToLower(filepath.Ext(path))
		if !d.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
			rel, err := filepath.Rel(dir, filepath.Dir(path))
			if err != nil {
				return err
			}
			apps[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	names := make([]string, 0, len(apps))
	for app := range apps {
		names = append(names, app)
	}
	sort.Strings(names)
	for _, app := range names {
		rel, err := render.AssembleDir(filepath.Join(dir, filepath.FromSlash(app)))
		if err != nil {
			return err
		}
		res, err := st.Publish(ctx, app, store.Publication{
			Data: rel.Bytes, Resources: rel.Resources(), Author: "bucketops-bridge --seed", Source: filepath.ToSlash(filepath.Join(dir, app)),
		})
		if err != nil {
			return err
		}
		log.Info("seeded", "app", app, "generation", res.Generation, "unchanged", res.Unchanged)
	}
	return nil
}
