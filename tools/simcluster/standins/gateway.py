"""The Gateway API controller stand-in (``simcluster.nova.openstack.c5c3.io/gateway-controller``).

GatewayClasses naming it are Accepted, their Gateways Accepted/Programmed, and HTTPRoutes attached
to those Gateways get ``status.parents`` with Accepted and ResolvedRefs (False with
``BackendNotFound`` while a backend Service is missing).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from simcluster.client.asynckube import JSON, ApiError
from simcluster.client.watchcache import key_of
from simcluster.standins.base import Key, StandIn
from simcluster.standins.objects import condition, merge_conditions, object_path, strip_times

GATEWAY = "/apis/gateway.networking.k8s.io/v1"
GATEWAY_CONTROLLER = "simcluster.nova.openstack.c5c3.io/gateway-controller"
GATEWAY_CLASS = "simcluster"


class GatewayController(StandIn):
    watches = (
        f"{GATEWAY}/gatewayclasses",
        f"{GATEWAY}/gateways",
        f"{GATEWAY}/httproutes",
        "/api/v1/services",
    )
    kinds = frozenset({"gatewayclasses", "gateways", "httproutes"})

    def affected(self, kind: str, obj: JSON) -> Iterable[Key]:
        ns, name = key_of(obj)
        if kind == "gatewayclasses":
            for plural in ("gateways", "httproutes"):
                for o in self.store(plural).list():
                    yield (plural, *key_of(o))
        elif kind == "gateways":
            for r in self.store("httproutes").list():
                if (ns, name) in route_parents(r):
                    yield ("httproutes", *key_of(r))
        elif kind == "httproutes":
            for gw_ns, gw_name in route_parents(obj):
                yield ("gateways", gw_ns, gw_name)
        elif kind == "services":
            for r in self.store("httproutes").list():
                if (ns, name) in route_backends(r):
                    yield ("httproutes", *key_of(r))

    async def reconcile(self, kind: str, obj: JSON) -> None:
        if kind == "gatewayclasses":
            await self._gateway_class(obj)
        elif kind == "gateways":
            await self._gateway(obj)
        elif kind == "httproutes":
            await self._route(obj)

    def _our_classes(self) -> set[str]:
        return {
            c["metadata"]["name"]
            for c in self.store("gatewayclasses").list()
            if c.get("spec", {}).get("controllerName") == GATEWAY_CONTROLLER
        }

    def _our_gateway(self, namespace: str, name: str) -> JSON | None:
        gw = self.store("gateways").get(namespace, name)
        if gw is None or gw.get("spec", {}).get("gatewayClassName") not in self._our_classes():
            return None
        return gw

    async def _gateway_class(self, gc: JSON) -> None:
        if gc.get("spec", {}).get("controllerName") != GATEWAY_CONTROLLER:
            return
        gen = gc["metadata"].get("generation")
        conds = [
            condition("Accepted", True, "Accepted", "", gen),
            condition("SupportedVersion", True, "SupportedVersion", "", gen),
        ]
        await self.write_status(GATEWAY, "gatewayclasses", gc, {"conditions": conds}, cluster_scoped=True)

    async def _route(self, route: JSON) -> None:
        meta = route["metadata"]
        if meta.get("deletionTimestamp"):
            return
        gen = meta.get("generation")
        services = self.store("services")
        missing = [f"{ns}/{name}" for ns, name in route_backends(route) if services.get(ns, name) is None]
        parents = [
            p
            for p in route.get("status", {}).get("parents", [])
            if p.get("controllerName") != GATEWAY_CONTROLLER
        ]
        old_ours = {
            repr(sorted(p["parentRef"].items())): p
            for p in route.get("status", {}).get("parents", [])
            if p.get("controllerName") == GATEWAY_CONTROLLER
        }
        for ref in gateway_refs(route):
            if self._our_gateway(ref.get("namespace", meta["namespace"]), ref["name"]) is None:
                continue  # not a Gateway of ours: another controller (or none) answers for it
            resolved = (
                condition("ResolvedRefs", True, "ResolvedRefs", "", gen)
                if not missing
                else condition(
                    "ResolvedRefs",
                    False,
                    "BackendNotFound",
                    f"backend Service(s) not found: {', '.join(missing)}",
                    gen,
                )
            )
            new = [condition("Accepted", True, "Accepted", "", gen), resolved]
            old = old_ours.get(repr(sorted(ref.items())), {}).get("conditions", [])
            parents.append(
                {
                    "parentRef": ref,
                    "controllerName": GATEWAY_CONTROLLER,
                    "conditions": merge_conditions(old, new),
                }
            )
        current = route.get("status", {}).get("parents", [])
        if strip_times(current) == strip_times(parents):
            return
        with contextlib.suppress(ApiError):
            answer = await self.kube.merge_patch(
                object_path(GATEWAY, "httproutes", route) + "/status", {"status": {"parents": parents}}
            )
            self.remember("httproutes", answer)

    async def _gateway(self, gw: JSON) -> None:
        ns, name = key_of(gw)
        if self._our_gateway(ns, name) is None:
            return
        routes = sum(
            1
            for r in self.store("httproutes").list()
            if not r["metadata"].get("deletionTimestamp") and (ns, name) in named_parents(r)
        )
        gen = gw["metadata"].get("generation")
        listeners = [
            {
                "name": listener["name"],
                "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}],
                "attachedRoutes": routes,
                "conditions": [
                    condition("Accepted", True, "Accepted", "", gen),
                    condition("Programmed", True, "Programmed", "", gen),
                    condition("ResolvedRefs", True, "ResolvedRefs", "", gen),
                    condition("Conflicted", False, "NoConflicts", "", gen),
                ],
            }
            for listener in gw.get("spec", {}).get("listeners", [])
        ]
        status = {
            "addresses": [{"type": "IPAddress", "value": "10.0.0.1"}],
            "conditions": [
                condition("Accepted", True, "Accepted", "", gen),
                condition("Programmed", True, "Programmed", "", gen),
            ],
            "listeners": listeners,
        }
        await self.write_status(GATEWAY, "gateways", gw, status)


def gateway_refs(route: JSON) -> list[JSON]:
    return [
        ref
        for ref in route.get("spec", {}).get("parentRefs", [])
        if ref.get("kind", "Gateway") == "Gateway"
        and ref.get("group", "gateway.networking.k8s.io") == "gateway.networking.k8s.io"
    ]


def named_parents(route: JSON) -> set[tuple[str, str]]:
    ns = route["metadata"].get("namespace", "")
    return {(ref.get("namespace", ns), ref["name"]) for ref in gateway_refs(route)}


def route_parents(route: JSON) -> set[tuple[str, str]]:
    """(namespace, name) of the Gateways a route names, and of those its status still lists."""
    ns = route["metadata"].get("namespace", "")
    listed = {
        (p["parentRef"].get("namespace", ns), p["parentRef"].get("name", ""))
        for p in route.get("status", {}).get("parents", [])
        if p.get("controllerName") == GATEWAY_CONTROLLER
    }
    return named_parents(route) | listed


def route_backends(route: JSON) -> list[tuple[str, str]]:
    ns = route["metadata"].get("namespace", "")
    return [
        (ref.get("namespace", ns), ref["name"])
        for rule in route.get("spec", {}).get("rules", [])
        for ref in rule.get("backendRefs", [])
        if ref.get("kind", "Service") == "Service" and ref.get("group", "") in ("", "core")
    ]
