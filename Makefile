# nova-operator. `make test` is what CI runs; `make run` starts the operator.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PY ?= .venv/bin/python
N ?= 10
P ?= 20
export PYTHONPATH := tools

.PHONY: help venv envtest realnode deploytools prometheus nova-venvs realnova test-realnova test-servers catalogs verify-catalogs lint fmt manifests verify-manifests test test-unit test-tools test-integration test-e2e run install uninstall deploy undeploy docker-build e2e-kind bench bench-floor bench-writes bench-real bench-pools

# The operator's image (docker-build, deploy, e2e-kind); deploy without IMG uses config/'s own.
IMG ?=
CONTAINER_TOOL ?= docker
KIND ?= kind
KIND_CLUSTER ?= nova-operator-e2e
DEPLOYTOOLS = $$(bash tools/deploytools/build.sh)
TOOLS_ENV = ENVTEST_BIN="$$(bash tools/envtest/build.sh)" DEPLOYTOOLS_BIN="$$(bash tools/deploytools/build.sh)" \
	PROMETHEUS_BIN="$$(bash tools/prometheus/build.sh)"
# make test: the control plane without kwok, and helm, kustomize and kubectl. kwok and prometheus are
# found (or built) by the tiers that use them, when they start (tests/conftest.py runs those tiers
# last): CI builds the two beside the real tier (.ci/run).
TEST_ENV = ENVTEST_BIN="$$(ENVTEST_NO_KWOK=1 bash tools/envtest/build.sh)" \
	DEPLOYTOOLS_BIN="$$(bash tools/deploytools/build.sh)"

help:  ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

venv: .venv/.installed  ## create .venv with the project and its test and dev extras
.venv/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,dev]'
	touch $@

envtest:  ## build (or reuse) kube-apiserver, etcd and the simulated-cluster binaries
	bash tools/envtest/build.sh

realnode:  ## build (or reuse) kubelet, kube-proxy, pause and CoreDNS for real nodes (tools/realnode), from Go modules
	bash tools/realnode/build.sh

deploytools:  ## build (or reuse) helm, kustomize and kubectl from Go modules
	bash tools/deploytools/build.sh

prometheus:  ## build (or reuse) prometheus and promtool from Go modules (alert, dashboard and e2e scrape tests)
	bash tools/prometheus/build.sh

nova-venvs:  ## one venv per supported release with the real nova package (config validation, catalogs)
	bash tools/catalogs/ensure_venvs.sh

catalogs: venv nova-venvs  ## regenerate the option and policy-rule catalogs from the nova packages
	$(PY) tools/catalogs/generate.py

verify-catalogs: venv nova-venvs  ## fail when a committed option or policy-rule catalog differs from its nova package
	$(PY) tools/catalogs/generate.py --check

lint: venv  ## ruff, mypy --strict, import-linter contracts
	$(PY) -m ruff check nova_operator tests tools
	$(PY) -m ruff format --check nova_operator tests tools
	$(PY) -m mypy
	.venv/bin/lint-imports

fmt: venv  ## format and autofix
	$(PY) -m ruff format nova_operator tests tools
	$(PY) -m ruff check --fix nova_operator tests tools

manifests: venv  ## regenerate config/ (CRDs, RBAC, kustomize install), the Helm chart and the generated docs/ pages from the code
	$(PY) -m nova_operator.install.manifests write config charts/nova-operator
	$(PY) -m nova_operator.install.reference write docs/monitoring.md
	$(PY) -m nova_operator.install.docs write docs

verify-manifests: venv  ## fail when config/, charts/nova-operator/ or a generated docs/ page is stale
	$(PY) -m nova_operator.install.manifests verify config charts/nova-operator
	$(PY) -m nova_operator.install.reference verify docs/monitoring.md
	$(PY) -m nova_operator.install.docs verify docs

test-unit: venv  ## unit tests (no cluster)
	$(PY) -m pytest tests/unit

test-tools: venv  ## the tools' own tests (simulated cluster's pieces, benchmarks, image builders; no cluster)
	$(PY) -m pytest tests/tools

test-integration: venv  ## integration tests against a real kube-apiserver + etcd (helm/kustomize renders, promtool)
	$(TOOLS_ENV) $(PY) -m pytest tests/integration

test-e2e: venv  ## e2e scenarios on the simulated cluster (or E2E_KUBECONFIG)
	$(TOOLS_ENV) $(PY) -m pytest tests/e2e

realnova: venv nova-venvs realnode  ## the real-Nova tier's Debian packages, service venvs, nova image trees and each release's nova OCI image (real nodes)
	bash tools/realnova/install.sh
	bash tools/realnova/venvs.sh >/dev/null
	/usr/bin/python3.11 tools/realnova/images.py
	PYTHONPATH=tools $(PY) -m realnode.nova_image >/dev/null

test-realnova: venv realnova  ## the whole real-Nova tier, with the scenarios too long for CI (marker long: the release upgrades; the operator's image installed by its chart on a real node)
	$(TOOLS_ENV) $(PY) -m pytest tests/realnova tests/realnode/test_operator_chart.py

test-servers: venv realnova  ## the day-one server scenario (boot, resize to the other host, confirm, delete; placement) on the minimal Nova at RELEASE=2025.2|2026.1|2026.2
	REALNOVA_RELEASE=$(RELEASE) $(TOOLS_ENV) $(PY) -m pytest tests/realnova/test_day_one.py -k 'server_boots or deleting_the_server'

test: lint verify-manifests  ## everything CI runs: lint, manifests check, unit, integration and e2e tests
	$(TEST_ENV) $(PY) -m pytest tests -m 'not long' --durations=40

# The builds run side by side (tools/prepare: the Python installs beside the Go builds), one line per
# stage; each stage's output is in .logs/make-run/<stage>.log, printed when it fails.
run:  ## run the operator against KUBECONFIG, or start a local cluster of real nodes (kubelets on containerd) where the real Nova serves the samples, every release's nova image in each, the operator installed by its Helm chart (LOCAL_OPERATOR=1: the operator as a local process; STANDINS=1: kwok and stand-ins, no Nova)
	@python3 -m prepare run $(if $(STANDINS),--standins) $(if $(LOCAL_OPERATOR),--local-operator) -- $(ARGS)

bench: venv  ## the floor, then N Novas (N=10 default; N=1, 10, 100): headline ratio, table, bench-N.json (FLOOR=file: that floor)
	ENVTEST_BIN="$$(bash tools/envtest/build.sh)" $(PY) -m bench run --novas $(N) --out bench-$(N).json $(if $(FLOOR),--floor $(FLOOR)) $(if $(ARGS),-- $(ARGS))

bench-floor: venv  ## the same children for N Novas created by a plain client, no operator: what the cluster alone needs
	ENVTEST_BIN="$$(bash tools/envtest/build.sh)" $(PY) -m bench floor --novas $(N) --out bench-floor-$(N).json

bench-writes: venv  ## API-server CPU per write on a bare control plane: a Nova's (with and without its CEL rules), a ConfigMap's
	ENVTEST_BIN="$$(bash tools/envtest/build.sh)" $(PY) -m bench writes --out bench-writes.json

bench-pools: venv  ## one Nova, P pools of N kwok nodes (P=20 N=50 here): Ready vs the floor, joins, drain, requests per pass (not a test)
	ENVTEST_BIN="$$(bash tools/envtest/build.sh)" $(PY) -m bench pools --pools $(P) --nodes $(if $(filter command line,$(origin N)),$(N),50) --out bench-pools.json $(if $(ARGS),-- $(ARGS))

bench-real: venv realnova  ## the minimal sample's bring-up on the real-Nova tier: seconds per stage, RSS per pod (not a test; HOGS=N: N CPU hogs beside it)
	ENVTEST_BIN="$$(ENVTEST_NO_KWOK=1 bash tools/envtest/build.sh)" $(PY) -m bench real --out bench-real.json $(if $(HOGS),--hogs $(HOGS))

install:  ## install the CRDs into the KUBECONFIG cluster (kubectl apply -k config/crd)
	"$(DEPLOYTOOLS)/kubectl" apply -k config/crd

# Deleting a CRD deletes every object of its kind: each Nova and NovaCompute, and through their owner
# references everything they made. On a terminal it asks first; FORCE=1 (or no terminal) does not ask.
uninstall:  ## DELETE the CRDs and with them every Nova, NovaCompute and their children (asks first unless FORCE=1)
	@printf '%s\n' "WARNING: this deletes the CRDs novas.nova.openstack.c5c3.io and novacomputes.nova.openstack.c5c3.io" \
	  "from the cluster of KUBECONFIG, and with them EVERY Nova and NovaCompute in every namespace and" \
	  "all their children: Deployments, Jobs, the db-archive CronJob, Services, ConfigMaps, the derived" \
	  "Secrets (compute contracts), the pools' DaemonSets and the MariaDB Database/User/Grant objects." >&2
	@if [ "$(FORCE)" != 1 ]; then \
	  [ -t 0 ] || { echo "make uninstall: no terminal to confirm on; nothing deleted (FORCE=1 deletes without asking)" >&2; exit 1; }; \
	  read -r -p "Type 'yes' to delete them: " answer; \
	  [ "$$answer" = yes ] || { echo "make uninstall: nothing deleted" >&2; exit 1; }; \
	fi
	"$(DEPLOYTOOLS)/kubectl" delete --ignore-not-found -k config/crd

deploy:  ## install CRDs, RBAC and the operator (config/default, namespace nova-system); IMG=repo:tag for another image
	@set -e; bin="$(DEPLOYTOOLS)"; \
	if [ -z "$(IMG)" ]; then "$$bin/kubectl" apply -k config/default; exit 0; fi; \
	dir="$$(mktemp -d)"; trap 'rm -rf "$$dir"' EXIT; \
	printf 'resources:\n- %s\n' "$$(realpath --relative-to="$$dir" config/default)" > "$$dir/kustomization.yaml"; \
	(cd "$$dir" && "$$bin/kustomize" edit set image ghcr.io/c5c3/nova-operator=$(IMG)); \
	"$$bin/kubectl" apply -k "$$dir"

undeploy: venv  ## remove what deploy installed but the CRDs (so every Nova and its children stay)
	"$(DEPLOYTOOLS)/kubectl" kustomize config/default | $(PY) -c 'import sys, yaml; \
	print(yaml.safe_dump_all([d for d in yaml.safe_load_all(sys.stdin) if d and d["kind"] != "CustomResourceDefinition"]))' \
	| "$(DEPLOYTOOLS)/kubectl" delete --ignore-not-found -f -

docker-build:  ## build the operator's image (needs a container engine: CONTAINER_TOOL=docker|podman), IMG=repo:tag
	$(CONTAINER_TOOL) build -t $(or $(IMG),nova-operator:dev) .

# Not part of `make test`: it needs a container engine and kind, which CI machines here lack (the
# image is proven by tests/integration/test_image.py, the install by tests/e2e/test_install.py).
e2e-kind: venv  ## on a machine with a container engine and kind: cluster, image, chart, then tests/e2e against it
	@set -e; img="$(or $(IMG),localhost/nova-operator:e2e)"; bin="$(DEPLOYTOOLS)"; \
	kubeconfig="$$(mktemp)"; trap 'rm -f "$$kubeconfig"' EXIT; \
	$(KIND) get clusters | grep -qx "$(KIND_CLUSTER)" || $(KIND) create cluster --name "$(KIND_CLUSTER)"; \
	$(KIND) get kubeconfig --name "$(KIND_CLUSTER)" > "$$kubeconfig"; \
	$(CONTAINER_TOOL) build -t "$$img" .; \
	$(KIND) load docker-image "$$img" --name "$(KIND_CLUSTER)"; \
	KUBECONFIG="$$kubeconfig" "$$bin/helm" upgrade --install nova-operator charts/nova-operator \
	  --namespace nova-system --create-namespace --wait --timeout 5m \
	  --set image.repository="$${img%:*}" --set image.tag="$${img##*:}" --set image.pullPolicy=Never; \
	E2E_KUBECONFIG="$$kubeconfig" $(TOOLS_ENV) $(PY) -m pytest tests/e2e
