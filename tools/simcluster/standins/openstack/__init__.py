"""A fake Keystone v3 and Nova compute API on 127.0.0.1, with in-memory state and a call log.

It speaks the real paths, microversion headers and status codes of what the NovaCompute
controller calls (../shared/spec/novacompute-crd.md §12, §14):

Keystone (own port)  POST /v3/auth/tokens (password or application_credential) -> 201 +
                     X-Subject-Token + catalog with the compute endpoint; GET /v3.
Nova (own port)      GET  /v2.1/os-services[?binary=&host=]       ids are UUIDs from 2.53; from 2.69 a
                                                                  host in a down cell is listed with
                                                                  status UNKNOWN (omitted before 2.69);
                                                                  nova-osapi_compute and nova-metadata
                                                                  records are left out, as Nova does
                     PUT  /v2.1/os-services/{uuid}                 (2.53+) status/disabled_reason/forced_down
                     DELETE /v2.1/os-services/{uuid}               404 unknown; 409 with instances or
                                                                  migrations on the host
                     GET  /v2.1/os-hypervisors[/detail]            ?limit&marker (2.33+), links/next, UUID
                                                                  ids (2.53+), 2.88 fields; unmapped
                                                                  hosts are dropped after the limit
                     GET  /v2.1/servers[/detail]?all_tenants=1&host=  (host filter admin-only)
                     GET/POST /v2.1/os-aggregates, GET/PUT/DELETE /v2.1/os-aggregates/{id},
                     POST /v2.1/os-aggregates/{id}/action  add_host / remove_host / set_metadata
                     GET  /v2.1/ (version document)

Every request is logged (``calls()``) so a test can assert "exactly one disable, no enable, no
migration". ``set_fault`` makes either API answer 500 or drop connections for a while, and
``go_offline`` closes the listening socket (connection refused) until ``go_online``.
Thread-safe: the server runs in an event loop of its own (see ``simcluster.platform.launch``), tests
call these methods from theirs.
"""

from __future__ import annotations

import itertools
import json
import secrets
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from aiohttp import web

JSON = dict[str, Any]
MIN_MICROVERSION = (2, 1)
MAX_MICROVERSION = (2, 100)
ADMIN_ROLE = "admin"
API_BINARIES = ("nova-osapi_compute", "nova-metadata")
Fault = Literal["error", "reset"]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")


def _mv_str(mv: tuple[int, int]) -> str:
    return f"{mv[0]}.{mv[1]}"


@dataclass
class Call:
    """One request the fake received."""

    api: Literal["keystone", "nova"]
    method: str
    path: str
    query: dict[str, str]
    microversion: str | None
    body: Any
    status: int
    at: float = field(default_factory=time.monotonic)


@dataclass
class User:
    name: str
    password: str
    domain: str = "Default"
    project: str = "service"
    project_domain: str = "Default"
    roles: tuple[str, ...] = (ADMIN_ROLE,)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass
class Service:
    host: str
    zone: str = "nova"
    status: str = "enabled"
    state: str = "up"
    disabled_reason: str | None = None
    forced_down: bool = False
    binary: str = "nova-compute"
    id: int = 0
    uuid: str = field(default_factory=lambda: str(uuid.uuid4()))
    updated_at: str = field(default_factory=_now)


@dataclass
class Hypervisor:
    host: str
    service_uuid: str
    service_id: int
    mapped: bool = True
    id: int = 0
    uuid: str = field(default_factory=lambda: str(uuid.uuid4()))


@dataclass
class Server:
    host: str
    name: str
    tenant_id: str
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    status: str = "ACTIVE"


@dataclass
class Aggregate:
    id: int
    name: str
    availability_zone: str | None
    hosts: list[str] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)
    uuid: str = field(default_factory=lambda: str(uuid.uuid4()))
    created_at: str = field(default_factory=_now)
    updated_at: str | None = None


class FakeOpenStack:
    """State + two aiohttp apps. ``await start()`` in an event loop; ``await stop()`` there too."""

    def __init__(self, *, host: str = "127.0.0.1", keystone_port: int = 0, nova_port: int = 0) -> None:
        self.host = host
        self.keystone_port = keystone_port
        self.nova_port = nova_port
        self._lock = threading.RLock()
        self._calls: list[Call] = []
        self.users: dict[str, User] = {}
        self.app_credentials: dict[str, tuple[str, str, str]] = {}  # id -> (secret, name, user name)
        self.tokens: dict[str, User] = {}
        self.services: dict[str, Service] = {}
        self.hypervisors: dict[str, Hypervisor] = {}
        self.servers: list[Server] = []
        self.aggregates: dict[int, Aggregate] = {}
        self.migrations: dict[str, int] = {}  # host -> in-progress migrations
        self.down_cell_hosts: set[str] = set()
        self.agent_hosts: set[str] = set()  # hosts whose service the compute agent registered
        self._faults: dict[str, tuple[Fault, float | None]] = {}
        self._ids = itertools.count(1)
        self._runners: dict[str, web.AppRunner] = {}
        self._sites: dict[str, web.TCPSite] = {}
        self.project_id = uuid.uuid4().hex

    # -- lifecycle (call in the server's loop) -----------------------------------------------

    async def start(self) -> FakeOpenStack:
        for api, handler in (("keystone", self._keystone_app()), ("nova", self._nova_app())):
            runner = web.AppRunner(handler, access_log=None)
            await runner.setup()
            self._runners[api] = runner
            await self._listen(api)
        return self

    async def stop(self) -> None:
        for runner in self._runners.values():
            await runner.cleanup()
        self._runners.clear()
        self._sites.clear()

    async def _listen(self, api: str) -> None:
        port = self.keystone_port if api == "keystone" else self.nova_port
        site = web.TCPSite(self._runners[api], self.host, port, reuse_address=True)
        await site.start()
        actual = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        if api == "keystone":
            self.keystone_port = actual
        else:
            self.nova_port = actual
        self._sites[api] = site

    async def go_offline(self, api: Literal["keystone", "nova"] = "nova") -> None:
        """Close the listening socket: connections are refused until ``go_online``."""
        with self._lock:  # requests on kept-alive connections are dropped too
            self._faults[api] = ("reset", None)
        site = self._sites.pop(api, None)
        if site is not None:
            await site.stop()

    async def go_online(self, api: Literal["keystone", "nova"] = "nova") -> None:
        if api not in self._sites:
            await self._listen(api)
        with self._lock:
            self._faults.pop(api, None)

    # -- URLs --------------------------------------------------------------------------------

    @property
    def keystone_url(self) -> str:
        """What a Nova's ``spec.keystoneEndpoint`` would hold (the operator appends /v3)."""
        return f"http://{self.host}:{self.keystone_port}"

    @property
    def nova_url(self) -> str:
        """The Nova API base URL; every path starts with /v2.1."""
        return f"http://{self.host}:{self.nova_port}"

    # -- test controls (thread-safe) ---------------------------------------------------------

    def add_user(self, name: str, password: str, **kw: Any) -> User:
        with self._lock:
            user = User(name, password, **kw)
            self.users[name] = user
            return user

    def add_application_credential(self, user: str, name: str = "nova-operator") -> tuple[str, str]:
        """Returns (id, secret)."""
        with self._lock:
            cred_id, secret = uuid.uuid4().hex, secrets.token_urlsafe(24)
            self.app_credentials[cred_id] = (secret, name, user)
            return cred_id, secret

    def add_compute(
        self,
        host: str,
        *,
        zone: str = "nova",
        status: str = "enabled",
        state: str = "up",
        mapped: bool = True,
        servers: int = 0,
        by_agent: bool = False,
    ) -> Service:
        """Register a nova-compute service (and its hypervisor record) as nova-compute would on start."""
        with self._lock:
            svc = Service(host=host, zone=zone, status=status, state=state, id=next(self._ids))
            self.services[svc.uuid] = svc
            if by_agent:
                self.agent_hosts.add(host)
            hv = Hypervisor(
                host=host, service_uuid=svc.uuid, service_id=svc.id, mapped=mapped, id=next(self._ids)
            )
            self.hypervisors[hv.uuid] = hv
            for i in range(servers):
                self.servers.append(Server(host=host, name=f"{host}-vm-{i}", tenant_id=self.project_id))
            return svc

    def add_service(self, host: str, binary: str, *, state: str = "up") -> Service:
        """Register a service of another binary (nova-scheduler, nova-conductor, ...) as its process
        would on start. Like Nova, the list leaves out nova-osapi_compute and nova-metadata records."""
        with self._lock:
            svc = Service(host=host, binary=binary, state=state, zone="internal", id=next(self._ids))
            self.services[svc.uuid] = svc
            return svc

    def services_of(self, binary: str) -> list[Service]:
        with self._lock:
            return [s for s in self.services.values() if s.binary == binary]

    def revoke_tokens(self) -> None:
        """Every issued token becomes invalid (Nova answers 401 until a new one is fetched)."""
        with self._lock:
            self.tokens.clear()

    def map_all_hosts(self) -> list[str]:
        """``nova-manage cell_v2 discover_hosts``: map every registered, unmapped compute host."""
        with self._lock:
            hosts = []
            for hv in self.hypervisors.values():
                if not hv.mapped:
                    hv.mapped = True
                    hosts.append(hv.host)
            return hosts

    def compute_services(self) -> list[Service]:
        with self._lock:
            return [s for s in self.services.values() if s.binary == "nova-compute"]

    def set_service_state(self, host: str, state: str) -> None:
        with self._lock:
            for svc in self.services.values():
                if svc.host == host:
                    svc.state = state
                    svc.updated_at = _now()

    def map_host(self, host: str) -> None:
        """What ``nova-manage cell_v2 discover_hosts`` does for a host."""
        with self._lock:
            for hv in self.hypervisors.values():
                if hv.host == host:
                    hv.mapped = True

    def set_servers(self, host: str, count: int) -> None:
        with self._lock:
            self.servers = [s for s in self.servers if s.host != host]
            for i in range(count):
                self.servers.append(Server(host=host, name=f"{host}-vm-{i}", tenant_id=self.project_id))

    def set_migrations(self, host: str, count: int) -> None:
        with self._lock:
            self.migrations[host] = count

    def set_cell_down(self, hosts: set[str]) -> None:
        """Services on these hosts sit in a cell that does not answer."""
        with self._lock:
            self.down_cell_hosts = set(hosts)

    def service_by_host(self, host: str) -> Service | None:
        with self._lock:
            return next((s for s in self.services.values() if s.host == host), None)

    def set_fault(
        self,
        fault: Fault | None,
        *,
        api: Literal["keystone", "nova", "all"] = "all",
        seconds: float | None = None,
    ) -> None:
        """``error``: answer 500; ``reset``: drop the connection; None: heal. ``seconds`` bounds it."""
        with self._lock:
            for name in ("keystone", "nova") if api == "all" else (api,):
                if fault is None:
                    self._faults.pop(name, None)
                else:
                    self._faults[name] = (fault, time.monotonic() + seconds if seconds else None)

    def calls(self, method: str | None = None, path: str | None = None, api: str | None = None) -> list[Call]:
        """Logged calls, filtered by method, path prefix and API."""
        with self._lock:
            return [
                c
                for c in self._calls
                if (method is None or c.method == method)
                and (path is None or c.path.startswith(path))
                and (api is None or c.api == api)
            ]

    def clear_calls(self) -> None:
        with self._lock:
            self._calls.clear()

    # -- plumbing ----------------------------------------------------------------------------

    def _active_fault(self, api: str) -> Fault | None:
        with self._lock:
            entry = self._faults.get(api)
            if entry is None:
                return None
            fault, until = entry
            if until is not None and time.monotonic() > until:
                del self._faults[api]
                return None
            return fault

    def _middleware(self, api: Literal["keystone", "nova"]) -> Callable[..., Awaitable[web.StreamResponse]]:
        @web.middleware
        async def mw(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            if request.path.startswith("/_sim/"):
                try:
                    return await handler(request)
                except ApiFault as exc:
                    return exc.response()
            raw = await request.read()
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
            try:
                mv = _requested_microversion(request) if api == "nova" else None
            except ApiFault as exc:
                self._log(api, request, None, body, exc.status)
                return exc.response()
            fault = self._active_fault(api)
            if fault == "reset":
                self._log(api, request, mv, body, 0)
                if request.transport is not None:
                    request.transport.close()
                raise ConnectionResetError("fault injected")
            resp: web.StreamResponse
            if fault == "error":
                resp = _error(500, "Internal Server Error", "fault injected by the test").response()
            else:
                try:
                    resp = await handler(request)
                except ApiFault as exc:
                    resp = exc.response()
            if api == "nova" and mv is not None:
                resp.headers["OpenStack-API-Version"] = f"compute {_mv_str(mv)}"
                resp.headers["X-OpenStack-Nova-API-Version"] = _mv_str(mv)
                resp.headers["Vary"] = "OpenStack-API-Version, X-OpenStack-Nova-API-Version"
            self._log(api, request, mv, body, resp.status)
            return resp

        return mw

    def _log(
        self,
        api: Literal["keystone", "nova"],
        request: web.Request,
        mv: tuple[int, int] | None,
        body: Any,
        status: int,
    ) -> None:
        if api == "keystone":
            body = _redact(body)
        with self._lock:
            self._calls.append(
                Call(
                    api,
                    request.method,
                    request.path,
                    dict(request.query),
                    _mv_str(mv) if mv else None,
                    body,
                    status,
                )
            )

    # -- Keystone ----------------------------------------------------------------------------

    def _keystone_app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware("keystone")])
        app.router.add_get("/", self._ks_versions)
        app.router.add_get("/v3", self._ks_v3)
        app.router.add_get("/v3/", self._ks_v3)
        app.router.add_post("/v3/auth/tokens", self._ks_tokens)
        return app

    async def _ks_versions(self, request: web.Request) -> web.Response:
        return web.json_response({"versions": {"values": [self._ks_version_doc()]}}, status=300)

    async def _ks_v3(self, request: web.Request) -> web.Response:
        return web.json_response({"version": self._ks_version_doc()})

    def _ks_version_doc(self) -> JSON:
        return {
            "id": "v3.14",
            "status": "stable",
            "updated": "2020-04-07T00:00:00Z",
            "links": [{"rel": "self", "href": f"{self.keystone_url}/v3/"}],
            "media-types": [
                {"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}
            ],
        }

    async def _ks_tokens(self, request: web.Request) -> web.Response:
        try:
            identity = (await request.json())["auth"]["identity"]
            methods = identity["methods"]
        except (ValueError, KeyError, TypeError):
            return _ks_error(400, "Bad Request", "Expecting to find auth.identity in the request body.")
        user: User | None = None
        with self._lock:
            if "password" in methods:
                u = identity.get("password", {}).get("user", {})
                candidate = self.users.get(u.get("name", "")) or next(
                    (x for x in self.users.values() if x.id == u.get("id")), None
                )
                domain = (u.get("domain") or {}).get("name") or (u.get("domain") or {}).get("id")
                if (
                    candidate
                    and candidate.password == u.get("password")
                    and (u.get("id") or domain in (candidate.domain, "default"))
                ):
                    user = candidate
            elif "application_credential" in methods:
                ac = identity.get("application_credential", {})
                entry = self.app_credentials.get(ac.get("id", ""))
                if entry is None and ac.get("name"):
                    user_name = (ac.get("user") or {}).get("name")
                    entry = next(
                        (
                            e
                            for e in self.app_credentials.values()
                            if e[1] == ac["name"] and e[2] == user_name
                        ),
                        None,
                    )
                if entry and entry[0] == ac.get("secret"):
                    user = self.users.get(entry[2])
            scope = ((await request.json())["auth"].get("scope") or {}).get("project") or {}
            if user is not None and scope.get("name") and scope["name"] != user.project:
                user = None  # not a member of that project
            if user is None:
                return _ks_error(401, "Unauthorized", "The request you have made requires authentication.")
            token = "gAAAAA" + secrets.token_urlsafe(32)
            self.tokens[token] = user
        now = datetime.now(UTC)
        body = {
            "token": {
                "methods": methods,
                "user": {
                    "id": user.id,
                    "name": user.name,
                    "domain": {"id": "default", "name": user.domain},
                    "password_expires_at": None,
                },
                "project": {
                    "id": self.project_id,
                    "name": user.project,
                    "domain": {"id": "default", "name": user.project_domain},
                },
                "roles": [{"id": uuid.uuid5(uuid.NAMESPACE_DNS, r).hex, "name": r} for r in user.roles],
                "is_domain": False,
                "audit_ids": [secrets.token_urlsafe(16)],
                "issued_at": now.strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
                "expires_at": now.replace(year=now.year + 1).strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
                "catalog": self._catalog(),
            }
        }
        return web.json_response(body, status=201, headers={"X-Subject-Token": token})

    def _catalog(self) -> list[JSON]:
        def entry(type_: str, name: str, url: str) -> JSON:
            return {
                "id": uuid.uuid5(uuid.NAMESPACE_URL, url).hex,
                "type": type_,
                "name": name,
                "endpoints": [
                    {
                        "id": uuid.uuid5(uuid.NAMESPACE_URL, url + i).hex,
                        "interface": i,
                        "region": "RegionOne",
                        "region_id": "RegionOne",
                        "url": url,
                    }
                    for i in ("public", "internal", "admin")
                ],
            }

        return [
            entry("identity", "keystone", f"{self.keystone_url}/v3"),
            entry("compute", "nova", f"{self.nova_url}/v2.1"),
        ]

    # -- Nova --------------------------------------------------------------------------------

    def _nova_app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware("nova")])
        r = app.router
        r.add_get("/_sim/calls", self._sim_calls)
        r.add_get("/_sim/state", self._sim_state)
        r.add_post("/_sim/fault", self._sim_fault)
        r.add_post("/_sim/computes", self._sim_computes)
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
        r.add_get("/v2.1/os-aggregates", self._aggregates_list)
        r.add_post("/v2.1/os-aggregates", self._aggregates_create)
        r.add_get("/v2.1/os-aggregates/{id}", self._aggregates_show)
        r.add_put("/v2.1/os-aggregates/{id}", self._aggregates_update)
        r.add_delete("/v2.1/os-aggregates/{id}", self._aggregates_delete)
        r.add_post("/v2.1/os-aggregates/{id}/action", self._aggregates_action)
        return app

    def _auth(self, request: web.Request, *, admin: bool = False) -> tuple[int, int]:
        """Checks the token (401), the microversion (406) and, if asked, the admin role (403)."""
        token = request.headers.get("X-Auth-Token", "")
        with self._lock:
            user = self.tokens.get(token)
        if user is None:
            raise _error(401, "Unauthorized", "The request you have made requires authentication.")
        mv = _requested_microversion(request)
        if mv < MIN_MICROVERSION or mv > MAX_MICROVERSION:
            raise _error(
                406,
                "Not Acceptable",
                f"Version {_mv_str(mv)} is not supported by the API. Minimum is {_mv_str(MIN_MICROVERSION)} "
                f"and maximum is {_mv_str(MAX_MICROVERSION)}.",
            )
        if admin and ADMIN_ROLE not in user.roles:
            raise _error(
                403, "Forbidden", f"Policy doesn't allow {request.method} {request.path} to be performed."
            )
        return mv

    async def _nova_versions(self, request: web.Request) -> web.Response:
        return web.json_response({"versions": [self._nova_version_doc()]})

    async def _nova_version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": self._nova_version_doc()})

    def _nova_version_doc(self) -> JSON:
        return {
            "id": "v2.1",
            "status": "CURRENT",
            "version": _mv_str(MAX_MICROVERSION),
            "min_version": _mv_str(MIN_MICROVERSION),
            "updated": "2013-07-23T11:33:21Z",
            "links": [{"rel": "self", "href": f"{self.nova_url}/v2.1/"}],
        }

    # services

    def _service_view(self, svc: Service, mv: tuple[int, int]) -> JSON:
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

    async def _services_list(self, request: web.Request) -> web.Response:
        mv = self._auth(request, admin=True)
        binary, host = request.query.get("binary"), request.query.get("host")
        out = []
        with self._lock:
            for svc in self.services.values():
                if (binary and svc.binary != binary) or (host and svc.host != host):
                    continue
                if svc.binary in API_BINARIES:  # not RPC services: Nova never lists them (bug 1543625)
                    continue
                if svc.host in self.down_cell_hosts:
                    if mv >= (2, 69):
                        out.append({"binary": svc.binary, "host": svc.host, "status": "UNKNOWN"})
                    continue
                out.append(self._service_view(svc, mv))
        return web.json_response({"services": out})

    def _find_service(self, service_id: str, mv: tuple[int, int]) -> Service:
        with self._lock:
            if mv >= (2, 53):
                try:
                    uuid.UUID(service_id)
                except ValueError:
                    raise _error(400, "Bad Request", f"Invalid uuid {service_id}") from None
                svc = self.services.get(service_id)
            else:
                svc = next((s for s in self.services.values() if str(s.id) == service_id), None)
        if svc is None:
            raise _error(404, "Not Found", f"Service {service_id} could not be found.")
        return svc

    async def _services_update(self, request: web.Request) -> web.Response:
        mv = self._auth(request, admin=True)
        if mv < (2, 53):
            raise _error(404, "Not Found", "The resource could not be found.")
        svc = self._find_service(request.match_info["id"], mv)
        try:
            body = await request.json()
        except ValueError:
            raise _error(400, "Bad Request", "Malformed request body") from None
        unknown = set(body) - {"status", "disabled_reason", "forced_down"}
        if not isinstance(body, dict) or not body or unknown:
            raise _error(400, "Bad Request", "Invalid input for field/attribute.")
        status = body.get("status")
        if status not in (None, "enabled", "disabled"):
            raise _error(400, "Bad Request", f"Invalid input for field/attribute status. Value: {status}.")
        if "disabled_reason" in body and status != "disabled":
            raise _error(
                400,
                "Bad Request",
                "Specifying 'disabled_reason' with status other than 'disabled' is invalid.",
            )
        with self._lock:
            if status == "disabled":
                svc.status, svc.disabled_reason = "disabled", body.get("disabled_reason")
            elif status == "enabled":
                svc.status, svc.disabled_reason = "enabled", None
            if "forced_down" in body:
                svc.forced_down = bool(body["forced_down"])
                svc.state = "down" if svc.forced_down else svc.state
            svc.updated_at = _now()
            view = self._service_view(svc, mv)
        return web.json_response({"service": view})

    async def _services_delete(self, request: web.Request) -> web.Response:
        mv = self._auth(request, admin=True)
        svc = self._find_service(request.match_info["id"], mv)
        with self._lock:
            if svc.binary == "nova-compute":
                if any(s.host == svc.host for s in self.servers):
                    raise _error(
                        409,
                        "Conflict",
                        "Unable to delete compute service that is hosting instances. "
                        "Migrate or delete the instances first.",
                    )
                if self.migrations.get(svc.host):
                    raise _error(
                        409,
                        "Conflict",
                        "Unable to delete compute service that has in-progress migrations. "
                        "Complete the migrations or delete the instances first.",
                    )
            del self.services[svc.uuid]
            for hv_id in [k for k, hv in self.hypervisors.items() if hv.service_uuid == svc.uuid]:
                del self.hypervisors[hv_id]
            for agg in self.aggregates.values():
                if svc.host in agg.hosts:
                    agg.hosts.remove(svc.host)
        return web.Response(status=204)

    # hypervisors

    def _hypervisor_view(self, hv: Hypervisor, mv: tuple[int, int], detail: bool) -> JSON:
        with self._lock:
            svc = self.services.get(hv.service_uuid)
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
                        "running_vms": sum(1 for s in self.servers if s.host == hv.host),
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
        mv = self._auth(request, admin=True)
        q = request.query
        if ("limit" in q or "marker" in q) and mv < (2, 33):
            raise _error(
                400,
                "Bad Request",
                "Additional properties are not allowed ('limit', 'marker' were unexpected)",
            )
        try:
            limit = int(q.get("limit", "1000"))
        except ValueError:
            raise _error(400, "Bad Request", "Invalid input for query parameters limit.") from None
        if limit < 0:
            raise _error(400, "Bad Request", "Invalid input for query parameters limit.")
        with self._lock:
            ordered = sorted(
                self.hypervisors.values(), key=lambda h: h.uuid if mv >= (2, 53) else str(h.id).zfill(12)
            )
            keys = [h.uuid if mv >= (2, 53) else str(h.id) for h in ordered]
            start = 0
            if "marker" in q:
                if q["marker"] not in keys:
                    raise _error(400, "Bad Request", f"marker [{q['marker']}] not found")
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
                    "href": f"{self.nova_url}/v2.1/os-hypervisors{suffix}?limit={limit}&marker={last}",
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
        self._auth(request, admin=admin_filter)
        with self._lock:
            matches = [s for s in self.servers if "host" not in q or s.host == q["host"]]
        limit = int(q.get("limit", "1000"))
        out = []
        for s in matches[:limit]:
            v: JSON = {
                "id": s.id,
                "name": s.name,
                "links": [{"rel": "self", "href": f"{self.nova_url}/v2.1/servers/{s.id}"}],
            }
            if detail:
                v.update({"status": s.status, "tenant_id": s.tenant_id, "OS-EXT-SRV-ATTR:host": s.host})
            out.append(v)
        return web.json_response({"servers": out})

    # aggregates

    def _aggregate_view(self, agg: Aggregate, mv: tuple[int, int]) -> JSON:
        view: JSON = {
            "id": agg.id,
            "name": agg.name,
            "availability_zone": agg.availability_zone,
            "hosts": list(agg.hosts),
            "metadata": dict(agg.metadata),
            "created_at": agg.created_at,
            "updated_at": agg.updated_at,
            "deleted_at": None,
            "deleted": False,
        }
        if mv >= (2, 41):
            view["uuid"] = agg.uuid
        return view

    def _find_aggregate(self, raw: str) -> Aggregate:
        with self._lock:
            agg = self.aggregates.get(int(raw)) if raw.isdigit() else None
        if agg is None:
            raise _error(404, "Not Found", f"Aggregate {raw} could not be found.")
        return agg

    async def _aggregates_list(self, request: web.Request) -> web.Response:
        mv = self._auth(request, admin=True)
        with self._lock:
            out = [self._aggregate_view(a, mv) for a in sorted(self.aggregates.values(), key=lambda a: a.id)]
        return web.json_response({"aggregates": out})

    async def _aggregates_show(self, request: web.Request) -> web.Response:
        mv = self._auth(request, admin=True)
        return web.json_response(
            {"aggregate": self._aggregate_view(self._find_aggregate(request.match_info["id"]), mv)}
        )

    async def _aggregates_create(self, request: web.Request) -> web.Response:
        mv = self._auth(request, admin=True)
        try:
            body = (await request.json())["aggregate"]
            name = body["name"]
        except (ValueError, KeyError, TypeError):
            raise _error(400, "Bad Request", "Invalid input for field/attribute aggregate.") from None
        if not isinstance(name, str) or not name.strip() or len(name) > 255:
            raise _error(400, "Bad Request", "Invalid input for field/attribute name.")
        zone = body.get("availability_zone")
        with self._lock:
            if any(a.name == name for a in self.aggregates.values()):
                raise _error(409, "Conflict", f"Aggregate {name} already exists.")
            agg = Aggregate(id=next(self._ids), name=name, availability_zone=zone)
            if zone:
                agg.metadata["availability_zone"] = zone
            self.aggregates[agg.id] = agg
            view = self._aggregate_view(agg, mv)
        view.pop("hosts")  # create answers without hosts and metadata, as nova does
        view.pop("metadata")
        return web.json_response({"aggregate": view})

    async def _aggregates_update(self, request: web.Request) -> web.Response:
        mv = self._auth(request, admin=True)
        agg = self._find_aggregate(request.match_info["id"])
        body = (await request.json()).get("aggregate", {})
        with self._lock:
            if "name" in body:
                if any(a.name == body["name"] and a.id != agg.id for a in self.aggregates.values()):
                    raise _error(409, "Conflict", f"Aggregate {body['name']} already exists.")
                agg.name = body["name"]
            if "availability_zone" in body:
                agg.availability_zone = body["availability_zone"]
                if body["availability_zone"]:
                    agg.metadata["availability_zone"] = body["availability_zone"]
                else:
                    agg.metadata.pop("availability_zone", None)
            agg.updated_at = _now()
            return web.json_response({"aggregate": self._aggregate_view(agg, mv)})

    async def _aggregates_delete(self, request: web.Request) -> web.Response:
        self._auth(request, admin=True)
        agg = self._find_aggregate(request.match_info["id"])
        with self._lock:
            if agg.hosts:
                raise _error(
                    400, "Bad Request", f"Aggregate {agg.id} was not empty: it has hosts {agg.hosts}."
                )
            del self.aggregates[agg.id]
        return web.Response(status=200)

    async def _aggregates_action(self, request: web.Request) -> web.Response:
        mv = self._auth(request, admin=True)
        agg = self._find_aggregate(request.match_info["id"])
        try:
            body = await request.json()
            ((action, args),) = body.items()
        except (ValueError, TypeError, AttributeError):
            raise _error(400, "Bad Request", "Invalid aggregate action.") from None
        with self._lock:
            if action == "add_host":
                host = args.get("host")
                if not any(s.host == host and s.binary == "nova-compute" for s in self.services.values()):
                    raise _error(404, "Not Found", f"Compute host {host} could not be found.")
                if host in agg.hosts:
                    raise _error(409, "Conflict", f"Aggregate {agg.id} already has host {host}.")
                agg.hosts.append(host)
            elif action == "remove_host":
                host = args.get("host")
                if host not in agg.hosts:
                    raise _error(
                        404, "Not Found", f"Cannot remove host {host} in aggregate {agg.id}: not found."
                    )
                agg.hosts.remove(host)
            elif action == "set_metadata":
                for k, v in (args.get("metadata") or {}).items():
                    if v is None:
                        agg.metadata.pop(k, None)
                    else:
                        agg.metadata[k] = str(v)
                    if k == "availability_zone":
                        agg.availability_zone = v
            else:
                raise _error(400, "Bad Request", f"Invalid aggregate action {action}.")
            agg.updated_at = _now()
            return web.json_response({"aggregate": self._aggregate_view(agg, mv)})

    # -- control endpoints (/_sim/ on the Nova port; not logged, no auth) -------------------

    async def _sim_calls(self, request: web.Request) -> web.Response:
        calls = self.calls(method=request.query.get("method"), path=request.query.get("path"))
        return web.json_response(
            [
                {
                    "api": c.api,
                    "method": c.method,
                    "path": c.path,
                    "query": c.query,
                    "microversion": c.microversion,
                    "body": c.body,
                    "status": c.status,
                }
                for c in calls
            ]
        )

    async def _sim_state(self, request: web.Request) -> web.Response:
        with self._lock:
            state = {
                "services": [self._service_view(s, MAX_MICROVERSION) for s in self.services.values()],
                "mapped_hosts": sorted({h.host for h in self.hypervisors.values() if h.mapped}),
                "servers": [{"id": s.id, "host": s.host, "name": s.name} for s in self.servers],
                "aggregates": [self._aggregate_view(a, MAX_MICROVERSION) for a in self.aggregates.values()],
            }
        return web.json_response(state)

    async def _sim_fault(self, request: web.Request) -> web.Response:
        """Body: {"fault": "error" | "reset" | null, "api": "keystone" | "nova" | "all", "seconds": n}."""
        body = await request.json()
        fault = body.get("fault")
        if fault not in (None, "error", "reset") or body.get("api", "all") not in ("keystone", "nova", "all"):
            raise _error(400, "Bad Request", "fault must be error, reset or null; api keystone, nova or all")
        self.set_fault(fault, api=body.get("api", "all"), seconds=body.get("seconds"))
        return web.json_response({"ok": True})

    async def _sim_computes(self, request: web.Request) -> web.Response:
        """Body: {"host": ..., "servers": n, "mapped": bool, "zone": ...}: register a compute host."""
        body = await request.json()
        svc = self.add_compute(
            body["host"],
            zone=body.get("zone", "nova"),
            mapped=body.get("mapped", True),
            servers=body.get("servers", 0),
        )
        return web.json_response({"id": svc.uuid, "host": svc.host})


def _requested_microversion(request: web.Request) -> tuple[int, int]:
    raw = request.headers.get("OpenStack-API-Version", "")
    value = None
    for part in raw.split(","):
        words = part.strip().split()
        if len(words) == 2 and words[0].lower() == "compute":
            value = words[1]
    value = value or request.headers.get("X-OpenStack-Nova-API-Version")
    if not value:
        return MIN_MICROVERSION
    if value == "latest":
        return MAX_MICROVERSION
    try:
        major, minor = value.split(".")
        return int(major), int(minor)
    except ValueError:
        raise _error(400, "Bad Request", f"Invalid API version request string {value}") from None


class ApiFault(Exception):
    """An error answer: raised by handlers, turned into a JSON response by the middleware."""

    def __init__(self, status: int, body: JSON) -> None:
        super().__init__(status)
        self.status = status
        self.body = body

    def response(self) -> web.Response:
        return web.json_response(self.body, status=self.status)


_FAULT_KINDS = {
    400: "badRequest",
    401: "unauthorized",
    403: "forbidden",
    404: "itemNotFound",
    406: "notAcceptable",
    409: "conflictingRequest",
}


def _error(status: int, title: str, message: str) -> ApiFault:
    """A Nova-style fault body ({"<kind>": {"code", "message"}})."""
    del title
    return ApiFault(status, {_FAULT_KINDS.get(status, "computeFault"): {"code": status, "message": message}})


def _ks_error(status: int, title: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": status, "title": title, "message": message}}, status=status)


def _redact(body: Any) -> Any:
    """A copy of a Keystone request body without passwords and secrets."""
    if isinstance(body, dict):
        return {
            k: "***" if k in ("password", "secret") and isinstance(v, str) else _redact(v)
            for k, v in body.items()
        }
    if isinstance(body, list):
        return [_redact(v) for v in body]
    return body
