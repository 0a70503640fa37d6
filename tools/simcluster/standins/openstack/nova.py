"""The fake Nova compute API: version documents, os-services, os-hypervisors and servers, with the
real paths, microversion rules and status codes of what the NovaCompute controller calls
(``../shared/spec/novacompute-crd.md`` §12, §14; the module docstring of the package lists them)."""

from __future__ import annotations

import uuid

from aiohttp import web

from simcluster.standins.openstack.api import (
    MAX_MICROVERSION,
    MIN_MICROVERSION,
    authorize,
    mv_str,
    nova_error,
)
from simcluster.standins.openstack.cloud import API_BINARIES, JSON, Cloud, Hypervisor, Service, now


class NovaAPI:
    def __init__(self, cloud: Cloud) -> None:
        self.cloud = cloud

    def add_routes(self, r: web.UrlDispatcher) -> None:
        r.add_get("/", self._nova_versions)
        r.add_get("/v2.1", self._nova_version)
        r.add_get("/v2.1/", self._nova_version)
        r.add_get("/v2.1/os-services", self._services_list)
        r.add_put("/v2.1/os-services/{id}", self._services_update)
        r.add_delete("/v2.1/os-services/{id}", self._services_delete)
        r.add_get("/v2.1/os-hypervisors", self._hypervisors_list)
        r.add_get("/v2.1/os-hypervisors/detail", self._hypervisors_detail)
        r.add_get("/v2.1/servers", self._servers_list)
        r.add_get("/v2.1/servers/detail", self._servers_detail)

    async def _nova_versions(self, request: web.Request) -> web.Response:
        return web.json_response({"versions": [self._nova_version_doc()]})

    async def _nova_version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": self._nova_version_doc()})

    def _nova_version_doc(self) -> JSON:
        return {
            "id": "v2.1",
            "status": "CURRENT",
            "version": mv_str(MAX_MICROVERSION),
            "min_version": mv_str(MIN_MICROVERSION),
            "updated": "2013-07-23T11:33:21Z",
            "links": [{"rel": "self", "href": f"{self.cloud.nova_url}/v2.1/"}],
        }

    # services

    async def _services_list(self, request: web.Request) -> web.Response:
        mv = authorize(self.cloud, request, admin=True)
        binary, host = request.query.get("binary"), request.query.get("host")
        out = []
        with self.cloud.lock:
            for svc in self.cloud.services.values():
                if (binary and svc.binary != binary) or (host and svc.host != host):
                    continue
                if svc.binary in API_BINARIES:  # not RPC services: Nova never lists them (bug 1543625)
                    continue
                if svc.host in self.cloud.down_cell_hosts:
                    if mv >= (2, 69):
                        out.append({"binary": svc.binary, "host": svc.host, "status": "UNKNOWN"})
                    continue
                out.append(service_view(svc, mv))
        return web.json_response({"services": out})

    def _find_service(self, service_id: str, mv: tuple[int, int]) -> Service:
        with self.cloud.lock:
            if mv >= (2, 53):
                try:
                    uuid.UUID(service_id)
                except ValueError:
                    raise nova_error(400, "Bad Request", f"Invalid uuid {service_id}") from None
                svc = self.cloud.services.get(service_id)
            else:
                svc = next((s for s in self.cloud.services.values() if str(s.id) == service_id), None)
        if svc is None:
            raise nova_error(404, "Not Found", f"Service {service_id} could not be found.")
        return svc

    async def _services_update(self, request: web.Request) -> web.Response:
        mv = authorize(self.cloud, request, admin=True)
        if mv < (2, 53):
            raise nova_error(404, "Not Found", "The resource could not be found.")
        svc = self._find_service(request.match_info["id"], mv)
        try:
            body = await request.json()
        except ValueError:
            raise nova_error(400, "Bad Request", "Malformed request body") from None
        unknown = set(body) - {"status", "disabled_reason", "forced_down"}
        if not isinstance(body, dict) or not body or unknown:
            raise nova_error(400, "Bad Request", "Invalid input for field/attribute.")
        status = body.get("status")
        if status not in (None, "enabled", "disabled"):
            raise nova_error(
                400, "Bad Request", f"Invalid input for field/attribute status. Value: {status}."
            )
        if "disabled_reason" in body and status != "disabled":
            raise nova_error(
                400,
                "Bad Request",
                "Specifying 'disabled_reason' with status other than 'disabled' is invalid.",
            )
        with self.cloud.lock:
            if status == "disabled":
                svc.status, svc.disabled_reason = "disabled", body.get("disabled_reason")
            elif status == "enabled":
                svc.status, svc.disabled_reason = "enabled", None
            if "forced_down" in body:
                svc.forced_down = bool(body["forced_down"])
                svc.state = "down" if svc.forced_down else svc.state
            svc.updated_at = now()
            view = service_view(svc, mv)
        return web.json_response({"service": view})

    async def _services_delete(self, request: web.Request) -> web.Response:
        mv = authorize(self.cloud, request, admin=True)
        with self.cloud.lock:
            gone = self.cloud.services.get(request.match_info["id"])
            if gone is not None and gone.host in self.cloud.gone_on_delete:
                del self.cloud.services[gone.uuid]  # the race the spec's 404 rule covers
        svc = self._find_service(request.match_info["id"], mv)
        with self.cloud.lock:
            if svc.binary == "nova-compute":
                if any(s.host == svc.host for s in self.cloud.servers):
                    raise nova_error(
                        409,
                        "Conflict",
                        "Unable to delete compute service that is hosting instances. "
                        "Migrate or delete the instances first.",
                    )
                if self.cloud.migrations.get(svc.host):
                    raise nova_error(
                        409,
                        "Conflict",
                        "Unable to delete compute service that has in-progress migrations. "
                        "Complete the migrations or delete the instances first.",
                    )
            del self.cloud.services[svc.uuid]
            for hv_id in [k for k, hv in self.cloud.hypervisors.items() if hv.service_uuid == svc.uuid]:
                del self.cloud.hypervisors[hv_id]
            for agg in self.cloud.aggregates.values():
                if svc.host in agg.hosts:
                    agg.hosts.remove(svc.host)
        return web.Response(status=204)

    # hypervisors

    def _hypervisor_view(self, hv: Hypervisor, mv: tuple[int, int], detail: bool) -> JSON:
        with self.cloud.lock:
            svc = self.cloud.services.get(hv.service_uuid)
        view: JSON = {
            "id": hv.uuid if mv >= (2, 53) else hv.id,
            "hypervisor_hostname": f"{hv.host}.localdomain",
            "state": svc.state if svc else "down",
            "status": svc.status if svc else "disabled",
        }
        if detail:
            view.update(
                {
                    "hypervisor_type": "QEMU",
                    "hypervisor_version": 8002002,
                    "host_ip": "10.0.0.1",
                    "service": {
                        "host": hv.host,
                        "id": hv.service_uuid if mv >= (2, 53) else hv.service_id,
                        "disabled_reason": svc.disabled_reason if svc else None,
                    },
                }
            )
            if mv >= (2, 88):
                view["uptime"] = " 10:00:00 up 1 day,  1 user,  load average: 0.10, 0.10, 0.10"
            else:
                view.update(
                    {
                        "vcpus": 32,
                        "vcpus_used": 0,
                        "memory_mb": 262144,
                        "memory_mb_used": 512,
                        "local_gb": 1000,
                        "local_gb_used": 0,
                        "free_ram_mb": 261632,
                        "free_disk_gb": 1000,
                        "current_workload": 0,
                        "running_vms": sum(1 for s in self.cloud.servers if s.host == hv.host),
                        "disk_available_least": 1000,
                        "cpu_info": "{}",
                    }
                )
        return view

    async def _hypervisors_list(self, request: web.Request) -> web.Response:
        return await self._hypervisors(request, detail=False)

    async def _hypervisors_detail(self, request: web.Request) -> web.Response:
        return await self._hypervisors(request, detail=True)

    async def _hypervisors(self, request: web.Request, *, detail: bool) -> web.Response:
        mv = authorize(self.cloud, request, admin=True)
        q = request.query
        if ("limit" in q or "marker" in q) and mv < (2, 33):
            raise nova_error(
                400,
                "Bad Request",
                "Additional properties are not allowed ('limit', 'marker' were unexpected)",
            )
        try:
            limit = int(q.get("limit", "1000"))
        except ValueError:
            raise nova_error(400, "Bad Request", "Invalid input for query parameters limit.") from None
        if limit < 0:
            raise nova_error(400, "Bad Request", "Invalid input for query parameters limit.")
        with self.cloud.lock:
            ordered = sorted(
                self.cloud.hypervisors.values(),
                key=lambda h: h.uuid if mv >= (2, 53) else str(h.id).zfill(12),
            )
            keys = [h.uuid if mv >= (2, 53) else str(h.id) for h in ordered]
            start = 0
            if "marker" in q:
                if q["marker"] not in keys:
                    raise nova_error(400, "Bad Request", f"marker [{q['marker']}] not found")
                start = keys.index(q["marker"]) + 1
            window = ordered[start : start + limit]
            # Nova applies the limit, then drops compute nodes that have no host mapping.
            shown = [self._hypervisor_view(h, mv, detail) for h in window if h.mapped]
        body: JSON = {"hypervisors": shown}
        if mv >= (2, 33) and len(window) == limit and window:
            last = window[-1].uuid if mv >= (2, 53) else str(window[-1].id)
            suffix = "/detail" if detail else ""
            body["hypervisors_links"] = [
                {
                    "rel": "next",
                    "href": f"{self.cloud.nova_url}/v2.1/os-hypervisors{suffix}?limit={limit}&marker={last}",
                }
            ]
        return web.json_response(body)

    # servers

    async def _servers_list(self, request: web.Request) -> web.Response:
        return await self._servers(request, detail=False)

    async def _servers_detail(self, request: web.Request) -> web.Response:
        return await self._servers(request, detail=True)

    async def _servers(self, request: web.Request, *, detail: bool) -> web.Response:
        q = request.query
        admin_filter = "host" in q or q.get("all_tenants") not in (None, "0", "false", "False")
        authorize(self.cloud, request, admin=admin_filter)
        with self.cloud.lock:
            matches = [s for s in self.cloud.servers if "host" not in q or s.host == q["host"]]
        limit = int(q.get("limit", "1000"))
        out = []
        for s in matches[:limit]:
            v: JSON = {
                "id": s.id,
                "name": s.name,
                "links": [{"rel": "self", "href": f"{self.cloud.nova_url}/v2.1/servers/{s.id}"}],
            }
            if detail:
                v.update({"status": s.status, "tenant_id": s.tenant_id, "OS-EXT-SRV-ATTR:host": s.host})
            out.append(v)
        return web.json_response({"servers": out})


def service_view(svc: Service, mv: tuple[int, int]) -> JSON:
    view: JSON = {
        "id": svc.uuid if mv >= (2, 53) else svc.id,
        "binary": svc.binary,
        "host": svc.host,
        "zone": svc.zone,
        "status": svc.status,
        "state": svc.state,
        "updated_at": svc.updated_at,
        "disabled_reason": svc.disabled_reason,
    }
    if mv >= (2, 11):
        view["forced_down"] = svc.forced_down
    return view
