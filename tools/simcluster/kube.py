"""A tiny synchronous JSON client for the launcher (standard library only).

The launcher runs before any event loop exists and must not depend on the operator's
client stack, so installing CRDs and creating nodes goes through plain HTTPS with the
admin token. The stand-ins, which run in an event loop, use kubernetes_asyncio instead.
"""

from __future__ import annotations

import contextlib
import functools
import json
import pathlib
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any

import yaml

JSON = dict[str, Any]

# Collection paths of the kinds the launcher writes (apiVersion, kind) -> (path template, namespaced).
_RESOURCES: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Namespace"): ("/api/v1/namespaces", False),
    ("v1", "Node"): ("/api/v1/nodes", False),
    ("v1", "Secret"): ("/api/v1/namespaces/{ns}/secrets", True),
    ("v1", "ConfigMap"): ("/api/v1/namespaces/{ns}/configmaps", True),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): (
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        False,
    ),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): (
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        False,
    ),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): (
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
        False,
    ),
    ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy"): (
        "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies",
        False,
    ),
    ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicyBinding"): (
        "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings",
        False,
    ),
    ("gateway.networking.k8s.io/v1", "GatewayClass"): (
        "/apis/gateway.networking.k8s.io/v1/gatewayclasses",
        False,
    ),
    ("gateway.networking.k8s.io/v1", "Gateway"): (
        "/apis/gateway.networking.k8s.io/v1/namespaces/{ns}/gateways",
        True,
    ),
}


class KubeError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Kube:
    """Admin access to one API server: ``get``/``post``/``put``/``patch``/``delete`` on paths."""

    def __init__(self, server: str, token: str, ca_file: pathlib.Path | None = None) -> None:
        self.server = server
        self.token = token
        ctx = ssl.create_default_context(cafile=str(ca_file)) if ca_file else ssl.create_default_context()
        if ca_file is None:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        self._ctx = ctx

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> JSON:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self._ctx, timeout=30) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            with contextlib.suppress(ValueError):
                detail = json.loads(detail).get("message", detail)
            raise KubeError(exc.code, detail) from None
        return json.loads(raw) if raw else {}

    def get(self, path: str) -> JSON:
        return self.request("GET", path)

    def post(self, path: str, body: JSON) -> JSON:
        return self.request("POST", path, body)

    def put(self, path: str, body: JSON) -> JSON:
        return self.request("PUT", path, body)

    def patch(self, path: str, body: JSON) -> JSON:
        return self.request("PATCH", path, body, "application/merge-patch+json")

    def delete(self, path: str) -> JSON:
        return self.request("DELETE", path)

    # -- manifests -------------------------------------------------------------------------

    @staticmethod
    def collection(doc: JSON) -> str:
        key = (doc["apiVersion"], doc["kind"])
        if key not in _RESOURCES:
            raise KeyError(f"the launcher does not know where {key} lives")
        path, namespaced = _RESOURCES[key]
        if namespaced:
            path = path.format(ns=doc["metadata"].get("namespace", "default"))
        return path

    def apply(self, doc: JSON) -> JSON:
        """Create ``doc``, or replace the existing object of that name (keeping its resourceVersion)."""
        coll = self.collection(doc)
        try:
            return self.post(coll, doc)
        except KubeError as exc:
            if exc.status != 409:
                raise
        current = self.get(f"{coll}/{doc['metadata']['name']}")
        meta = {**doc["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}
        doc = {**doc, "metadata": meta}
        return self.put(f"{coll}/{doc['metadata']['name']}", doc)

    def apply_files(self, files: Iterable[pathlib.Path]) -> list[JSON]:
        out = []
        for f in files:
            for doc in yaml.safe_load_all(f.read_text()):
                if doc:
                    out.append(self.apply(doc))
        return out

    def wait_crds_established(self, names: Iterable[str], timeout: float = 30.0) -> None:
        for name in names:
            path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
            self.wait(
                functools.partial(lambda p: _established(self.get(p)), path),
                timeout,
                f"CRD {name} Established",
            )

    @staticmethod
    def wait(check: Callable[[], bool], timeout: float, what: str, interval: float = 0.1) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if check():
                    return
            except KubeError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(interval)


def _established(crd: JSON) -> bool:
    return any(
        c.get("type") == "Established" and c.get("status") == "True"
        for c in crd.get("status", {}).get("conditions", [])
    )
