"""Keystone, Placement and Glance from PyPI (``tools/realnova/venvs.sh``), served by uWSGI as host
processes on the real MariaDB and memcached, and a network endpoint whose lists are all empty.

``OpenStackServices.start()`` creates each service's database and user, writes its configuration in
the work directory, runs its ``*-manage db sync`` and serves it; Keystone is bootstrapped (admin,
region ``RegionOne``, the identity endpoints) and then given the service project, the service users
(``placement``, ``glance`` and the one the Nova under test names), the catalog entries of placement,
image and network, and a compute entry per Nova (``add_endpoint("compute", ...)``, by its caller).

Every catalog entry lists its URL as ``public``, ``internal`` and ``admin`` alike, unless
``internal_urls`` names another for its service type (``identity``, ``placement``, ``image``,
``network``): then that one is the ``internal`` and ``admin`` URL, as the real-Nova tier registers the
in-cluster Service names the pods use (nova asks for ``valid_interfaces = internal``) beside the
host's loopback URLs the user's shell uses.

The network endpoint (``NetworkStandIn``) stays a stand-in: nova reads security groups and the port
quota even for a server with ``networks: none``, and nothing else of Neutron is needed for the fake
driver. Every password is random per start; none is logged.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import os
import pathlib
import secrets
import shutil
import signal
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from simcluster.platform.controlplane import free_port
from simcluster.platform.process import ManagedProcess, Processes
from simcluster.realtier.services.mariadb import MariaDBServer
from simcluster.realtier.services.procs import ServiceError, run, wait_until

REGION = "RegionOne"
# tools/realnova/venvs.sh builds them there (REALNOVA_VENV_CACHE moves both).
VENVS = pathlib.Path(os.environ.get("REALNOVA_VENV_CACHE", "/var/cache/nova-operator/realnova"))


# A service ready to serve: its name, its uWSGI command line, environment and health URL.
Prepared = tuple[str, list[str], dict[str, str], str]


def _uwsgi(venv: pathlib.Path, address: str, port: int, module: str, *extra: str) -> list[str]:
    return [
        str(venv / "bin" / "uwsgi"),
        "--master",
        "--die-on-term",
        "--need-app",
        "--http",
        f"{address}:{port}",
        # Each response closes its connection. nova-scheduler's parent talks to Placement (and
        # Keystone) before it forks its workers, which then share that kept-alive connection and
        # read each other's responses (KeyError: 'allocation_requests', NoValidHost);
        # docs/operations.md, "Scheduler workers and Placement".
        "--add-header",
        "Connection: close",
        "--module",
        module,
        "--virtualenv",
        str(venv),
        "--processes",
        "2",
        "--threads",
        "1",
        "--lazy-apps",
        *extra,
    ]


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3, context=context) as resp:
            return int(resp.status) < 500
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except (urllib.error.URLError, OSError):
        return False


@dataclass
class ServiceUser:
    name: str
    password: str
    project: str = "service"
    domain: str = "Default"


@dataclass
class OpenStackServices:
    workdir: pathlib.Path
    mariadb: MariaDBServer
    memcached: str  # host:port
    address: str = "127.0.0.1"
    venvs: pathlib.Path = VENVS
    keystone_port: int = field(default_factory=free_port)
    placement_port: int = field(default_factory=free_port)
    glance_port: int = field(default_factory=free_port)
    admin_password: str = field(default_factory=lambda: secrets.token_urlsafe(18))
    users: dict[str, ServiceUser] = field(default_factory=dict)
    network: NetworkStandIn | None = None
    internal_urls: dict[str, str] = field(default_factory=dict)  # by service type (the module's text)
    _spawner: Processes = field(init=False)
    _children: dict[str, ManagedProcess] = field(default_factory=dict, init=False)
    _served: dict[str, tuple[list[str], dict[str, str], str]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self._spawner = Processes(self.workdir, cwd=self.workdir)

    # -- URLs --------------------------------------------------------------------------------

    @property
    def keystone_url(self) -> str:
        return f"http://{self.address}:{self.keystone_port}/v3"

    @property
    def placement_url(self) -> str:
        return f"http://{self.address}:{self.placement_port}"

    @property
    def glance_url(self) -> str:
        return f"http://{self.address}:{self.glance_port}"

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, *, service_users: tuple[str, ...] = ("nova",)) -> OpenStackServices:
        for svc in ("keystone", "placement", "glance"):
            if not (self.venvs / svc / "bin" / "uwsgi").exists():
                raise ServiceError(f"no {svc} venv in {self.venvs}: run tools/realnova/venvs.sh")
        try:
            self.network = NetworkStandIn(self.address).start()
            for name in ("placement", "glance", *service_users):
                self.users[name] = ServiceUser(name, secrets.token_urlsafe(18))
            # Each service's database sync and setup is its own process chain, independent of the
            # others (Placement and Glance need Keystone only to serve requests): run side by side.
            with concurrent.futures.ThreadPoolExecutor(3, thread_name_prefix="openstack-setup") as pool:
                steps = (self._prepare_keystone, self._prepare_placement, self._prepare_glance)
                prepared = [future.result() for future in [pool.submit(step) for step in steps]]
            for name, argv, env, health in prepared:
                self._served[name] = (argv, env, health)
                self._children[name] = self._spawner.spawn(name, argv, env=env)
            for name, _, _, health in prepared:
                wait_until(
                    functools.partial(_http_ok, health),
                    self._children[name],
                    what=name,
                    timeout=120,
                    interval=0.5,
                )
            self._register()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self._spawner.stop_all()
        self._children.clear()
        if self.network is not None:
            self.network.stop()
            self.network = None

    def _database(self, name: str) -> str:
        password = secrets.token_urlsafe(18)
        self.mariadb.create_database(name, charset="utf8", collation="utf8_general_ci")
        self.mariadb.ensure_user(name, password, max_connections=0)
        self.mariadb.grant(["ALL PRIVILEGES"], name, "*", name)
        return f"mysql+pymysql://{name}:{password}@{self.mariadb.address}:{self.mariadb.port}/{name}"

    def _authtoken(self, user: str) -> str:
        """keystonemiddleware's section: it validates tokens at the catalog's identity endpoint of
        ``interface``, the public one: these services run on the host, which does not resolve the
        in-cluster names the catalog gives as ``internal`` (``internal_urls``; keystonemiddleware's
        default interface), and so refused every token with a 401."""
        u = self.users[user]
        return (
            "[keystone_authtoken]\n"
            f"www_authenticate_uri = {self.keystone_url}\n"
            f"auth_url = {self.keystone_url}\n"
            "interface = public\n"
            f"memcached_servers = {self.memcached}\n"
            "auth_type = password\n"
            "project_domain_name = Default\nuser_domain_name = Default\n"
            f"project_name = service\nusername = {u.name}\npassword = {u.password}\n"
            f"region_name = {REGION}\n"
        )

    def _serve(self, name: str, argv: list[str], env: dict[str, str], health: str) -> None:
        self._served[name] = (argv, env, health)
        child = self._spawner.spawn(name, argv, env=env)
        self._children[name] = child
        wait_until(lambda: _http_ok(health), child, what=name, timeout=120, interval=0.5)

    def stop_service(self, name: str) -> None:
        """Stop one service (``keystone``, ``placement``, ``glance``): its port refuses connections."""
        self._children[name].stop()

    def pause_service(self, name: str) -> None:
        """Freeze one service (SIGSTOP to its process group): connections are accepted by the kernel
        and never answered, as behind a network that drops packets; ``resume_service`` thaws it."""
        os.killpg(self._children[name].popen.pid, signal.SIGSTOP)

    def resume_service(self, name: str) -> None:
        os.killpg(self._children[name].popen.pid, signal.SIGCONT)

    def serve_keystone_https(self, cert: pathlib.Path, key: pathlib.Path, ca: pathlib.Path) -> int:
        """A second Keystone on the same database and keys, served by uWSGI over HTTPS with ``cert``
        (its ``wsgi.url_scheme`` is https, so its version document names https URLs); the port.

        Tokens of either Keystone are valid at the other (one fernet key repository). Stopped with
        the others, or by ``stop_service("keystone-https")``."""
        port = free_port()
        argv, env, _ = self._served["keystone"]
        at = argv.index("--http")
        argv = [*argv[:at], "--https", f"{self.address}:{port},{cert},{key}", *argv[at + 2 :]]
        url = f"https://{self.address}:{port}/v3"
        child = self._spawner.spawn("keystone-https", argv, env=env)
        self._children["keystone-https"] = child
        context = ssl.create_default_context(cafile=str(ca))
        context.check_hostname = False  # the certificate names the Service the pods dial, not the address
        wait_until(lambda: _http_ok(url, context), child, what="keystone-https", timeout=120, interval=0.5)
        return port

    def start_service(self, name: str) -> None:
        """Serve a stopped service again, as it was configured (its log goes on in the same file)."""
        if self._children[name].alive:
            return
        self._serve(name, *self._served[name])

    # -- keystone ------------------------------------------------------------------------------

    def _prepare_keystone(self) -> Prepared:
        venv, etc = self.venvs / "keystone", self.workdir / "keystone"
        etc.mkdir(parents=True, exist_ok=True)
        conf = etc / "keystone.conf"
        conf.write_text(
            "[DEFAULT]\nuse_stderr = true\n"
            f"[database]\nconnection = {self._database('keystone')}\n"
            "[token]\nprovider = fernet\n"
            f"[fernet_tokens]\nkey_repository = {etc / 'fernet-keys'}\n"
            f"[fernet_receipts]\nkey_repository = {etc / 'fernet-keys'}\n"
            f"[credential]\nkey_repository = {etc / 'credential-keys'}\n"
            "[cache]\nenabled = true\nbackend = dogpile.cache.pymemcache\n"
            f"memcache_servers = {self.memcached}\n"
        )
        env = {"OS_KEYSTONE_CONFIG_FILES": str(conf)}
        manage = [str(venv / "bin" / "keystone-manage"), "--config-file", str(conf)]
        run([*manage, "db_sync"], env=env, timeout=300)
        for what in ("fernet_setup", "credential_setup"):
            run([*manage, what, "--keystone-user", "root", "--keystone-group", "root"], env=env)
        run(
            [
                *manage,
                "bootstrap",
                # joined to its flag: a token_urlsafe value may begin with "-", which argparse
                # would take for an option ("expected one argument")
                f"--bootstrap-password={self.admin_password}",
                "--bootstrap-admin-url",
                self.internal_urls.get("identity", self.keystone_url),
                "--bootstrap-internal-url",
                self.internal_urls.get("identity", self.keystone_url),
                "--bootstrap-public-url",
                self.keystone_url,
                "--bootstrap-region-id",
                REGION,
            ],
            env=env,
            timeout=180,
        )
        argv = _uwsgi(venv, self.address, self.keystone_port, "keystone.wsgi.api:application")
        return "keystone", argv, env, self.keystone_url

    def admin_token(self) -> str:
        body = {
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {
                        "user": {
                            "name": "admin",
                            "domain": {"id": "default"},
                            "password": self.admin_password,
                        }
                    },
                },
                "scope": {"project": {"name": "admin", "domain": {"id": "default"}}},
            }
        }
        req = urllib.request.Request(
            f"{self.keystone_url}/auth/tokens",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return str(resp.headers["X-Subject-Token"])

    def _api(self, token: str, method: str, path: str, body: Any = None) -> Any:
        req = urllib.request.Request(
            f"{self.keystone_url}{path}",
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Content-Type": "application/json", "X-Auth-Token": token},
            method=method,
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            text = resp.read()
        return json.loads(text) if text else None

    def _find(self, token: str, kind: str, name: str) -> str | None:
        items = self._api(token, "GET", f"/{kind}?name={name}")[kind]
        return str(items[0]["id"]) if items else None

    def _register(self) -> None:
        token = self.admin_token()
        project = (
            self._find(token, "projects", "service")
            or self._api(
                token, "POST", "/projects", {"project": {"name": "service", "domain_id": "default"}}
            )["project"]["id"]
        )
        admin_role = self._find(token, "roles", "admin")
        service_role = (
            self._find(token, "roles", "service")
            or self._api(token, "POST", "/roles", {"role": {"name": "service"}})["role"]["id"]
        )
        for user in self.users.values():
            self.ensure_user(user, token=token, project_id=project, roles=(admin_role, service_role))
        assert self.network is not None
        for svc_type, name, url in (
            ("placement", "placement", self.placement_url),
            ("image", "glance", self.glance_url),
            ("network", "neutron", self.network.url),
        ):
            self.add_endpoint(svc_type, name, url, internal=self.internal_urls.get(svc_type), token=token)

    def ensure_user(
        self,
        user: ServiceUser,
        *,
        token: str | None = None,
        project_id: str | None = None,
        roles: tuple[str | None, ...] = (),
    ) -> None:
        """Create the user or set its password (a rotation), and give it its roles on the project."""
        token = token or self.admin_token()
        project_id = project_id or self._find(token, "projects", user.project)
        uid = self._find(token, "users", user.name)
        if uid is None:
            uid = self._api(
                token,
                "POST",
                "/users",
                {"user": {"name": user.name, "password": user.password, "domain_id": "default"}},
            )["user"]["id"]
        else:
            self._api(token, "PATCH", f"/users/{uid}", {"user": {"password": user.password}})
        for role in roles:
            if role:
                self._api(token, "PUT", f"/projects/{project_id}/users/{uid}/roles/{role}")
        self.users[user.name] = user

    def add_service_user(self, name: str, password: str) -> None:
        """A service user (or its new password) with the admin and service roles on ``service``, as
        the Nova under test names it in its ``serviceUser`` Secret."""
        token = self.admin_token()
        roles = (self._find(token, "roles", "admin"), self._find(token, "roles", "service"))
        self.ensure_user(ServiceUser(name, password), token=token, roles=roles)

    def add_endpoint(
        self, svc_type: str, name: str, url: str, *, internal: str | None = None, token: str | None = None
    ) -> None:
        """A catalog entry for ``svc_type``, replacing an older one: ``url`` public, and internal and
        admin too unless ``internal`` is given for those two."""
        token = token or self.admin_token()
        services = self._api(token, "GET", f"/services?type={svc_type}")["services"]
        sid = services[0]["id"] if services else None
        if sid is None:
            sid = self._api(token, "POST", "/services", {"service": {"type": svc_type, "name": name}})[
                "service"
            ]["id"]
        for ep in self._api(token, "GET", f"/endpoints?service_id={sid}")["endpoints"]:
            self._api(token, "DELETE", f"/endpoints/{ep['id']}")
        for interface, where in interface_urls(url, internal).items():
            self._api(
                token,
                "POST",
                "/endpoints",
                {"endpoint": {"service_id": sid, "interface": interface, "url": where, "region_id": REGION}},
            )

    def add_region(self, region: str, urls: dict[str, str]) -> None:
        """Region ``region`` (made once) whose catalog lists ``urls`` by service type (public, internal
        and admin), replacing that region's older entries; other regions' entries stay as they are."""
        token = self.admin_token()
        if region not in {r["id"] for r in self._api(token, "GET", "/regions")["regions"]}:
            self._api(token, "POST", "/regions", {"region": {"id": region}})
        for svc_type, url in urls.items():
            sid = self._api(token, "GET", f"/services?type={svc_type}")["services"][0]["id"]
            for ep in self._api(token, "GET", f"/endpoints?service_id={sid}&region_id={region}")["endpoints"]:
                self._api(token, "DELETE", f"/endpoints/{ep['id']}")
            for interface in ("public", "internal", "admin"):
                self._api(
                    token,
                    "POST",
                    "/endpoints",
                    {
                        "endpoint": {
                            "service_id": sid,
                            "interface": interface,
                            "url": url,
                            "region_id": region,
                        }
                    },
                )

    def remove_region(self, region: str) -> None:
        """Region ``region`` and every catalog entry in it gone (``add_region`` undone); other regions'
        entries stay. A region that does not exist: nothing to do."""
        token = self.admin_token()
        if region not in {r["id"] for r in self._api(token, "GET", "/regions")["regions"]}:
            return
        for ep in self._api(token, "GET", f"/endpoints?region_id={region}")["endpoints"]:
            self._api(token, "DELETE", f"/endpoints/{ep['id']}")
        self._api(token, "DELETE", f"/regions/{region}")

    # -- placement and glance ----------------------------------------------------------------------

    def _prepare_placement(self) -> Prepared:
        venv, etc = self.venvs / "placement", self.workdir / "placement"
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "placement.conf").write_text(
            "[DEFAULT]\nuse_stderr = true\n"
            f"[placement_database]\nconnection = {self._database('placement')}\n"
            "[api]\nauth_strategy = keystone\n" + self._authtoken("placement")
        )
        env = {"OS_PLACEMENT_CONFIG_DIR": str(etc)}
        run(
            [str(venv / "bin" / "placement-manage"), "--config-dir", str(etc), "db", "sync"],
            env=env,
            timeout=300,
        )
        argv = _uwsgi(venv, self.address, self.placement_port, "placement.wsgi.api:application")
        return "placement", argv, env, self.placement_url

    def _prepare_glance(self) -> Prepared:
        venv, etc = self.venvs / "glance", self.workdir / "glance"
        images = etc / "images"
        images.mkdir(parents=True, exist_ok=True)
        # the paste pipeline ships in the venv's etc/, not in the package; glance looks beside its config
        shutil.copy(venv / "etc" / "glance" / "glance-api-paste.ini", etc / "glance-api-paste.ini")
        (etc / "glance-api.conf").write_text(
            "[DEFAULT]\nuse_stderr = true\nenabled_backends = file:file\n"
            f"[database]\nconnection = {self._database('glance')}\n"
            f"[paste_deploy]\nflavor = keystone\nconfig_file = {etc / 'glance-api-paste.ini'}\n"
            "[glance_store]\ndefault_backend = file\n"
            f"[file]\nfilesystem_store_datadir = {images}\n"
            "[os_glance_staging_store]\n"
            f"filesystem_store_datadir = {etc / 'staging'}\n"
            "[os_glance_tasks_store]\n"
            f"filesystem_store_datadir = {etc / 'tasks'}\n" + self._authtoken("glance")
        )
        env = {"OS_GLANCE_CONFIG_DIR": str(etc)}
        run([str(venv / "bin" / "glance-manage"), "--config-dir", str(etc), "db_sync"], env=env, timeout=300)
        argv = _uwsgi(
            venv, self.address, self.glance_port, "glance.wsgi.api:application", "--http-chunked-input"
        )
        return "glance", argv, env, self.glance_url


class NetworkStandIn:
    """The network endpoint: every list empty, quotas unlimited, in a thread of its own."""

    def __init__(self, address: str = "127.0.0.1", port: int = 0) -> None:
        self.address = address
        self.port = port or free_port()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"

    def start(self) -> NetworkStandIn:
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, args=(ready,), name="network stand-in", daemon=True
        )
        self._thread.start()
        if not ready.wait(10):
            raise ServiceError("the network stand-in did not start")
        return self

    def _serve(self, ready: threading.Event) -> None:
        self._loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_get("/", self._versions)
        app.router.add_get("/v2.0/quotas/{project}", self._quota)
        app.router.add_get("/v2.0/{collection}", self._empty)
        self._runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(self._runner.setup())
        self._loop.run_until_complete(web.TCPSite(self._runner, self.address, self.port).start())
        ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._runner.cleanup())
        self._loop.close()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop = self._thread = None

    @staticmethod
    async def _versions(_: web.Request) -> web.Response:
        return web.json_response({"versions": [{"id": "v2.0", "status": "CURRENT", "links": []}]})

    @staticmethod
    async def _quota(request: web.Request) -> web.Response:
        unlimited = dict.fromkeys(("port", "network", "subnet", "security_group", "security_group_rule"), -1)
        return web.json_response({"quota": {**unlimited, "project_id": request.match_info["project"]}})

    @staticmethod
    async def _empty(request: web.Request) -> web.Response:
        collection = request.match_info["collection"].removesuffix(".json")
        return web.json_response({collection.replace("-", "_"): []})


def interface_urls(public: str, internal: str | None = None) -> dict[str, str]:
    """A catalog entry's URL by interface: ``public``, and ``internal`` (default the public one) as
    the internal and admin URL."""
    return {"public": public, "internal": internal or public, "admin": internal or public}


def wait_port(address: str, port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise ServiceError(f"{address}:{port} not open after {timeout:.0f} s")
