"""Names outside the cluster's domain that pods resolve to a Service's ClusterIP (a brownfield
database's ``db.example.org``, a fake driver's console host), served by the cluster's CoreDNS
(``realnode.dns``).

``corefile(aliases)`` is ``dns.COREFILE`` with, in the catch-all block and before its NXDOMAIN, one
``template`` per name: its A record (the address), and an empty NOERROR for its other types (an
AAAA asked beside the A must not say the name does not exist). Each ``template`` is a plugin of its
own in the block's chain: without ``fallthrough`` one whose name does not match ends the query in
SERVFAIL instead of handing it to the next. ``set_aliases`` writes that Corefile
into CoreDNS's ConfigMap and rolls its Deployment (its binary has no ``reload`` plugin: a new pod
reads the new file; the rollout keeps the old pod until the new one is Ready), then waits until each
name resolves to its address from the nodes' namespace.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Mapping
from typing import Any, Protocol

from realnode import dns

CATCH_ALL = "    template ANY ANY {\n        rcode NXDOMAIN\n    }\n"
HASH_ANNOTATION = "realnode.c5c3.io/corefile"


class _Kube(Protocol):
    def get(self, path: str) -> dict[str, Any]: ...

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]: ...


def _template(name: str, address: str) -> str:
    match = "^" + re.escape(name.rstrip(".")) + r"\.$"
    return (
        f"    template IN A {{\n        match {match}\n"
        f'        answer "{{{{ .Name }}}} 5 IN A {address}"\n        fallthrough\n    }}\n'
        f"    template ANY ANY {{\n        match {match}\n"
        "        rcode NOERROR\n        fallthrough\n    }\n"
    )


def corefile(aliases: Mapping[str, str]) -> str:
    """``dns.COREFILE`` answering each name of ``aliases`` (name -> IPv4 address) with its address."""
    if CATCH_ALL not in dns.COREFILE:
        raise AssertionError("dns.COREFILE has no catch-all template to put the aliases before")
    own = "".join(_template(name, address) for name, address in sorted(aliases.items()))
    return dns.COREFILE.replace(CATCH_ALL, own + CATCH_ALL)


def rolled_out(deployment: Mapping[str, Any]) -> bool:
    """Whether the Deployment's pods are all of its current template, Ready, and no other is left."""
    want = deployment["spec"].get("replicas", 1)
    status = deployment.get("status") or {}
    return bool(
        status.get("observedGeneration", 0) >= deployment["metadata"].get("generation", 0)
        and status.get("updatedReplicas") == status.get("replicas") == status.get("readyReplicas") == want
    )


def set_aliases(kube: _Kube, netns: str, aliases: Mapping[str, str], timeout: float = 180.0) -> None:
    """CoreDNS serves ``aliases`` (every one of them: the ConfigMap holds the whole set) once this
    returns; ``netns``: the nodes' network namespace (``/proc/<pid>/ns/net``) to check from."""
    text = corefile(aliases)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    kube.patch(f"/api/v1/namespaces/{dns.NAMESPACE}/configmaps/{dns.NAME}", {"data": {"Corefile": text}})
    deployment = f"/apis/apps/v1/namespaces/{dns.NAMESPACE}/deployments/{dns.NAME}"
    kube.patch(deployment, {"spec": {"template": {"metadata": {"annotations": {HASH_ANNOTATION: digest}}}}})
    deadline = time.monotonic() + timeout
    while not rolled_out(kube.get(deployment)):  # no old pod left to answer from the old file
        if time.monotonic() > deadline:
            raise TimeoutError(f"CoreDNS not rolled out with the aliases in {timeout:.0f} s")
        time.sleep(0.5)
    for name, address in aliases.items():
        while True:
            try:
                if dns.query(netns, name, timeout=1.0)[1] == [address]:
                    break
            except OSError:  # no answer while the pods change over
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} not resolved to {address} by cluster DNS in {timeout:.0f} s")
            time.sleep(0.5)
