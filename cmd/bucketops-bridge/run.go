package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/api/option"

	"github.com/bucketops/bucketops/deploy"
	"github.com/bucketops/bucketops/emulator"
	"github.com/bucketops/bucketops/floor"
	"github.com/bucketops/bucketops/gitview"
	"github.com/bucketops/bucketops/localmode"
	"github.com/bucketops/bucketops/memory"
	"github.com/bucketops/bucketops/policy"
	"github.com/bucketops/bucketops/policy/watch"
	"github.com/bucketops/bucketops/provenance"
	"github.com/bucketops/bucketops/secrets"
	"github.com/bucketops/bucketops/store"
	"github.com/bucketops/bucketops/ui"
	"github.com/bucketops/bucketops/webhook"
)

// config is the bridge's command line.
type config struct {
	listen     string
	bucket     string
	dataDir    string
	seedDir    string
	logLevel   string
	tokenFiles []tokenFile
	ageKeyFile string
	cacheBytes int64
	// renderMemory bounds what the requests that hold a whole release
	// (renders, release pages, diffs) hold at once.
	renderMemory int64
	// historyBytes bounds the app histories kept for the git view and the
	// auditors' pages.
	historyBytes int64
	policyFile   string
	trustFile    string
	uiOff        bool
	iapAudience  string

	// Notifications and Argo CD.
	subscription  string
	pollInterval  time.Duration
	pushAudience  string
	pushAccount   string
	argocd        deploy.ArgoCD
	argocdNS      string
	sync, prune   bool
	syncAutomated bool
	generateFirst deploy.GenerateFirst
	// reconciliation is Argo CD's timeout.reconciliation.
	reconciliation time.Duration
	argocdWorkers  int
	localPubsub    bool
	envFile        string

	// ApplicationSets.
	generatorGitURL string
	appsetConfigMap string
	kubeconfig      string

	// One-shot modes: print the version, or check the health of the bridge
	// at --listen (a container's HEALTHCHECK), and exit.
	printVersion bool
	healthCheck  bool
}

// tokenFile is one --token-file ROLE=PATH.
type tokenFile struct {
	role webhook.Role
	path string
}

func (c config) Validate() error {
	var errs []error
	if _, port, err := net.SplitHostPort(c.listen); err != nil {
		errs = append(errs, fmt.Errorf("--listen %q: want HOST:PORT (port 0 picks a free one): %w", c.listen, err))
	} else if c.healthCheck && port == "0" {
		errs = append(errs, errors.New("--health-check needs the --listen port the bridge was given, not 0"))
	}
	if c.bucket != "" {
		if _, err := store.ParseLocation(c.bucket); err != nil {
			errs = append(errs, fmt.Errorf("--bucket: %w", err))
		}
		if c.dataDir != "" || c.seedDir != "" || c.envFile != "" {
			errs = append(errs, errors.New("--data, --seed and --env-file are for local mode only; drop them or drop --bucket"))
		}
	}
	if c.bucket != "" && len(c.tokenFiles) == 0 {
		errs = append(errs, errors.New("no --token-file: every route but health needs a bearer token; give --token-file plugin=PATH (and reader=PATH)"))
	}
	if c.cacheBytes < -1 {
		errs = append(errs, errors.New("--cache-bytes must not be negative"))
	}
	if c.renderMemory < -1 {
		errs = append(errs, errors.New("--render-memory must not be negative"))
	}
	if c.historyBytes != -1 && c.historyBytes < minHistoryBytes {
		errs = append(errs, fmt.Errorf("--history-cache-bytes must be at least %d (1 MiB): without it the git view builds an app's commits on every request", minHistoryBytes))
	}
	if c.subscription != "" && !subscriptionName.MatchString(c.subscription) {
		errs = append(errs, fmt.Errorf("--subscription %q: want projects/PROJECT/subscriptions/SUBSCRIPTION", c.subscription))
	}
	if c.bucket != "" && !c.localPubsub {
		errs = append(errs, errors.New("--local-pubsub is for local mode; with --bucket, notifications come from --subscription or push"))
	}
	if c.bucket == "" && c.subscription != "" {
		errs = append(errs, errors.New("--subscription is for a real bucket; local mode subscribes to its own Pub/Sub"))
	}
	if c.pollInterval < 0 || (c.pollInterval > 0 && c.pollInterval < time.Second) {
		errs = append(errs, fmt.Errorf("--poll-interval %s: use 0 (off) or at least 1s", c.pollInterval))
	}
	if (c.pushAudience == "") != (c.pushAccount == "") {
		errs = append(errs, errors.New("Pub/Sub push needs both --pubsub-audience and --pubsub-service-account (the push subscription's OIDC audience and service account)"))
	}
	if c.argocd.Server != "" || c.argocd.TokenFile != "" {
		if err := c.argocd.Validate(); err != nil {
			errs = append(errs, err)
		}
	} else if c.sync || c.prune {
		errs = append(errs, errors.New("--sync and --sync-prune need --argocd-server and --argocd-token-file"))
	}
	if c.prune && !c.sync {
		errs = append(errs, errors.New("--sync-prune prunes in the syncs --sync starts: give --sync too"))
	}
	if c.argocdWorkers < 1 {
		errs = append(errs, errors.New("--argocd-workers must be at least 1"))
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
	fs.StringVar(&c.listen, "listen", cmp.Or(os.Getenv("BUCKETOPS_LISTEN"), "127.0.0.1:8080"), "HTTP listen address; port 0 picks a free one (default $BUCKETOPS_LISTEN, else 127.0.0.1:8080)")
	fs.BoolVar(&c.printVersion, "version", false, "print the version and exit")
	fs.BoolVar(&c.healthCheck, "health-check", false, "GET /healthz from the bridge at --listen and exit 0 if it answers 200 within "+healthTimeout.String()+" (the image's HEALTHCHECK)")
	fs.StringVar(&c.bucket, "bucket", "", "gs://BUCKET[/PREFIX] to serve; empty starts local mode with an embedded GCS emulator")
	fs.StringVar(&c.dataDir, "data", "", "local mode: keep the bucket, history included, in this directory across restarts")
	fs.StringVar(&c.seedDir, "seed", "", "local mode: publish every app directory under this one at start (examples/)")
	fs.StringVar(&c.envFile, "env-file", "", "local mode: also write the export lines to this file, replaced whole once the bridge listens (make run: bin/local.env)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.Func("token-file", "ROLE=PATH: a bearer token for role plugin (manifests), reader (everything else), generator (the ApplicationSet generator) or auditor (the UI, the activity export and the reader API, named after the file: auditors/alice.token is alice), read from PATH; repeatable", func(v string) error {
		role, path, ok := strings.Cut(v, "=")
		if !ok || path == "" {
			return fmt.Errorf("want ROLE=PATH, e.g. plugin=/var/run/bucketops/tokens/plugin")
		}
		c.tokenFiles = append(c.tokenFiles, tokenFile{webhook.Role(role), path})
		return nil
	})
	fs.StringVar(&c.ageKeyFile, "age-key-file", os.Getenv("SOPS_AGE_KEY_FILE"), "age identities for SOPS documents, loaded once at start (default $SOPS_AGE_KEY_FILE)")
	fs.Int64Var(&c.cacheBytes, "cache-bytes", -1, "memory bound of the render cache; default a quarter of the memory limit (GOMEMLIMIT or the container's), else 256 MiB; 0 turns the cache off")
	fs.Int64Var(&c.renderMemory, "render-memory", -1, fmt.Sprintf("memory the requests that hold whole releases may use at once: manifest renders for Argo CD (cold ones; cached renders cost nothing), the UI's release and diff pages; each counted as %dx its release's size (a diff: both releases); default half the memory limit, else 1 GiB; 0: no bound (below %d MiB a release of the largest size renders alone, over the bound)", memory.PerByte, memory.Cost(store.MaxReleaseBytes)>>20))
	fs.Int64Var(&c.historyBytes, "history-cache-bytes", -1, "memory bound of the app histories kept in memory, three quarters for the git view's commits and a quarter for the auditors' pages, least recently used evicted first; default an eighth of the memory limit, else 128 MiB; at least 1 MiB")
	fs.BoolVar(&c.uiOff, "no-ui", false, "don't serve the auditors' pages at /ui/")
	fs.StringVar(&c.iapAudience, "ui-iap-audience", "", "trust Google Cloud IAP's signed header for /ui/ with this audience (/projects/NUMBER/global/backendServices/ID)")
	fs.StringVar(&c.trustFile, "trust-policy", "", "trust policy file (YAML): per app prefix, the keys allowed to sign releases and require: signed, warn or off; read again when it changes (docs/signing.md)")
	fs.StringVar(&c.policyFile, "policy", "", "tenancy policy file (YAML): per app prefix, the decryption keys, Argo CD projects, namespaces and kinds allowed; read again when it changes (docs/tenancy.md)")
	fs.StringVar(&c.subscription, "subscription", "", "projects/P/subscriptions/S: a Pub/Sub pull subscription on the bucket's notification topic")
	fs.DurationVar(&c.pollInterval, "poll-interval", time.Minute, "list the bucket's heads this often to catch lost notifications; 0 turns polling off")
	fs.StringVar(&c.pushAudience, "pubsub-audience", "", "accept Pub/Sub push at /v1/pubsub/push with OIDC tokens for this audience")
	fs.StringVar(&c.pushAccount, "pubsub-service-account", "", "the service account email the push subscription signs its OIDC tokens as")
	fs.StringVar(&c.argocd.Server, "argocd-server", "", "Argo CD API server host:port; empty: no refreshes, no syncs, no status")
	fs.StringVar(&c.argocd.TokenFile, "argocd-token-file", "", "file holding the Argo CD API token (a project role with get and sync on the apps)")
	fs.BoolVar(&c.argocd.GRPCWeb, "argocd-grpc-web", false, "talk gRPC-web to Argo CD (through proxies without HTTP/2)")
	fs.BoolVar(&c.argocd.PlainText, "argocd-plaintext", false, "talk to Argo CD without TLS")
	fs.BoolVar(&c.argocd.Insecure, "argocd-insecure", false, "don't verify Argo CD's TLS certificate")
	fs.StringVar(&c.argocdNS, "argocd-namespace", "argocd", "Argo CD's control-plane namespace")
	fs.BoolVar(&c.sync, "sync", false, "after the refresh, sync Applications that are out of sync and have no automated sync policy")
	fs.BoolVar(&c.prune, "sync-prune", false, "prune in the syncs --sync starts")
	fs.BoolVar(&c.syncAutomated, "sync-automated", true, "for an Application with automated sync, ask Argo CD for a sync of its targetRevision instead of a refresh (no refresh annotation, so no ApplicationSet re-render, and one comparison fewer); false: refresh it as the others")
	fs.TextVar(&c.generateFirst, "generate-first", deploy.GenerateWhenExpiring, "with --sync-automated, ask Argo CD for the release's manifests at its commit before the sync, so that the repo-server generates it once when a comparison of the Application's runs beside the sync's: expiring (only for an Application whose last comparison is about to expire, see --argocd-reconciliation), always, or never (sync at once)")
	fs.DurationVar(&c.reconciliation, "argocd-reconciliation", 120*time.Second, "Argo CD's timeout.reconciliation (argocd-cm; 0s if its timer is off): --generate-first=expiring generates first for an Application whose last comparison is older than this less 10s, and for every one at 0s")
	fs.IntVar(&c.argocdWorkers, "argocd-workers", 16, "concurrent Argo CD refreshes: each waits for Argo CD to generate the app's manifests, so this is how many apps of a burst Argo CD works on at once")
	fs.StringVar(&c.generatorGitURL, "generator-git-url", "", "base of the repoURL the ApplicationSet generator gives each app (URL/APP.git); default the scheme and host it was called at, + /git")
	fs.StringVar(&c.appsetConfigMap, "applicationset-configmap", "bucketops-generator", "refresh the ApplicationSets in --argocd-namespace whose plugin generator names this ConfigMap when an app appears, is retired or changes labels; empty: don't")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig for the ApplicationSet refresher's Kubernetes API calls; default the pod's service account when in a cluster")
	fs.BoolVar(&c.localPubsub, "local-pubsub", true, "local mode: run an in-process Pub/Sub fed by the bucket's notifications; false leaves new releases to polling")
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
	switch {
	case cfg.printVersion:
		return printVersion(stdout)
	case cfg.healthCheck:
		return webhook.CheckHealth(ctx, cfg.listen, healthTimeout)
	}
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.logLevel))
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))

	// Keys once, at start: a bridge that can't decrypt shouldn't look ready.
	decrypter, err := secrets.LoadDecrypter(cfg.ageKeyFile)
	if err != nil {
		return fmt.Errorf("--age-key-file: %w", err)
	}
	if r := decrypter.Recipients(); len(r) > 0 {
		log.Info("age identities loaded", "recipients", strings.Join(r, ","))
	}
	cfg.cacheBytes, cfg.renderMemory, cfg.historyBytes = memoryBudgets(cfg.cacheBytes, cfg.renderMemory, cfg.historyBytes, log)
	var tokens []webhook.Token
	for _, tf := range cfg.tokenFiles {
		t, err := webhook.LoadToken(tf.role, tf.path)
		if err != nil {
			return usageError{fmt.Errorf("--token-file: %w", err)}
		}
		tokens = append(tokens, t)
	}
	srv := bridge{cfg: cfg, log: log, decrypter: decrypter, tokens: tokens, stdout: stdout}
	if cfg.bucket == "" {
		return srv.runLocal(ctx)
	}
	loc, _ := store.ParseLocation(cfg.bucket)
	// JSON reads, as the CLI does: they work against GCS and against an
	// emulator (STORAGE_EMULATOR_HOST), which serves XML only on its
	// public host.
	client, err := storage.NewClient(ctx, storage.WithJSONReads())
	if err != nil {
		return fmt.Errorf("connect to GCS: %w", err)
	}
	defer client.Close()
	st := store.New(client, loc, log)
	if err := st.CheckBucket(ctx); err != nil {
		return err
	}
	var sub *pubsub.Subscriber
	if cfg.subscription != "" {
		var closeSub func()
		if sub, closeSub, err = subscribe(ctx, cfg.subscription); err != nil {
			return err
		}
		defer closeSub()
	}
	return srv.serve(ctx, st, sub, nil, nil)
}

// bridge is one run of the server.
type bridge struct {
	cfg       config
	log       *slog.Logger
	decrypter *secrets.Decrypter
	tokens    []webhook.Token
	stdout    io.Writer
}

// runLocal serves an embedded, versioned GCS emulator, with a token of its
// own unless --token-file gives them. It binds --listen first: a second
// make run fails at once, says why, and leaves the first one's env file
// alone.
func (b bridge) runLocal(ctx context.Context) error {
	state, err := localmode.Open(b.cfg.dataDir)
	if err != nil {
		return err
	}
	defer state.Close()
	ln, err := state.Listen("bridge", b.cfg.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w: another bridge (an earlier make run?) may hold it; stop it, or pick another address: make run LISTEN=127.0.0.1:8090 (--listen)", b.cfg.listen, err)
	}
	defer ln.Close()
	emu, err := state.StartEmulator(ctx, emulator.Config{Dir: b.cfg.dataDir, Logger: b.log.With("component", "emulator")}, b.log)
	if err != nil {
		return fmt.Errorf("local mode: %w", err)
	}
	defer emu.Close()
	// Kept now that the emulator holds its data directory: the next run
	// starts with the same token and addresses.
	state.Set("emulator", emu.Host())
	if err := state.Save(); err != nil {
		return err
	}
	client, err := storage.NewClient(ctx, option.WithEndpoint(emu.URL()+"/storage/v1/"), option.WithoutAuthentication(), storage.WithJSONReads())
	if err != nil {
		return err
	}
	defer client.Close()
	loc := store.Location{Bucket: emu.Bucket()}
	b.log.Info("local mode: embedded GCS emulator", "url", emu.URL(), "bucket", loc.String(), "data", b.cfg.dataDir)
	st := store.New(client, loc, b.log)
	var sub *pubsub.Subscriber
	pubsubLine := "# pubsub: off (--local-pubsub=false); releases are found by polling (--poll-interval)"
	if b.cfg.localPubsub {
		var stopPubsub func()
		if sub, stopPubsub, err = startLocalPubsub(ctx, client, loc); err != nil {
			return err
		}
		defer stopPubsub()
		pubsubLine = fmt.Sprintf("# pubsub: %s (PUBSUB_EMULATOR_HOST=%s), bucket notifications to %s", localSubscription, os.Getenv("PUBSUB_EMULATOR_HOST"), localTopic)
	}
	if b.cfg.seedDir != "" {
		if err := localmode.Seed(ctx, st, b.cfg.seedDir, b.log); err != nil {
			return fmt.Errorf("local mode: --seed %s: %w", b.cfg.seedDir, err)
		}
	}
	tokenFile := b.localToken(state)
	return b.serve(ctx, st, sub, ln, func(url string) string {
		var w strings.Builder
		fmt.Fprintf(&w, "export BUCKETOPS_BUCKET=%s\n", loc)
		fmt.Fprintf(&w, "export STORAGE_EMULATOR_HOST=%s\n", emu.Host())
		fmt.Fprintf(&w, "export BUCKETOPS_BRIDGE=%s\n", url)
		fmt.Fprintf(&w, "export BUCKETOPS_TOKEN_FILE=%s\n", tokenFile)
		fmt.Fprintln(&w, pubsubLine)
		return w.String()
	})
}

// localToken returns the token file local mode exports: the --token-file
// given for the plugin role, or else local mode's own token, for every
// role: in one shell, the plugin (manifests) and CI and auditors (push
// --wait, wait, history) are the same person. With --data it is kept
// there across restarts.
func (b *bridge) localToken(state *localmode.State) string {
	for _, tf := range b.cfg.tokenFiles {
		if tf.role == webhook.RolePlugin {
			return tf.path
		}
	}
	if len(b.cfg.tokenFiles) > 0 {
		return b.cfg.tokenFiles[0].path
	}
	for _, role := range []webhook.Role{webhook.RolePlugin, webhook.RoleReader, webhook.RoleGenerator} {
		b.tokens = append(b.tokens, webhook.NewToken(role, state.Token()))
	}
	return state.TokenFile()
}

// serve runs the HTTP surface until ctx ends, then shuts down gracefully.
func (b bridge) serve(ctx context.Context, st *store.Store, sub *pubsub.Subscriber, ln net.Listener, exports func(url string) string) error {
	reg := newRegistry()
	viewBytes, uiBytes := historySplit(b.cfg.historyBytes)
	// One budget for everything that holds a whole release in memory.
	renderMemory := memory.NewBudget(b.cfg.renderMemory)
	view, err := gitview.New(gitview.Config{Source: st, Location: st.Location(), Logger: b.log.With("component", "gitview"), CacheBytes: viewBytes})
	if err != nil {
		return err
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "bucketops_gitview_cache_bytes", Help: "Bytes of app commits the git view keeps in memory, at most three quarters of --history-cache-bytes.",
	}, func() float64 { return float64(view.CachedBytes()) }))
	generator, refresher, err := b.fleet(st, reg)
	if err != nil {
		return err
	}
	dcfg := deploy.Config{
		Releases: st, Revisions: view, Namespace: b.cfg.argocdNS, Sync: b.cfg.sync, Prune: b.cfg.prune, SyncAutomated: b.cfg.syncAutomated, GenerateFirst: b.cfg.generateFirst, Reconciliation: b.cfg.reconciliation,
		Workers: b.cfg.argocdWorkers, Logger: b.log.With("component", "deploy"), Registry: reg,
	}
	if b.cfg.argocd.Server != "" {
		dcfg.Connect = b.cfg.argocd.Connect
	}
	if refresher != nil {
		dcfg.Observe = refresher.Observe
	}
	deployer, err := deploy.New(dcfg)
	if err != nil {
		return err
	}
	var watcher *watch.Watcher[*policy.Policy]
	var pol webhook.Policies
	var callers webhook.Callers
	if b.cfg.policyFile != "" {
		if watcher, err = watch.Tenancy(b.cfg.policyFile, b.log.With("component", "policy"), reg); err != nil {
			return usageError{err}
		}
		b.log.Info("tenancy policy in force", "path", b.cfg.policyFile, "rules", watcher.Current().RuleCount(), "version", watcher.Current().Version())
		pol, callers = watcher, deployer
	}
	var trust *watch.Watcher[*provenance.TrustPolicy]
	if b.cfg.trustFile != "" {
		k := &provenance.KMS{}
		defer k.Close()
		if trust, err = watch.New("trust", b.cfg.trustFile, provenance.TrustParser(ctx, k), b.log.With("component", "trust"), reg); err != nil {
			return usageError{err}
		}
		b.log.Info("trust policy in force", "path", b.cfg.trustFile, "rules", trust.Current().RuleCount(), "version", trust.Current().Version())
	}
	var push *webhook.PushAuth
	if b.cfg.pushAudience != "" {
		push = &webhook.PushAuth{Audience: b.cfg.pushAudience, ServiceAccount: b.cfg.pushAccount, Keys: webhook.GoogleKeys()}
	}
	var pages http.Handler
	if !b.cfg.uiOff {
		ucfg := ui.Config{
			Releases: st, Location: st.Location(), Logger: b.log.With("component", "ui"),
			Authenticate:  func(token string) bool { return webhook.HasRole(b.tokens, token, webhook.RoleReader) },
			Auditor:       func(token string) (string, bool) { return webhook.AuditorName(b.tokens, token) },
			SessionSecret: webhook.DeriveKey(b.tokens, "ui sessions", webhook.RoleReader, webhook.RoleAuditor),
			HistoryBytes:  uiBytes,
			Memory:        renderMemory,
		}
		if deployer.Enabled() {
			ucfg.Statuses = deployer
			ucfg.Deploys = deployer
		}
		if trust != nil {
			// The pages judge signatures by the policy in force, reloads included.
			ucfg.Trust = trust.Current
		}
		if b.cfg.iapAudience != "" {
			ucfg.IAP = &ui.IAP{Audience: b.cfg.iapAudience, Keys: webhook.NewKeySet(ui.IAPKeysURL, 30*time.Second)}
		}
		if ucfg.SessionSecret == nil {
			b.log.Info("no reader or auditor token: the auditors' pages at /ui/ are off")
		} else {
			u, err := ui.New(ucfg)
			if err != nil {
				return err
			}
			pages = u.Handler()
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "bucketops_ui_history_cache_bytes", Help: "Bytes of app histories the auditors' pages keep in memory, at most a quarter of --history-cache-bytes.",
			}, func() float64 { return float64(u.CachedBytes()) }))
		}
	}
	wcfg := webhook.Config{
		Releases:   st,
		Renderer:   b.decrypter,
		Tokens:     b.tokens,
		Logger:     b.log,
		Registry:   reg,
		CacheBytes: b.cfg.cacheBytes,
		Memory:     renderMemory,
		Policy:     pol,
		Callers:    callers,
		Deploys:    deployer,
		Trust:      trusts(trust),
		Floors:     floors(trust, st),
		Location:   st.Location(),
		Push:       push,
		Git:        view.Handler(),
		UI:         pages,
	}
	if generator != nil {
		wcfg.Generator = generator
	}
	api, err := webhook.New(wcfg)
	if err != nil {
		return err
	}
	// Intake (pull, polling) and Argo CD calls run beside the HTTP server
	// and stop with it.
	bg, stopBG := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		stopBG()
		wg.Wait()
	}()
	wg.Go(func() { deployer.Run(bg) })
	wg.Go(func() { runRefresher(bg, refresher, b.log) })
	if watcher != nil {
		wg.Go(func() { watcher.Run(bg, policyInterval) })
	}
	if trust != nil {
		wg.Go(func() { trust.Run(bg, policyInterval) })
	}
	if sub != nil {
		b.log.Info("pulling bucket notifications", "subscription", sub.String())
		wg.Go(func() { deployer.Receive(bg, sub, st.Location()) })
	}
	if b.cfg.pollInterval > 0 {
		wg.Go(func() { deployer.Poll(bg, b.cfg.pollInterval) })
	}
	if !deployer.Enabled() {
		b.log.Info("no --argocd-server: releases are tracked, Argo CD isn't told")
	}
	if ln == nil {
		if ln, err = net.Listen("tcp", b.cfg.listen); err != nil {
			return fmt.Errorf("listen on %s: %w", b.cfg.listen, err)
		}
	}
	srv := &http.Server{
		Handler:           api.Routes(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(b.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	url := "http://" + ln.Addr().String()
	b.log.Info("bridge listening", "url", url, "bucket", st.Location().String())
	if exports != nil {
		lines := exports(url)
		if generator != nil {
			lines += fmt.Sprintf("# applicationset generator: baseUrl %s (token: $BUCKETOPS_TOKEN_FILE)\n", url)
		}
		if pages != nil {
			lines += fmt.Sprintf("# ui: %s/ui/ (log in with the token in $BUCKETOPS_TOKEN_FILE)\n", url)
		}
		lines += fmt.Sprintf("# bridge: %s (health: %s/healthz); stop with Ctrl-C\n", url, url)
		if err := localmode.WriteEnv(b.cfg.envFile, lines); err != nil {
			srv.Close()
			return err
		}
		fmt.Fprint(b.stdout, lines)
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	b.log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// newRegistry is the bridge's own metrics registry, with the process and Go
// collectors; libraries never touch the global one.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// floors keeps each app's rollback floor in the bucket when a trust policy
// is in force (docs/signing.md).
func floors(w *watch.Watcher[*provenance.TrustPolicy], st *store.Store) webhook.Floors {
	if w == nil {
		return nil
	}
	return floor.New(st.Client(), st.Location())
}

// trusts keeps a nil watcher a nil interface: no trust policy.
func trusts(w *watch.Watcher[*provenance.TrustPolicy]) webhook.Trusts {
	if w == nil {
		return nil
	}
	return w
}
