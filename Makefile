# bucketops: make build | run | test | lint | bench
export GOTOOLCHAIN := local
GO      ?= go
BIN     ?= bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
# disable_grpc_modules drops gRPC's xDS and DirectPath, which the GCS client
# links for a transport bucketops never uses (it talks JSON over HTTP): 15 MB
# of the CLI and of the bridge. Every go command here builds with it, so
# tests, builds and images share one build cache; a target with tags of its
# own lists both ($(TAGS),e2e).
TAGS    := disable_grpc_modules
export GOFLAGS := -tags=$(TAGS)
# make run DATA=.bucketops-data keeps the local bucket across restarts.
DATA    ?=
LISTEN  ?= 127.0.0.1:8080

# apt_install,COMMAND,PACKAGE installs Debian's PACKAGE unless COMMAND (a
# shell test) succeeds: with sudo when not root, updating the package lists
# only when the first try fails.
define apt_install
	@$(1) || { \
		echo "installing $(2) (apt-get)"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get install -y -qq $(2) >/dev/null 2>&1 || { $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $(2); }; }
endef

.PHONY: build cli run test test-ui e2e e2e-deps test-integration lint bench bench-compare bench-argocd bench-argocd-levers fuzz clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/bucketops ./cmd/bucketops-bridge

# The CLI alone, as CI jobs download it: no Argo CD client, no KMS clients
# (cmd/bucketops's TestCLIStaysLean holds it under 26 MB).
cli:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/bucketops

# The bridge in local mode with the apps under examples/ published.
# Its stdout is the export lines only (logs go to stderr); the bridge also
# writes them to $(BIN)/local.env for a second terminal, once it listens
# (a second make run that can't bind fails and leaves the file alone).
# DATA=dir keeps the bucket, the token and the addresses across restarts.
run: build
	$(BIN)/bucketops-bridge --listen $(LISTEN) --seed examples --env-file $(BIN)/local.env $(if $(DATA),--data $(DATA))

# git: the CI recipes' test clones the working tree as bucketops' source.
test:
	$(call apt_install,command -v git >/dev/null,git)
	$(GO) test -race -count=1 ./...

# The auditors' pages in a real browser: Debian's chromium (installed with
# apt-get when missing) driven by chromedp through a bridge in local mode.
# UPDATE_SCREENSHOTS=1 writes the screenshots of docs/ui/ and the README.
UPDATE_SCREENSHOTS ?=
test-ui:
	$(call apt_install,command -v chromium >/dev/null,chromium)
	$(if $(UPDATE_SCREENSHOTS),BUCKETOPS_UI_SCREENSHOTS=$(CURDIR)/docs/ui) $(GO) test -tags $(TAGS),browser -count=1 -timeout 10m -v -run TestAuditorWalk ./ui/

# End to end: a real Argo CD (v3.6.2), kube-apiserver and etcd built from the
# Go module proxy (cached in ~/.cache/bucketops-e2e), redis from Debian, our
# bridge and plugin; see docs/testing.md. E2E_RUN='TestScenarios/^3_' runs one
# scenario, passed to go test -run as written ($$ included: $(value ...));
# ARGOCD_VERSION=v2.14.21 runs the previous Argo CD and Kubernetes.
# go test kills the test binary at -timeout plus a minute, cold build of the
# upstream binaries in TestMain included (up to 36 minutes on 2 busy cores).
E2E_RUN ?= .
e2e: e2e-deps
	$(GO) test -tags $(TAGS),e2e -count=1 -timeout 70m -v -run '$(value E2E_RUN)' ./integration/

# redis for Argo CD; git for its repo-server and the fleet race's monorepo.
e2e-deps:
	$(call apt_install,command -v redis-server >/dev/null,redis-server)
	$(call apt_install,command -v git >/dev/null,git)

# The fleet race on the real Argo CD of make e2e: 200 apps from a git
# monorepo (with and without manifest-generate-paths) and from bucketops,
# 3 bursts and a 3-minute stream, Argo CD at its default reconciliation and
# the install's levers on; rewrites its section of docs/benchmarks.md,
# docs/bench-argocd.svg and the README's paragraph about it. About an hour
# on 2 cores. Smaller runs: BENCH_ARGOCD_APPS=50 BENCH_ARGOCD_STREAM=1m
# BENCH_ARGOCD_BURSTS=1; BENCH_ARGOCD_FEEDS=bucketops (git, git-paths) races
# some feeds; BENCH_ARGOCD_LEVERS=none (or sync-first,basic-auth,…) turns
# the install's levers off, all,no-validate adds Argo CD's
# Validate=false to every feed's Applications (not the install's; see
# docs/argocd.md), and all,generate-first-always has the bridge generate
# first before every sync, not only where a comparison is expiring. To profile Argo CD's processes without
# rewriting the report with a profiled run, run the test itself with
# BENCH_ARGOCD_PROFILE=DIR (docs/testing.md).
bench-argocd: e2e-deps
	@mkdir -p $(BIN)
	BENCH_ARGOCD_OUT=$(CURDIR)/$(BIN)/bench-argocd.json BENCH_ARGOCD_DOC=$(CURDIR)/docs/benchmarks.md BENCH_ARGOCD_CHART=$(CURDIR)/docs/bench-argocd.svg BENCH_ARGOCD_README=$(CURDIR)/README.md \
		$(GO) test -tags $(TAGS),e2e -count=1 -timeout 120m -v -run 'TestFleetBench' ./integration/

# What each lever of the install buys: the race once per step, bucketops'
# feed only (200 apps, 1 burst, a 1-minute stream unless BENCH_ARGOCD_*
# say otherwise), each step one more lever on (the last, all, adds
# generate-first); rewrites the bench-argocd-levers section of
# docs/benchmarks.md. About 15 minutes a step.
BENCH_ARGOCD_LEVER_STEPS ?= none sync-first sync-first,basic-auth sync-first,basic-auth,tar-exclude sync-first,basic-auth,tar-exclude,template all
bench-argocd-levers: e2e-deps
	@mkdir -p $(BIN)
	@n=0; reports=; for step in $(BENCH_ARGOCD_LEVER_STEPS); do \
		n=$$((n+1)); out=$(CURDIR)/$(BIN)/bench-argocd-levers-$$n.json; \
		echo "== levers: $$step"; \
		BENCH_ARGOCD_LEVERS=$$step BENCH_ARGOCD_FEEDS=$${BENCH_ARGOCD_FEEDS:-bucketops} BENCH_ARGOCD_BURSTS=$${BENCH_ARGOCD_BURSTS:-1} BENCH_ARGOCD_STREAM=$${BENCH_ARGOCD_STREAM:-1m} BENCH_ARGOCD_OUT=$$out \
			$(GO) test -tags $(TAGS),e2e -count=1 -timeout 60m -v -run 'TestFleetBench' ./integration/ || exit 1; \
		reports="$$reports $$out"; done; \
	$(GO) run ./bench/fleetlevers -doc docs/benchmarks.md $$reports

# Fault tolerance across containers (testcontainers-go): images built FROM
# scratch from our static binaries and fake-gcs-server; needs a Docker engine.
# See docs/testing.md. FAULTS_RUN='TestFaults/^4_' runs one scenario.
FAULTS_RUN ?= .
test-integration:
	TESTCONTAINERS_RYUK_DISABLED=true $(GO) test -tags $(TAGS),faults -count=1 -timeout 30m -v -run '$(FAULTS_RUN)' ./integration/faults/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags $(TAGS),e2e ./integration/
	$(GO) vet -tags $(TAGS),faults ./integration/faults/
	$(GO) vet -tags $(TAGS),browser ./ui/

# Reports requests and wall time per publish; see docs/benchmarks.md.
bench:
	@mkdir -p $(BIN)
	$(GO) test -run '^$$' -bench . -benchtime 200x -count 3 ./store/ | tee $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench BenchmarkManifests -benchtime 30x -count 3 ./webhook/ | tee -a $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench BenchmarkRenderMemory -benchtime 3x -count 3 ./render/ | tee -a $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench BenchmarkPeakHeap -benchtime 1x -count 3 -timeout 40m ./memory/ | tee -a $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench BenchmarkGitView -benchtime 100x -count 3 ./gitview/ | tee -a $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench 'BenchmarkTimeline|BenchmarkDiff' -benchtime 30x -count 3 ./ui/ | tee -a $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench BenchmarkFleetPages -benchtime 5x -count 3 ./ui/ | tee -a $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench BenchmarkNotifyToRefresh -benchtime 200x -count 3 ./deploy/ | tee -a $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench 'BenchmarkPublish|BenchmarkSign' -benchtime 200x -count 5 ./provenance/ | tee -a $(BIN)/bench.txt
	$(GO) test -run '^$$' -bench BenchmarkVerifyChain -benchtime 1x -count 3 -timeout 30m ./provenance/ | tee -a $(BIN)/bench.txt

# bucketops against the git workflows it replaces, in one run; rewrites the
# bench-compare section of docs/benchmarks.md, its chart and the README's
# headline table. See docs/benchmarks.md; BENCH_COMPARE_FLAGS='-history 10,1000,10000,100000' for larger runs.
BENCH_COMPARE_FLAGS ?=
bench-compare:
	$(GO) run ./bench/compare -doc docs/benchmarks.md -chart docs/bench-compare.svg -readme README.md $(BENCH_COMPARE_FLAGS)

FUZZTIME ?= 60s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzAssemble -fuzztime $(FUZZTIME) ./render/
	$(GO) test -run '^$$' -fuzz FuzzDecrypt -fuzztime $(FUZZTIME) ./secrets/

# Container images and releases (docs/releasing.md), built in Go by
# cmd/imagebuild (package image): no Dockerfile, nothing pulled, and two
# builds of one commit are one image, digest included. The commit's time
# (SOURCE_DATE_EPOCH) is stamped on every file. VERSION stays git describe
# here, so a build between releases is never tagged as one; make release
# takes VERSION=vX.Y.Z and writes it to the VERSION file.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
REVISION          ?= $(shell git rev-parse HEAD 2>/dev/null)
HOST_ARCH          = $(shell $(GO) env GOARCH)
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
IMAGE_PLATFORMS   ?= linux/amd64 linux/arm64
CA_CERTS          ?= /etc/ssl/certs/ca-certificates.crt
IMAGEBUILD_FLAGS   = -version '$(VERSION)' -revision '$(REVISION)' -source-date-epoch '$(SOURCE_DATE_EPOCH)' -ca-certs '$(CA_CERTS)'
.PHONY: images test-images release ca-certificates

# dist,PLATFORMS,DIR builds both static binaries for each OS/ARCH into
# DIR/OS_ARCH/; no VCS stamp, so the bytes depend on the source only.
define dist
	@for p in $(1); do \
		os=$${p%/*}; arch=$${p#*/}; echo "go build $$os/$$arch"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -buildvcs=false -ldflags '$(LDFLAGS)' -o $(2)/$${os}_$${arch}/ ./cmd/bucketops ./cmd/bucketops-bridge || exit 1; \
	done
endef

# ghcr.io/bucketops/bucketops:$(VERSION) and ghcr.io/bucketops/bucketops-bridge:$(VERSION)
# for this machine's architecture, loaded into Docker.
images: ca-certificates
	$(call dist,linux/$(HOST_ARCH),$(BIN)/dist)
	$(GO) run ./cmd/imagebuild $(IMAGEBUILD_FLAGS) -bin $(BIN)/dist -platforms linux/$(HOST_ARCH) -docker $(BIN)/images-$(VERSION).tar
	docker load -i $(BIN)/images-$(VERSION).tar

# make images, under a version of its own, checked in Docker: the versions
# printed, user 65532, the labels, the bridge's HEALTHCHECK healthy and
# unhealthy. Removes the containers and images it made.
test-images:
	$(GO) test -tags $(TAGS),images -count=1 -timeout 20m -v -run TestImagesInDocker ./image/

# make release VERSION=vX.Y.Z: under $(BIN)/release, a tar.gz of both binaries
# per RELEASE_PLATFORMS, an OCI image layout per image (IMAGE_PLATFORMS in
# one index), images.txt and SHA256SUMS; VERSION and the manifests' image
# tags set to $(VERSION). See docs/releasing.md.
release: ca-certificates
	$(GO) run ./cmd/release -check -version '$(VERSION)'
	rm -rf $(BIN)/release $(BIN)/release-dist
	$(call dist,$(sort $(RELEASE_PLATFORMS) $(IMAGE_PLATFORMS)),$(BIN)/release-dist)
	$(GO) run ./cmd/imagebuild $(IMAGEBUILD_FLAGS) -bin $(BIN)/release-dist -platforms '$(IMAGE_PLATFORMS)' -oci $(BIN)/release/oci -digests $(BIN)/release/images.txt
	$(GO) run ./cmd/release -version '$(VERSION)' -bin $(BIN)/release-dist -platforms '$(RELEASE_PLATFORMS)' -out $(BIN)/release -source-date-epoch '$(SOURCE_DATE_EPOCH)'
	@git diff --quiet HEAD -- VERSION deploy/kubernetes 2>/dev/null || \
		echo "VERSION and the manifests now name $(VERSION): commit them, tag $(VERSION), and run make release again on the tag (these files say revision $(REVISION))"

# Debian's CA bundle, for the images.
ca-certificates:
	$(call apt_install,test -s $(CA_CERTS),ca-certificates)

clean:
	rm -rf $(BIN)
