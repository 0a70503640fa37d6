"""Issue 13 leak test: distinctive credentials never leave their Secrets, over install, upgrade, delete.

The sample Nova runs on the simulated cluster with a distinctive value in every credential it
is given (the service-user password is the fake Keystone's, also searched for) and the
RabbitmqCluster's generated default-user password. After the install, after an upgrade to the
next release and after the delete, no such value (raw, percent-encoded, base64, or as a plain
SHA-256, which anyone could test guesses against) may appear in any ConfigMap, Event,
condition, annotation, the operator's log or a metric label.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import time
from typing import Any
from urllib.parse import quote

import pytest
import yaml
from simcluster import SERVICE_PASSWORD, KubeError, SimHandle

from .test_scenarios import (  # type: ignore[import-not-found]
    DEPENDENCIES,
    INSTALL_WITHIN,
    NAME,
    NOVAS,
    SAMPLES,
    Scenario,
    drop_namespace,
    gone,
    new_namespace,
    prepare,
    wait_for,
)

pytestmark = pytest.mark.e2e

DISTINCT = {
    ("nova-api-db-credentials", "password"): "Lk7apiDbPw-q3Zr",
    ("nova-cell-db-credentials", "password"): "Lk7cellDbPw-w9Xe",
    ("nova-metadata-proxy", "shared_secret"): "Lk7metaShared-t4Yu",
}
# Everything in the namespace that carries annotations or free text
KINDS = (
    "/api/v1/namespaces/{ns}/configmaps",
    "/api/v1/namespaces/{ns}/events",
    "/api/v1/namespaces/{ns}/pods",
    "/api/v1/namespaces/{ns}/services",
    "/api/v1/namespaces/{ns}/secrets",
    "/apis/apps/v1/namespaces/{ns}/deployments",
    "/apis/apps/v1/namespaces/{ns}/replicasets",
    "/apis/batch/v1/namespaces/{ns}/jobs",
    "/apis/batch/v1/namespaces/{ns}/cronjobs",
    "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
    NOVAS,
)


def _forms(value: str) -> set[str]:
    raw = value.encode()
    return {value, quote(value, safe=""), base64.b64encode(raw).decode(), hashlib.sha256(raw).hexdigest()}


def _texts(s: Scenario) -> dict[str, str]:
    """What may never carry a credential: everything but Secret data, keyed by where it is."""
    out: dict[str, str] = {}
    for kind in KINDS:
        for obj in s.list(kind):
            meta = obj.get("metadata") or {}
            where = f"{kind.rsplit('/', 1)[-1]}/{meta.get('name')}"
            shown = {"annotations": meta.get("annotations"), "labels": meta.get("labels")}
            if kind.endswith("/secrets"):
                out[where] = json.dumps(shown)
                continue
            shown.update({k: v for k, v in obj.items() if k != "metadata"})
            out[where] = json.dumps(shown)
    return out


def _scan(s: Scenario, values: list[str], stage: str, extra: dict[str, str]) -> list[str]:
    texts = {**_texts(s), **extra}
    found = []
    for index, value in enumerate(values):  # a finding names the credential by its index only
        for form in _forms(value):
            found += [
                f"{stage}: {where} carries credential #{index}"
                for where, text in texts.items()
                if form in text
            ]
    return found


def test_no_credential_leaks_over_install_upgrade_and_delete(sim_module: SimHandle) -> None:
    prepare(sim_module)
    s = Scenario(sim_module, new_namespace(sim_module, "leaks"))
    try:
        proc = s.start_operator("0")
        assert sim_module.openstack is not None
        sim_module.create_gateway(s.ns, "public-gateway")
        docs = [
            *yaml.safe_load_all((SAMPLES / "secrets.yaml").read_text()),
            *yaml.safe_load_all(DEPENDENCIES.read_text()),
        ]
        for doc in docs:
            if doc and doc["kind"] == "Secret":
                name = doc["metadata"]["name"]
                for (secret, key), value in DISTINCT.items():
                    if name == secret:
                        doc["stringData"][key] = value
                if name == "nova-service-user":
                    doc["stringData"]["password"] = SERVICE_PASSWORD
        nova = yaml.safe_load((SAMPLES / "nova_minimal.yaml").read_text())
        nova["spec"]["keystoneEndpoint"] = sim_module.openstack.keystone_url
        for doc in [*docs, nova]:
            if doc:
                s.apply(doc)
        s.wait_ready(INSTALL_WITHIN, "the Nova Ready")
        values = [*DISTINCT.values(), SERVICE_PASSWORD]
        for secret in s.list("/api/v1/namespaces/{ns}/secrets"):  # the bus' generated default user
            data = secret.get("data") or {}
            if "default-user" in secret["metadata"]["name"] and "password" in data:
                values.append(base64.b64decode(data["password"]).decode())
        assert len(values) > len(DISTINCT) + 1, "no RabbitmqCluster default-user password found"

        def outside() -> dict[str, str]:
            return {"operator log": proc.log.read_text(errors="replace"), "metrics": s.metrics(proc)}

        leaks = _scan(s, values, "install", outside())

        s.patch_nova({"openStackRelease": "2026.1", "image": {"tag": "2026.1"}})

        def upgraded() -> Any:
            nova = s.nova_ready()
            ok = nova is not None and nova["status"].get("installedRelease") == "2026.1"
            return nova if ok and not nova["status"].get("upgradePhase") else None

        wait_for(upgraded, 180, "installedRelease 2026.1 and the Nova Ready")
        leaks += _scan(s, values, "upgrade", outside())

        s.kube.delete(s.path(NOVAS, NAME))
        wait_for(lambda: gone(s, s.path(NOVAS, NAME)), 90, "the Nova gone")
        time.sleep(2)  # the last events and log lines of the finalizer
        leaks += _scan(s, values, "delete", outside())
        assert leaks == [], "\n".join(sorted(set(leaks)))
    finally:
        s.stop_operators()
        with contextlib.suppress(KubeError):
            drop_namespace(sim_module, s.ns)
