# bucketops: make build | run | test | lint | bench
export GOTOOLCHAIN := local
GO      ?= go
BIN     ?= bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
# make run DATA=.bucketops-data keeps the local bucket across restarts.
DATA    ?=
LISTEN  ?= 127.0.0.1:8080

.PHONY: build run test test-ui e2e e2e-deps test-integration lint bench bench-compare bench-argocd fuzz clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/bucketops ./cmd/bucketops-bridge

# The bridge in local mode with the apps under examples/ published.
# Its stdout is the export lines only (logs go to stderr); they are kept in
# $(BIN)/local.env for a second terminal.
run: build
	$(BIN)/bucketops-bridge --listen $(LISTEN) --seed examples $(if $(DATA),--data $(DATA)) | tee $(BIN)/local.env

test:
	$(GO) test -race -count=1 ./...

# The auditors' pages in a real browser: Debian's chromium (installed with
# apt-get when missing) driven by chromedp through a bridge in local mode.
# UPDATE_SCREENSHOTS=1 writes the screenshots of docs/ui/ and the README.
UPDATE_SCREENSHOTS ?=
test-ui:
	@command -v chromium >/dev/null || { \
		echo "installing chromium (apt-get)"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get install -y -qq chromium >/dev/null 2>&1 || { $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium; }; }
	$(if $(UPDATE_SCREENSHOTS),BUCKETOPS_UI_SCREENSHOTS=$(CURDIR)/docs/ui) $(GO) test -tags browser -count=1 -timeout 10m -v -run TestAuditorWalk ./ui/

# End to end: a real Argo CD, kube-apiserver and etcd built from the Go module
# proxy (cached in ~/.cache/bucketops-e2e), redis from Debian, our bridge and
# plugin; see docs/testing.md. E2E_RUN='TestScenarios/^3_' runs one scenario.
E2E_RUN ?= .
e2e: e2e-deps
	$(GO) test -tags e2e -count=1 -timeout 50m -v -run '$(E2E_RUN)' ./integration/

# redis for Argo CD; git for its repo-server and the fleet race's monorepo.
e2e-deps:
	@for pkg in redis-server:redis-server git:git; do \
		cmd=$${pkg%%:*}; deb=$${pkg##*:}; \
		command -v $$cmd >/dev/null && continue; \
		echo "installing $$deb (apt-get)"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get install -y -qq $$deb >/dev/null 2>&1 || { $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$deb; }; \
	done

# The fleet race on the real Argo CD of make e2e: 200 apps from a git
# monorepo (with and without manifest-generate-paths) and from bucketops,
# bursts and a 5-minute stream; rewrites its section of docs/benchmarks.md
# and docs/bench-argocd.svg. About 45 minutes on 2 cores. Smaller runs:
# BENCH_ARGOCD_APPS=50 BENCH_ARGOCD_STREAM=1m BENCH_ARGOCD_BURSTS=1.
bench-argocd: e2e-deps
	@mkdir -p $(BIN)
	BENCH_ARGOCD_OUT=$(CURDIR)/$(BIN)/bench-argocd.json BENCH_ARGOCD_DOC=$(CURDIR)/docs/benchmarks.md BENCH_ARGOCD_CHART=$(CURDIR)/docs/bench-argocd.svg \
		$(GO) test -tags e2e -count=1 -timeout 90m -v -run 'TestFleetBench' ./integration/

# Fault tolerance across containers (testcontainers-go): images built FROM
# scratch from our static binaries and fake-gcs-server; needs a Docker engine.
# See docs/testing.md. FAULTS_RUN='TestFaults/^4_' runs one scenario.
FAULTS_RUN ?= .
test-integration:
	TESTCONTAINERS_RYUK_DISABLED=true $(GO) test -tags faults -count=1 -timeout 30m -v -run '$(FAULTS_RUN)' ./integration/faults/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./integration/
	$(GO) vet -tags faults ./integration/faults/
	$(GO) vet -tags browser ./ui/

# Reports requests and wall time per publish; see docs/benchmarks.md.
bench:
	@mkdir -p $(BIN)
	$(GO) test -run '^$$' -bench . -benchtime 200x -count 3 ./store/ | tee $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench BenchmarkManifests -benchtime 30x -count 3 ./webhook/ | tee -a $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench BenchmarkRenderMemory -benchtime 3x -count 3 ./render/ | tee -a $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench BenchmarkGitView -benchtime 100x -count 3 ./gitview/ | tee -a $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench 'BenchmarkTimeline|BenchmarkDiff' -benchtime 30x -count 3 ./ui/ | tee -a $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench BenchmarkNotifyToRefresh -benchtime 200x -count 3 ./deploy/ | tee -a $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench 'BenchmarkPublish|BenchmarkSign' -benchtime 200x -count 5 ./provenance/ | tee -a $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench BenchmarkVerifyChain -benchtime 1x -count 3 -timeout 30m ./provenance/ | tee -a $(BIN)/bench.txt

# bucketops against the git workflows it replaces, in one run; rewrites the
# bench-compare section of docs/benchmarks.md and its chart. See
# docs/benchmarks.md; BENCH_COMPARE_FLAGS='-history 10,1000,10000,100000' for larger runs.
BENCH_COMPARE_FLAGS ?=
bench-compare:
	$(GO) run ./bench/compare -doc docs/benchmarks.md -chart docs/bench-compare.svg $(BENCH_COMPARE_FLAGS)

FUZZTIME ?= 60s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzAssemble -fuzztime $(FUZZTIME) ./render/
	$(GO) test -run '^$$' -fuzz FuzzDecrypt -fuzztime $(FUZZTIME) ./render/

clean:
	rm -rf $(BIN)
