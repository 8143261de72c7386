# kube-node-ready: every target sets up what it needs on a fresh machine (npm packages, Node 24
# from the npm registry, Debian packages, the sandbox's Go-built Kubernetes binaries).
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT := $(CURDIR)
export PATH := $(ROOT)/node_modules/.bin:$(PATH)
NODES ?= 3
SANDBOX_DIR ?= $(ROOT)/.sandbox
STAMP := node_modules/.install-stamp
SRC := $(shell find packages -path '*/node_modules' -prune -o -name '*.ts' -print 2>/dev/null)

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: deps
deps: $(STAMP) system-deps ## Install npm packages (Node 24 comes from the npm registry) and Debian packages

$(STAMP): package.json package-lock.json packages/*/package.json
	@echo "==> npm ci (installs Node 24 into node_modules/.bin as well)"
	npm ci --no-audit --no-fund
	@node --version | grep -q '^v24\.' || { echo "expected Node 24 from node_modules/.bin, got $$(node --version)"; exit 1; }
	@touch $@

.PHONY: system-deps
# Debian packages: openssl (sandbox certificates), iproute2 (its network namespace), nftables (its
# Service ClusterIPs, as kube-proxy), procps (pgrep in tests), prometheus (promtool for the alert tests, and the Prometheus server of the live alert
# and dashboard tests and the demo), containerd and runc (the image's tests run it as a container runtime would),
# qemu-user-static (the arm64 image's Node.js under emulation), debian-archive-keyring (make image checks the
# Debian archives it assembles the image's base from). chromium only for `make alerts-screenshot`.
system-deps:
	@missing=""; \
	command -v openssl >/dev/null || missing="$$missing openssl"; \
	command -v ip >/dev/null || missing="$$missing iproute2"; \
	command -v pgrep >/dev/null || missing="$$missing procps"; \
	command -v promtool >/dev/null || missing="$$missing prometheus"; \
	{ command -v nft || test -x /usr/sbin/nft; } >/dev/null || missing="$$missing nftables"; \
	command -v containerd >/dev/null || missing="$$missing containerd"; \
	{ command -v runc || test -x /usr/sbin/runc; } >/dev/null || missing="$$missing runc"; \
	command -v qemu-aarch64-static >/dev/null || missing="$$missing qemu-user-static"; \
	test -f /usr/share/keyrings/debian-archive-keyring.gpg || missing="$$missing debian-archive-keyring"; \
	if [ -n "$$missing" ]; then \
	  echo "==> apt-get install$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

.PHONY: sandbox-bins
sandbox-bins: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet, kube-proxy, helm and Karpenter from Go modules, node-readiness-controller from shared/third_party/, and what real nodes use: crane, the Distribution registry, CoreDNS (each cached under its own key in ~/.cache/kube-node-ready)
	@bash packages/sandbox/go/build.sh node-readiness-controller >/dev/null
	@bash packages/sandbox/go/build.sh >/dev/null
	@# Real nodes' registry and cluster DNS: built here, not on the first real node's start (a request with a deadline).
	@bash packages/sandbox/go/build.sh crane registry coredns >/dev/null

dist/kube-node-ready.mjs dist/sandbox.mjs: $(STAMP) $(SRC) scripts/bundle.mjs
	node scripts/bundle.mjs

.PHONY: build
build: dist/kube-node-ready.mjs ## Bundle the kube-node-ready CLI and the sandbox into dist/

.PHONY: dist
dist: build ## Assemble dist/image/: exactly what the container image copies
	node scripts/dist.mjs

IMAGE ?= kube-node-ready:dev
OCI_TAR := dist/kube-node-ready-oci.tar
IMAGE_INPUTS := image/image.yaml image/lock.json $(wildcard scripts/image/*.mjs) packages/sandbox/go/build.sh
.PHONY: image
image: $(OCI_TAR) ## The multi-arch image (linux/amd64, linux/arm64) without a Docker engine, reproducibly: dist/kube-node-ready-oci.tar (OCI layout), SBOMs beside it; prints the digests (docs/supply-chain.md)

# Bundled again here: the bundle's commit (--version) and the image's revision label are both HEAD's.
# It depends on the sources rather than on dist/kube-node-ready.mjs, which the tests bundle again.
$(OCI_TAR): $(STAMP) $(SRC) scripts/bundle.mjs scripts/dist.mjs $(IMAGE_INPUTS)
	@$(MAKE) --no-print-directory system-deps
	node scripts/bundle.mjs --quiet
	node scripts/dist.mjs
	node scripts/image/build.mjs

.PHONY: image-push
image-push: $(OCI_TAR) ## Push the image built by make image to IMAGE (IMAGE=registry.example.com/knr:1.0.0), digests unchanged
	@case "$(IMAGE)" in kube-node-ready:dev) echo "image-push: set IMAGE to a registry reference you can push to, e.g. IMAGE=registry.example.com/knr:1.0.0" >&2; exit 2 ;; esac
	node scripts/image/push.mjs "$(IMAGE)"

.PHONY: image-lock
image-lock: deps ## Re-resolve image/image.yaml to exact Debian package versions and Node.js hashes in image/lock.json (review, commit, then make image)
	@$(MAKE) --no-print-directory system-deps
	node scripts/image/lock.mjs

PLATFORMS ?= linux/amd64,linux/arm64
# Where docker-build puts the image with its SBOM and provenance attestations, which only an image
# index can hold (not the classic Docker image store, so no --load): push = --push to IMAGE's
# registry; oci = an OCI layout tarball, dist/kube-node-ready-oci.tar (docs/supply-chain.md).
OUTPUT ?= push
DOCKER_OUTPUT_push := --push
DOCKER_OUTPUT_oci := --output type=oci,dest=$(OCI_TAR)
.PHONY: docker-build
docker-build: ## Build the multi-arch image with an SBOM (SPDX) and SLSA provenance (mode=max); OUTPUT=push (default: pushes IMAGE) or OUTPUT=oci (dist/kube-node-ready-oci.tar); IMAGE=..., PLATFORMS=...; needs docker buildx on a builder that keeps attestations (docs/supply-chain.md)
	@case "$(OUTPUT)" in push|oci) ;; *) echo "OUTPUT must be push or oci, got '$(OUTPUT)'" >&2; exit 2 ;; esac
	@mkdir -p $(dir $(OCI_TAR))
	docker buildx build --platform $(PLATFORMS) --sbom=true --provenance=mode=max \
	  --build-arg VERSION=$$(node -p "require('./packages/cli/package.json').version") \
	  --build-arg COMMIT=$$(git rev-parse HEAD) -t $(IMAGE) $(DOCKER_OUTPUT_$(OUTPUT)) .

.PHONY: pin-base-images
pin-base-images: ## Re-pin the Dockerfile's base images to the current index digest of their tags (needs crane or docker buildx, and the registries; review the diff, then rebuild)
	bash scripts/pin-base-images.sh

.PHONY: typecheck
typecheck: $(STAMP) ## TypeScript strict typecheck of every package, the bench and the fault suite
	tsc -p tsconfig.json
	tsc -p bench/tsconfig.json
	tsc -p chaos/tsconfig.json

.PHONY: lint
lint: $(STAMP) ## ESLint (typescript-eslint)
	eslint --max-warnings 0 .

.PHONY: unit
unit: deps sandbox-bins ## Fast tests: pure logic, real loopback servers, helm and promtool
	vitest run --project unit

.PHONY: test
test: deps sandbox-bins build image typecheck lint ## Everything: typecheck, lint, unit and sandbox tests, the short fault suite, a quick bench run
	@# Three vitest runs side by side, each with its own log: the unit tests (they need only CPU), the
	@# serial sandbox project (tests that disrupt a whole cluster, one file at a time on a sandbox of
	@# its own, slot +30) and the sandbox project (here). The sandbox tests wait on their clusters much
	@# of the time, so running them side by side costs little more than the longer of the two.
	@echo "==> vitest: the unit project (log .test-unit.log) and the serial sandbox project (log .test-serial.log) in the background, the sandbox project here"
	@# A CI page may keep only the end of the log: the step ends with every failed test of the runs,
	@# and, when a run failed outside its tests (a setup or teardown error), the end of its output.
	@rm -f .test-results.json .test-results-unit.json .test-results-serial.json
	@vitest run --project unit --reporter=default --reporter=json --outputFile.json=.test-results-unit.json > .test-unit.log 2>&1 & unit=$$!; \
	  vitest run --project sandbox-serial --reporter=default --reporter=json --outputFile.json=.test-results-serial.json > .test-serial.log 2>&1 & serial=$$!; \
	  sandbox=0; vitest run --project sandbox --reporter=default --reporter=json --outputFile.json=.test-results.json 2>&1 | tee .test-sandbox.log || sandbox=$$?; \
	  s=0; wait $$serial || s=$$?; echo "==> vitest: the serial sandbox project (exit $$s)"; cat .test-serial.log; \
	  u=0; wait $$unit || u=$$?; echo "==> vitest: the unit project (exit $$u)"; cat .test-unit.log; \
	  echo "==> vitest: sandbox project exit $$sandbox, serial sandbox project exit $$s, unit project exit $$u"; \
	  if [ $$sandbox -ne 0 ] || [ $$s -ne 0 ] || [ $$u -ne 0 ]; then \
	    node scripts/test-summary.mjs .test-results.json .test-results-serial.json .test-results-unit.json || true; \
	    for r in sandbox:$$sandbox serial:$$s; do \
	      if [ "$${r#*:}" -ne 0 ]; then log=.test-$${r%%:*}.log; echo "==> the last 40 lines of $$log:"; sed 's/\x1b\[[0-9;]*m//g' $$log | grep -v '^{' | tail -n 40; fi; \
	    done; \
	    exit 1; \
	  fi
	@# The short fault suite: fails the build on any invariant violation (docs/reliability.md).
	$(MAKE) --no-print-directory chaos CHAOS=quick
	@# Keeps the benchmark harness from rotting, and fails if the controller, run under the chart's
	@# memory limit, is OOM-killed (no other result is asserted; see make bench).
	$(MAKE) --no-print-directory bench BENCH=quick
	@node scripts/test-summary.mjs .test-results-unit.json .test-results.json .test-results-serial.json

.PHONY: chaos
chaos: deps sandbox-bins build ## Fault suite: scenarios during node bursts, violations per invariant (docs/reliability.md); CHAOS=quick for the short version
	node chaos/build.mjs
	node dist/chaos.mjs $(if $(filter quick,$(CHAOS)),--quick) $(CHAOS_ARGS)

.PHONY: bench
bench: deps sandbox-bins build image ## Benchmarks in the sandbox (docs/benchmarks.md); BENCH=quick for a CI-sized run
	@command -v gnuplot >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox; }
	node bench/build.mjs
	node dist/bench.mjs $(if $(filter quick,$(BENCH)),--quick)

.PHONY: sandbox-up
sandbox-up: deps sandbox-bins build ## Start the sandbox in the background (NODES=n simulated nodes); kubeconfig in .sandbox/kubeconfig
	node dist/sandbox.mjs up --dir "$(SANDBOX_DIR)" --nodes $(NODES)

.PHONY: sandbox-down
sandbox-down: ## Stop the sandbox; nothing is left running
	@if [ -f dist/sandbox.mjs ]; then node dist/sandbox.mjs down --dir "$(SANDBOX_DIR)"; fi

.PHONY: demo
demo: deps sandbox-bins build image ## The main job on the sandbox: Karpenter launches real nodes with the startup taint, they are verified (the worker from the image), a Prometheus with the chart's alerts watches (KEEP=1 leaves it all running)
	node dist/sandbox.mjs demo --dir "$(SANDBOX_DIR)/demo" --slot 2

.PHONY: alerts-screenshot
alerts-screenshot: deps sandbox-bins build image ## The demo, with a screenshot of Prometheus' alerts page while the broken node's alert fires (docs/images/alerts-demo.png; needs Debian's chromium)
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
	KNR_DEMO_SCREENSHOT=$(ROOT)/docs/images/alerts-demo.png node dist/sandbox.mjs demo --dir "$(SANDBOX_DIR)/demo" --slot 2

.PHONY: clean
clean: sandbox-down ## Remove build output and the sandbox state (the binary cache stays)
	rm -rf dist .sandbox
