# One entry point for humans and CI. `make test` is what .ci/run calls.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SRC := common webhook controller certs cmdline serving offline devcluster tests hack
DIST ?= dist

.PHONY: test venv lock host components node-components image lint typecheck pytest test-k8s oldest-k8s unit e2e-node demo cluster crd bundle config release-artifacts clean

test: venv host components node-components lint typecheck pytest oldest-k8s

venv: $(VENV)/.installed
# Every dependency pinned with its hashes (requirements-dev.lock), then the project
# itself, editable, from the tools already there (no other download).
$(VENV)/.installed: pyproject.toml VERSION requirements-dev.lock
	@echo ">> creating virtualenv and installing the project"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --require-hashes -r requirements-dev.lock
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	@touch $@

# Re-pin after changing pyproject.toml's dependencies: requirements.lock (the
# programs; both image builds install from it) and requirements-dev.lock (make venv, CI).
LOCK := $(BIN)/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
	--no-emit-find-links --no-emit-index-url
lock: venv
	$(LOCK) --output-file requirements.lock pyproject.toml
	$(LOCK) --extra dev --output-file requirements-dev.lock pyproject.toml

host:
	@bash hack/setup-host.sh

components:
	@echo ">> ensuring the pinned Kubernetes components (first run builds them: long)"
	@bash hack/k8s/build.sh

# The node profile needs root; elsewhere its tests skip, so nothing is built for it.
node-components: host
	@if [ "$$(id -u)" = 0 ]; then \
	  echo ">> ensuring the node profile's components (first run builds them: long)"; \
	  bash hack/k8s/build-node.sh >/dev/null && bash hack/image/setup.sh; \
	else \
	  echo ">> not root: skipping the node profile's components (its tests will skip)"; \
	fi

# OCI image tarballs for containerd (`ctr -n k8s.io images import`), cached by
# their inputs; IMAGE=standin builds one. Each build's last line is its path.
IMAGES ?= $(or $(IMAGE),pause standin operator)
image: venv
	@bash hack/image/setup.sh
	@for image in $(IMAGES); do $(BIN)/python -m hack.image build $$image || exit 1; done

lint: venv
	@echo ">> ruff"
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)

typecheck: venv
	@echo ">> mypy --strict"
	$(BIN)/mypy --strict $(SRC)

pytest: venv components node-components
	@echo ">> pytest (unit, webhook, integration, end-to-end, chart)"
	$(BIN)/pytest -ra --durations=15 $(PYTEST_ARGS)

# Another supported minor than versions.env's newest (docs/kubernetes-versions.md):
# its components (hack/k8s/versions-$(K8S_VERSION).env), then the tests of the
# K8S_TIERS markers against them; the node tier only as root (it skips otherwise).
K8S_TIERS ?= api or cluster or node
# The api tier alone needs no controllers, scheduler or kwok (devcluster.components.API_BINARIES).
K8S_COMPONENTS = $(if $(filter-out api,$(K8S_TIERS)),,etcd kube-apiserver kubectl helm)
OLDEST_K8S := $(shell ls hack/k8s/versions-1.*.env | sed 's/.*versions-\(.*\)\.env/\1/' | sort -V | head -1)
test-k8s: venv host
	@test -n "$(K8S_VERSION)" || { echo "usage: make test-k8s K8S_VERSION=1.NN [K8S_TIERS='api or cluster']" >&2; exit 2; }
	@echo ">> Kubernetes $(K8S_VERSION): ensuring its components (first run builds them: long)"
	@TRUSSIUM_K8S_VERSION=$(K8S_VERSION) bash hack/k8s/build.sh $(K8S_COMPONENTS) >/dev/null
	@if [ "$$(id -u)" = 0 ] && [[ "$(K8S_TIERS)" == *node* ]]; then \
	  TRUSSIUM_K8S_VERSION=$(K8S_VERSION) bash hack/k8s/build-node.sh >/dev/null && bash hack/image/setup.sh; \
	fi
	@echo ">> pytest on Kubernetes $(K8S_VERSION): $(K8S_TIERS)"
	TRUSSIUM_K8S_VERSION=$(K8S_VERSION) $(BIN)/pytest -ra --durations=15 -m "$(K8S_TIERS)" $(PYTEST_ARGS)

# CI's share of the matrix: the api tier on the oldest supported minor.
oldest-k8s: venv host
	@$(MAKE) --no-print-directory test-k8s K8S_VERSION=$(OLDEST_K8S) K8S_TIERS=api

unit: venv
	$(BIN)/pytest -ra -m "not api and not cluster and not node and not image" $(PYTEST_ARGS)

e2e-node: venv components node-components
	@echo ">> pytest: the node profile's tests alone (real kubelet, containerd, runc)"
	$(BIN)/pytest -ra --durations=15 -m node $(PYTEST_ARGS)

crd: venv
	$(BIN)/python -m hack.crd

cluster: venv components $(if $(filter node,$(PROFILE)),node-components)
	$(BIN)/python -m devcluster up --profile $(or $(PROFILE),cluster)

# TRUSSIUM_CLUSTER=kubeconfig: on the cluster of $KUBECONFIG, which needs kubectl and
# helm alone of the pinned components (docs/local-control-plane.md, "A cluster of your own").
demo: venv $(if $(filter kubeconfig,$(TRUSSIUM_CLUSTER)),,components)
	$(BIN)/python -m hack.demo $(if $(ONCE),--once,)

# The one-file install bundle, $(DIST)/install.yaml, rendered from the chart
# (docs/install.md, "One-file bundle"); helm alone of the pinned components.
bundle: venv
	@$(BIN)/python -m hack.bundle --output $(DIST)/install.yaml \
	  --helm "$$(bash hack/k8s/build.sh helm | tail -n 1)/helm"

# The kustomize install, config/ (`kubectl apply --server-side -k config/default`),
# rendered from the chart (docs/install.md, "Kustomize"); helm alone of the pinned components.
config: venv
	@$(BIN)/python -m hack.kustomize \
	  --helm "$$(bash hack/k8s/build.sh helm | tail -n 1)/helm"

# Wheel, sdist, packaged chart, install bundle and SBOM with SHA256SUMS in $(DIST); publishing is
# manual (docs/install.md). Of the pinned components it builds helm alone.
release-artifacts: venv
	DIST=$(DIST) bash hack/release-artifacts.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
