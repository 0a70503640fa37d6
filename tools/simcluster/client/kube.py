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
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import yaml

JSON = dict[str, Any]


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
        self._discovery: dict[str, dict[str, tuple[str, bool]]] = {}

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

    def lines(self, path: str) -> Iterator[str]:
        """The lines of a streamed answer (a pod's log with ``follow=true``) as they come, until the
        server ends it; ``KubeError`` when it refuses."""
        req = urllib.request.Request(self.server + path)
        req.add_header("Authorization", f"Bearer {self.token}")
        try:
            resp = urllib.request.urlopen(req, context=self._ctx, timeout=None)
        except urllib.error.HTTPError as exc:
            raise KubeError(exc.code, exc.read().decode(errors="replace")) from None
        with resp:
            for raw in resp:
                yield raw.decode(errors="replace").rstrip("\n")

    # -- manifests -------------------------------------------------------------------------

    def collection(self, doc: JSON, namespace: str = "default") -> str:
        """The collection path of ``doc``'s kind, found through API discovery (cached per group version)."""
        api_version, kind = doc["apiVersion"], doc["kind"]
        resources = self._discovery.get(api_version)
        if resources is None:
            base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            listing = self.get(base)["resources"]
            resources = {r["kind"]: (r["name"], r["namespaced"]) for r in listing if "/" not in r["name"]}
            self._discovery[api_version] = resources
        if kind not in resources:
            self._discovery.pop(api_version, None)  # a CRD may be installed later
            raise KeyError(f"{api_version} serves no kind {kind}")
        plural, namespaced = resources[kind]
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        if namespaced:
            ns = doc["metadata"].get("namespace") or namespace
            return f"{base}/namespaces/{ns}/{plural}"
        return f"{base}/{plural}"

    def apply(self, doc: JSON, namespace: str = "default", *, ensure_namespace: bool = True) -> JSON:
        """Create ``doc``, or replace the existing object of that name (keeping its resourceVersion).

        Any kind the server serves; namespaced objects without ``metadata.namespace`` go to ``namespace``,
        which is created if missing (``ensure_namespace``).
        """
        coll = self.collection(doc, namespace)
        try:
            return self.post(coll, doc)
        except KubeError as exc:
            if exc.status == 404 and "/namespaces/" in coll and ensure_namespace:
                ns = coll.split("/namespaces/")[1].split("/")[0]
                with contextlib.suppress(KubeError):
                    self.post(
                        "/api/v1/namespaces",
                        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                    )
                return self.apply(doc, namespace, ensure_namespace=False)
            if exc.status != 409:
                raise
        current = self.get(f"{coll}/{doc['metadata']['name']}")
        meta = {**doc["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}
        doc = {**doc, "metadata": meta}
        return self.put(f"{coll}/{doc['metadata']['name']}", doc)

    def apply_files(self, files: Iterable[pathlib.Path], namespace: str = "default") -> list[JSON]:
        """Apply every YAML document of ``files`` in order (a ``kind: List`` is unpacked)."""
        out: list[JSON] = []
        pending_crds: list[str] = []
        for f in files:
            for doc in yaml.safe_load_all(f.read_text()):
                if not doc:
                    continue
                for item in doc.get("items", []) if doc.get("kind") == "List" else [doc]:
                    is_crd = item.get("kind") == "CustomResourceDefinition"
                    if pending_crds and not is_crd:  # a custom resource may follow its CRD
                        self.wait_crds_established(pending_crds)
                        pending_crds = []
                    out.append(self.apply_when_served(item, namespace))
                    if is_crd:
                        pending_crds.append(item["metadata"]["name"])
        return out

    def apply_when_served(self, doc: JSON, namespace: str = "default", timeout: float = 15.0) -> JSON:
        """``apply``, retrying while API discovery does not list the kind yet (a fresh CRD)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.apply(doc, namespace)
            except KeyError:  # discovery lags a freshly established CRD for a moment
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

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
        for c in (crd.get("status") or {}).get("conditions") or []
    )
