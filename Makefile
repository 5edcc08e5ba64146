# agentlane Makefile. `make help` lists the targets.

# Tool versions, pinned. Tools are built from the Go module proxy into ./bin.
CONTROLLER_TOOLS_VERSION ?= v0.21.0
KUSTOMIZE_VERSION ?= v5.8.2
HELM_VERSION ?= v3.22.0
GOLANGCI_LINT_VERSION ?= v2.15.0
KUBE_VERSION ?= 1.36.3

LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
KUSTOMIZE ?= $(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION)
HELM ?= $(LOCALBIN)/helm-$(HELM_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)

# The Helm chart (charts/agentlane) is generated from config/ by `make
# manifests` but for the Deployments it builds from values: the CRDs in its
# crds/; the policies, RBAC, Services and cert-manager objects in its
# templates/ (hack/chartgen); the objects of the prometheus and
# network-policy components in files/components/.
CHART ?= charts/agentlane

# The image that serves both the manager and the workers, and the tools that
# build and deploy it.
IMG ?= agentlane:dev
CONTAINER_TOOL ?= docker
# `make images` also writes SHELL_IMG, IMG with busybox for workers that run
# shell commands, and PAUSE_IMG, a pod sandbox image; `make deploy` runs the
# workers' tasks (the runner container of the worker pods) with WORKER_IMG.
SHELL_IMG ?= agentlane-shell:dev
PAUSE_IMG ?= agentlane-pause:dev
WORKER_IMG ?= $(IMG)
BUSYBOX ?= /bin/busybox
KUBECTL ?= kubectl

# Ginkgo and envtest suites need the control plane; hack/envtest-assets.sh builds it
# once from Go modules and prints where it lives.
ENVTEST_ASSETS = $(shell hack/envtest-assets.sh)

GO ?= go
GOTEST_FLAGS ?=

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen kustomize ## Generate CRDs and RBAC from the API types and kubebuilder markers, and the chart's copies of config/.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd:generateEmbeddedObjectMeta=true paths="./api/..." paths="./internal/controller/..." paths="./cmd/manager/..." paths="./internal/sessionserver/..." output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	@if grep -rq '+kubebuilder:rbac' cmd/worker; then \
		$(CONTROLLER_GEN) rbac:roleName=worker-role paths="./cmd/worker/..." output:rbac:artifacts:config=config/rbac/worker; fi
	@rm -f $(CHART)/crds/*.yaml && cp config/crd/bases/*.yaml $(CHART)/crds/
	@for c in prometheus network-policy; do rm -rf $(CHART)/files/components/$$c && mkdir -p $(CHART)/files/components/$$c && \
		cp $$(ls config/components/$$c/*.yaml | grep -v /kustomization.yaml) $(CHART)/files/components/$$c/; done
	@$(GO) run ./hack/chartgen -kustomize $(KUSTOMIZE) -chart $(CHART)

.PHONY: generate
generate: controller-gen ## Generate deepcopy methods for the API types.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

# The chart's templates are checked against config/ before they are
# generated again, so that a hand edit fails even when it is not committed.
.PHONY: verify-generated
verify-generated: controller-gen kustomize ## Fail when generated files differ from what is committed or the chart from config/.
	@$(GO) run ./hack/chartgen -kustomize $(KUSTOMIZE) -chart $(CHART) -check
	@$(MAKE) --no-print-directory generate manifests
	@if [ -n "$$(git status --porcelain -- api config $(CHART))" ]; then \
		echo "generated files are stale; run 'make generate manifests' and commit:"; \
		git status --short -- api config $(CHART); git --no-pager diff --stat -- api config $(CHART); exit 1; fi

# The TypeScript client's types are generated from the Session API's
# OpenAPI document by openapi-typescript, pinned in sdk/typescript's lockfile.
.PHONY: generate-sdk-typescript
generate-sdk-typescript: ## Generate sdk/typescript/src/openapi.ts from pkg/sessionapi/openapi.yaml (npm ci first).
	@cd sdk/typescript && npm ci --silent --no-audit --no-fund && npm run --silent generate >/dev/null

.PHONY: verify-sdk-typescript
verify-sdk-typescript: generate-sdk-typescript ## Fail when sdk/typescript/src/openapi.ts differs from what the OpenAPI document generates.
	@if [ -n "$$(git status --porcelain -- sdk/typescript/src/openapi.ts)" ]; then \
		echo "sdk/typescript/src/openapi.ts is stale; run 'make generate-sdk-typescript' and commit:"; \
		git --no-pager diff --stat -- sdk/typescript/src/openapi.ts; exit 1; fi

.PHONY: verify
verify: verify-generated verify-sdk-typescript ## Fail when generated files or formatting are stale.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then \
		echo "gofmt would change these files; run 'make fmt':"; echo "$$unformatted"; exit 1; fi

.PHONY: fmt
fmt: ## Run gofmt on the tree.
	gofmt -l -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: lint
# The linters and every exclusion, each with its reason, are in .golangci.yml.
lint: golangci-lint ## Run golangci-lint (the linters of .golangci.yml, gofmt included) over the module.
	$(GOLANGCI_LINT) run ./...

##@ Test

.PHONY: envtest
envtest: ## Build (first time) and cache the envtest control plane; prints its path.
	@hack/envtest-assets.sh

.PHONY: test
test: generate manifests vet kustomize helm ## Run go vet, unit tests and the envtest suites (race detector on).
	@echo "envtest control plane: $(ENVTEST_ASSETS)"
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" KUSTOMIZE="$(KUSTOMIZE)" HELM="$(HELM)" $(GO) test -race -timeout=30m $(GOTEST_FLAGS) ./...

.PHONY: test-chaos
test-chaos: manifests ## Run only the chaos suite (test/chaos, part of `make test`): processes killed with tasks in flight; CHAOS_SEED replays a run, CHAOS_TASKS sets its size.
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test ./test/chaos/ -count=1 -timeout=30m -v $(GOTEST_FLAGS)

.PHONY: test-e2e
test-e2e: images kustomize helm ## Run the end-to-end suite on a real three-node cluster on this machine (Linux, root; see docs/cluster.md); E2E_FOCUS="fails over" runs only the specs it matches.
	KUSTOMIZE="$(KUSTOMIZE)" HELM="$(HELM)" hack/test-e2e.sh

.PHONY: bench
bench: ## Run the lane scheduler benchmarks: single, lanes and sessions against the OpenClaw queue port (needs node), idle, memory, Go benchmarks.
	@for w in single lanes sessions; do $(GO) run ./hack/lanebench --workload=$$w --peer || exit 1; done
	@for w in idle memory; do $(GO) run ./hack/lanebench --workload=$$w || exit 1; done
	$(GO) test -run='^$$' -bench=. -benchmem ./internal/lanequeue/...

.PHONY: test-load
LOAD_FLAGS ?=
test-load: manifests ## Flood every Session API surface from one tenant while another runs steady work; fails past the bounds of docs/security.md. LOAD_FLAGS="-load-flood=30s" shortens it.
	AGENTLANE_LOAD=1 KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test ./test/bench/ -run '^TestLoad$$' -count=1 -v -timeout=20m -args $(LOAD_FLAGS)

.PHONY: bench-e2e
BENCH_E2E_FLAGS ?=
bench-e2e: manifests ## Measure the ExternalTask path and Direct lanes end to end on envtest with the real manager and workers (docs/performance.md); BENCH_E2E_FLAGS="-tasks=2000 -direct-tasks=20000 -queued=10000" sizes it, -skip=cr,direct,queued leaves parts out.
	AGENTLANE_BENCH_E2E=1 KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test ./test/bench/ -run '^TestBenchE2E$$' -count=1 -v -timeout=60m -args $(BENCH_E2E_FLAGS)

##@ Build

.PHONY: build
build: ## Build the manager, worker, agent and lanetop binaries into bin/ (lanetop also as the kubectl plugin bin/kubectl-lanetop), and the kubectl plugin bin/kubectl-agentlane.
	$(GO) build -o $(LOCALBIN)/manager ./cmd/manager
	$(GO) build -o $(LOCALBIN)/worker ./cmd/worker
	$(GO) build -o $(LOCALBIN)/agent ./cmd/agent
	$(GO) build -o $(LOCALBIN)/lanetop ./cmd/lanetop
	cp -f $(LOCALBIN)/lanetop $(LOCALBIN)/kubectl-lanetop
	$(GO) build -o $(LOCALBIN)/kubectl-agentlane ./cmd/kubectl-agentlane

.PHONY: docker-build
docker-build: ## Build the image that runs the manager and the workers (IMG=agentlane:dev).
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: images
images: ## Write image archives of IMG, SHELL_IMG and PAUSE_IMG into bin/images/ without Docker.
	@if [ ! -x $(BUSYBOX) ]; then \
		if [ "$$(id -u)" = 0 ]; then DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends busybox-static; \
		else echo "make images: $(BUSYBOX) is missing; SHELL_IMG needs a static busybox: run 'apt-get install busybox-static' as root" >&2; exit 1; fi; fi
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags="-s -w" -o $(LOCALBIN)/images-bin/ ./cmd/manager ./cmd/worker ./cmd/agent ./hack/images/pause
	$(GO) run ./hack/images --bin=$(LOCALBIN)/images-bin --out=$(LOCALBIN)/images --arch=$$($(GO) env GOARCH) \
		--image=$(IMG) --shell-image=$(SHELL_IMG) --pause-image=$(PAUSE_IMG) --busybox=$(BUSYBOX)

.PHONY: demo
demo: build ## Run the main job on an embedded control plane.
	@hack/demo.sh $(DEMO_FLAGS)

##@ Deployment

.PHONY: deploy
# deploy and build-installer render config/default with hack/render.sh, which
# sets the images in throwaway overlays under bin/, so config/default stays as
# committed: IMG everywhere, then WORKER_IMG in the worker pods' runner
# container, where tasks run.
deploy: kustomize ## Deploy agentlane (config/default) with image IMG, the workers' tasks in WORKER_IMG, to the cluster of the current kubeconfig.
	KUSTOMIZE=$(KUSTOMIZE) hack/render.sh $(IMG) $(WORKER_IMG) | $(KUBECTL) apply --server-side -f -

.PHONY: build-installer
# dist/ is generated output and is not committed (.gitignore): a release
# builds dist/install.yaml with its images and attaches it.
build-installer: manifests kustomize ## Write dist/install.yaml, config/default in one file, with images IMG and WORKER_IMG.
	@mkdir -p dist
	KUSTOMIZE=$(KUSTOMIZE) hack/render.sh $(IMG) $(WORKER_IMG) >dist/install.yaml
	@echo "wrote dist/install.yaml ($(IMG), workers' tasks in $(WORKER_IMG))"

.PHONY: undeploy
undeploy: kustomize ## Delete what deploy created, the CRDs (and so every LaneQueue, AgentSession and ExternalTask) included.
	$(KUSTOMIZE) build config/default | $(KUBECTL) delete --ignore-not-found=true -f -

##@ Local cluster

CLUSTER_NODES ?= 3

.PHONY: cluster-up
cluster-up: images ## Start a real Kubernetes cluster of CLUSTER_NODES nodes on this machine, with the images loaded (Linux, root).
	hack/cluster.sh up --nodes $(CLUSTER_NODES)

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and remove every trace of it.
	hack/cluster.sh down

##@ Tools

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Build controller-gen into bin/ from the Go module proxy.
$(CONTROLLER_GEN):
	@mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	@mv $(LOCALBIN)/controller-gen $(CONTROLLER_GEN)

.PHONY: helm
helm: $(HELM) ## Build helm into bin/ from the Go module proxy (a build tool, not a dependency of the module).
$(HELM):
	@mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	@mv $(LOCALBIN)/helm $(HELM)

.PHONY: helm-lint
helm-lint: helm ## Lint the chart.
	$(HELM) lint --strict $(CHART)

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT) ## Build golangci-lint into bin/ from the Go module proxy.
$(GOLANGCI_LINT):
	@mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	@mv $(LOCALBIN)/golangci-lint $(GOLANGCI_LINT)

.PHONY: kustomize
kustomize: $(KUSTOMIZE) ## Build kustomize into bin/ from the Go module proxy.
$(KUSTOMIZE):
	@mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	@mv $(LOCALBIN)/kustomize $(KUSTOMIZE)
