# nova-operator. `make test` is what CI runs; `make run` starts the operator.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PY ?= .venv/bin/python
export PYTHONPATH := tools

.PHONY: help venv envtest nova-venvs catalogs verify-catalogs lint fmt manifests verify-manifests test test-unit test-integration test-e2e run

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

nova-venvs:  ## one venv per supported release with the real nova package (config validation, catalogs)
	bash tools/catalogs/ensure_venvs.sh

catalogs: venv nova-venvs  ## regenerate the extraConfig option catalogs from the nova packages
	$(PY) tools/catalogs/generate.py

verify-catalogs: venv nova-venvs  ## fail when a committed option catalog differs from its nova package
	$(PY) tools/catalogs/generate.py --check

lint: venv  ## ruff, mypy --strict, import-linter contracts
	$(PY) -m ruff check nova_operator tests tools
	$(PY) -m ruff format --check nova_operator tests tools
	$(PY) -m mypy
	.venv/bin/lint-imports

fmt: venv  ## format and autofix
	$(PY) -m ruff format nova_operator tests tools
	$(PY) -m ruff check --fix nova_operator tests tools

manifests: venv  ## regenerate config/ (CRDs, RBAC, kustomize install) and the Helm chart from the code
	$(PY) -m nova_operator.manifests write config charts/nova-operator

verify-manifests: venv  ## fail when config/ or charts/nova-operator/ is stale
	$(PY) -m nova_operator.manifests verify config charts/nova-operator

test-unit: venv  ## unit tests (no cluster)
	$(PY) -m pytest tests/unit

test-integration: venv  ## integration tests against a real kube-apiserver + etcd
	ENVTEST_BIN="$$(bash tools/envtest/build.sh)" $(PY) -m pytest tests/integration

test-e2e: venv  ## e2e scenarios on the simulated cluster (or E2E_KUBECONFIG)
	ENVTEST_BIN="$$(bash tools/envtest/build.sh)" $(PY) -m pytest tests/e2e

test: lint verify-manifests  ## everything CI runs: lint, manifests check, unit, integration and e2e tests
	ENVTEST_BIN="$$(bash tools/envtest/build.sh)" $(PY) -m pytest tests

run: venv  ## run the operator against KUBECONFIG, or start a local cluster and run it there
	ENVTEST_BIN="$$( [ -n "$$KUBECONFIG" ] || bash tools/envtest/build.sh)" $(PY) -m simcluster run -- $(ARGS)
