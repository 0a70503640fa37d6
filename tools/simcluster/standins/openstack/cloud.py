"""The fake cloud's state: users, tokens, services, hypervisors, servers, aggregates, faults, the call
log, and the test controls that change them (thread-safe: the APIs run in an event loop of their
own, tests call these from theirs). No HTTP here: ``keystone``, ``nova`` and ``aggregates`` serve
it, ``server`` listens."""

from __future__ import annotations

import itertools
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

JSON = dict[str, Any]
ADMIN_ROLE = "admin"
API_BINARIES = ("nova-osapi_compute", "nova-metadata")
Fault = Literal["error", "reset"]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")


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
    updated_at: str = field(default_factory=now)


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
    created_at: str = field(default_factory=now)
    updated_at: str | None = None


class Cloud:
    """The state behind both APIs, and the controls a test (or a stand-in) calls."""

    def __init__(self, *, host: str = "127.0.0.1", keystone_port: int = 0, nova_port: int = 0) -> None:
        self.host = host
        self.keystone_port = keystone_port
        self.nova_port = nova_port
        self.lock = threading.RLock()
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
        # hosts whose service somebody else deletes just before a DELETE of it arrives (it answers 404)
        self.gone_on_delete: set[str] = set()
        self._faults: dict[str, tuple[Fault, float | None]] = {}
        self._ids = itertools.count(1)
        self.project_id = uuid.uuid4().hex

    def next_id(self) -> int:
        return next(self._ids)

    def record(self, call: Call) -> None:
        with self.lock:
            self._calls.append(call)

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
        with self.lock:
            user = User(name, password, **kw)
            self.users[name] = user
            return user

    def add_application_credential(self, user: str, name: str = "nova-operator") -> tuple[str, str]:
        """Returns (id, secret)."""
        with self.lock:
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
        with self.lock:
            svc = Service(host=host, zone=zone, status=status, state=state, id=self.next_id())
            self.services[svc.uuid] = svc
            if by_agent:
                self.agent_hosts.add(host)
            hv = Hypervisor(
                host=host, service_uuid=svc.uuid, service_id=svc.id, mapped=mapped, id=self.next_id()
            )
            self.hypervisors[hv.uuid] = hv
            for i in range(servers):
                self.servers.append(Server(host=host, name=f"{host}-vm-{i}", tenant_id=self.project_id))
            return svc

    def add_service(self, host: str, binary: str, *, state: str = "up") -> Service:
        """Register a service of another binary (nova-scheduler, nova-conductor, ...) as its process
        would on start. Like Nova, the list leaves out nova-osapi_compute and nova-metadata records."""
        with self.lock:
            svc = Service(host=host, binary=binary, state=state, zone="internal", id=self.next_id())
            self.services[svc.uuid] = svc
            return svc

    def services_of(self, binary: str) -> list[Service]:
        with self.lock:
            return [s for s in self.services.values() if s.binary == binary]

    def revoke_tokens(self) -> None:
        """Every issued token becomes invalid (Nova answers 401 until a new one is fetched)."""
        with self.lock:
            self.tokens.clear()

    def map_all_hosts(self) -> list[str]:
        """``nova-manage cell_v2 discover_hosts``: map every registered, unmapped compute host."""
        with self.lock:
            hosts = []
            for hv in self.hypervisors.values():
                if not hv.mapped:
                    hv.mapped = True
                    hosts.append(hv.host)
            return hosts

    def compute_services(self) -> list[Service]:
        with self.lock:
            return [s for s in self.services.values() if s.binary == "nova-compute"]

    def set_service_state(self, host: str, state: str) -> None:
        with self.lock:
            for svc in self.services.values():
                if svc.host == host:
                    svc.state = state
                    svc.updated_at = now()

    def map_host(self, host: str) -> None:
        """What ``nova-manage cell_v2 discover_hosts`` does for a host."""
        with self.lock:
            for hv in self.hypervisors.values():
                if hv.host == host:
                    hv.mapped = True

    def set_servers(self, host: str, count: int) -> None:
        with self.lock:
            self.servers = [s for s in self.servers if s.host != host]
            for i in range(count):
                self.servers.append(Server(host=host, name=f"{host}-vm-{i}", tenant_id=self.project_id))

    def set_migrations(self, host: str, count: int) -> None:
        with self.lock:
            self.migrations[host] = count

    def set_cell_down(self, hosts: set[str]) -> None:
        """Services on these hosts sit in a cell that does not answer."""
        with self.lock:
            self.down_cell_hosts = set(hosts)

    def service_by_host(self, host: str) -> Service | None:
        with self.lock:
            return next((s for s in self.services.values() if s.host == host), None)

    def services_by_host(self) -> dict[str, Service]:
        """Every host's service as ``service_by_host`` finds it (the first registered), in one walk:
        a caller asking for each of thousands of hosts would otherwise walk them all each time."""
        with self.lock:
            found: dict[str, Service] = {}
            for svc in self.services.values():
                found.setdefault(svc.host, svc)
            return found

    def set_fault(
        self,
        fault: Fault | None,
        *,
        api: Literal["keystone", "nova", "all"] = "all",
        seconds: float | None = None,
    ) -> None:
        """``error``: answer 500; ``reset``: drop the connection; None: heal. ``seconds`` bounds it."""
        with self.lock:
            for name in ("keystone", "nova") if api == "all" else (api,):
                if fault is None:
                    self._faults.pop(name, None)
                else:
                    self._faults[name] = (fault, time.monotonic() + seconds if seconds else None)

    def calls(self, method: str | None = None, path: str | None = None, api: str | None = None) -> list[Call]:
        """Logged calls, filtered by method, path prefix and API."""
        with self.lock:
            return [
                c
                for c in self._calls
                if (method is None or c.method == method)
                and (path is None or c.path.startswith(path))
                and (api is None or c.api == api)
            ]

    def clear_calls(self) -> None:
        with self.lock:
            self._calls.clear()

    def active_fault(self, api: str) -> Fault | None:
        with self.lock:
            entry = self._faults.get(api)
            if entry is None:
                return None
            fault, until = entry
            if until is not None and time.monotonic() > until:
                del self._faults[api]
                return None
            return fault
