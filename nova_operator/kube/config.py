"""Where a client's configuration comes from: a kubeconfig, the pod's ServiceAccount, an exec plugin.

``load_api_client`` follows controller-runtime's order (an explicit kubeconfig or context,
$KUBECONFIG, in-cluster, ~/.kube/config). In-cluster, the projected ServiceAccount token is read
again whenever the kubelet rotates it. A kubeconfig ``exec`` plugin's token (``ExecToken``) is run
again when it reaches its ``expirationTimestamp`` and when the server answers 401. Proxies are
read once, when the client is made, as client-go's ``ProxyFromEnvironment`` does (``api_client``).
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import contextlib
import ipaddress
import os
import pathlib
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
from kubernetes_asyncio.client.api_client import ApiClient
from kubernetes_asyncio.client.configuration import Configuration
from kubernetes_asyncio.config.config_exception import ConfigException
from kubernetes_asyncio.config.exec_provider import ExecProvider
from kubernetes_asyncio.config.incluster_config import InClusterConfigLoader
from kubernetes_asyncio.config.kube_config import load_kube_config

from nova_operator.kube.tracing import trace_config
from nova_operator.settings import SERVICE_ACCOUNT_DIR
from nova_operator.timestamps import parse_rfc3339


class ConfigError(Exception):
    """No usable kubeconfig or in-cluster configuration."""


async def load_api_client(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    service_account_dir: str = SERVICE_ACCOUNT_DIR,
) -> ApiClient:
    """An ApiClient, in the order controller-runtime uses: ``kubeconfig`` (or ``context``),
    $KUBECONFIG, in-cluster (``KUBERNETES_SERVICE_HOST`` set), then ~/.kube/config."""
    cfg = Configuration()
    if kubeconfig and not _exists(kubeconfig):
        raise ConfigError(f"kubeconfig file not found: {kubeconfig}")
    try:
        if not (kubeconfig or context or os.environ.get("KUBECONFIG")) and os.environ.get(
            "KUBERNETES_SERVICE_HOST"
        ):
            load_incluster_config(cfg, pathlib.Path(service_account_dir))
        elif (path := kubeconfig or _default_kubeconfig()) is not None or context:
            loader = await load_kube_config(config_file=path, context=context, client_configuration=cfg)
            if (exec_token := _exec_token(loader, cfg)) is not None:
                cfg.refresh_api_key_hook = exec_token
        else:
            load_incluster_config(cfg, pathlib.Path(service_account_dir))
    except (ConfigException, OSError, ValueError) as exc:
        raise ConfigError(str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)) from exc
    return api_client(cfg)


ExecRun = Callable[[], Awaitable[Mapping[str, Any]]]


EXEC_EXPIRY_SKEW = 10.0  # seconds before its expirationTimestamp a plugin's token is run again


class ExecToken:
    """A kubeconfig ``exec`` plugin's bearer token, kept fresh; the configuration's
    ``refresh_api_key_hook`` (kubernetes_asyncio awaits it before every request).

    ``run`` runs the plugin and returns the ExecCredential's ``status``. The token is used until
    ``EXEC_EXPIRY_SKEW`` seconds before its ``expirationTimestamp`` (without one, until the server
    refuses it: ``invalidate``). Concurrent requests that find it stale share one run.
    """

    def __init__(
        self,
        run: ExecRun,
        token: str = "",
        expiry: float | None = None,
        *,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._run, self._token, self._expiry, self._now = run, token, expiry, now
        self._lock = asyncio.Lock()
        self.runs = 0

    def _fresh(self) -> bool:
        return bool(self._token) and (self._expiry is None or self._now() < self._expiry - EXEC_EXPIRY_SKEW)

    def invalidate(self, token: str) -> None:
        """The server refused ``token`` (401): the next request runs the plugin again."""
        if token == self._token:
            self._token = ""

    async def current(self) -> str:
        """``Bearer <token>``, running the plugin first when the token is stale."""
        if not self._fresh():
            async with self._lock:
                if not self._fresh():
                    status = await self._run()
                    self.runs += 1
                    token = status.get("token")
                    if not token:
                        raise ConfigError("exec: the credential plugin returned no token")
                    self._token = f"Bearer {token}"
                    self._expiry = _timestamp(status.get("expirationTimestamp"))
        return self._token

    async def __call__(self, cfg: Configuration) -> None:
        cfg.api_key["BearerToken"] = await self.current()


def _timestamp(value: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 time (None: absent or unreadable)."""
    parsed = parse_rfc3339(value)
    return parsed.timestamp() if parsed is not None else None


def _exec_token(loader: Any, cfg: Configuration) -> ExecToken | None:
    """An ``ExecToken`` for a kubeconfig user whose token came from an ``exec`` plugin (else None)."""
    user = getattr(loader, "_user", None)  # kubernetes_asyncio resolves the context's user there
    token = cfg.api_key.get("BearerToken")
    if not user or "exec" not in user or not token:
        return None
    exec_config = user["exec"]
    expiry = getattr(loader, "exec_plugin_expiry", None)

    async def run() -> Mapping[str, Any]:
        status: Mapping[str, Any] = await ExecProvider(exec_config).run()
        return status

    return ExecToken(run, str(token), expiry.timestamp() if expiry is not None else None)


def environment_proxy(host: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The proxy ``HTTPS_PROXY``/``HTTP_PROXY`` (either case) names for ``host``; None under ``NO_PROXY``."""
    env = os.environ if environ is None else environ
    url = urllib.parse.urlsplit(host)
    names = ("https_proxy", "HTTPS_PROXY") if url.scheme == "https" else ("http_proxy", "HTTP_PROXY")
    proxy = next((env[n] for n in names if env.get(n)), "")
    no_proxy = env.get("no_proxy") or env.get("NO_PROXY") or ""
    if not proxy or _bypassed(url.hostname or "", url.port, no_proxy):
        return None
    return proxy


def _bypassed(hostname: str, port: int | None, no_proxy: str) -> bool:
    """``NO_PROXY`` as Go's net/http reads it: ``*``, IPs and CIDRs, names and domain suffixes, ``:port``."""
    hostname = hostname.lower().rstrip(".")
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(hostname)
    except ValueError:
        address = None
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if entry == "*":
            return True
        if not entry:
            continue
        if address is not None and "/" in entry:
            with contextlib.suppress(ValueError):
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            continue
        name, want_port = entry, ""
        if entry.count(":") == 1:
            name, _, want_port = entry.partition(":")
        if want_port and want_port != str(port):
            continue
        name = name.strip("[]").rstrip(".")
        if name.startswith("*."):
            name = name[1:]
        if hostname == name.lstrip(".") or hostname.endswith(name if name.startswith(".") else "." + name):
            return True
    return False


def api_client(cfg: Configuration, *, traced: bool = False) -> ApiClient:
    """An ApiClient for ``cfg`` whose session does no environment lookup per request.

    The proxy comes from the configuration (a kubeconfig ``proxy-url``) or, read once here, from
    the environment (``environment_proxy``). ``traced``: its requests report their phases to
    ``tracing()`` (a few awaits per request: only for the clients that need it).
    """
    if not cfg.proxy:
        cfg.proxy = environment_proxy(str(cfg.host))
    api = ApiClient(configuration=cfg)
    rest = api.rest_client
    session = rest.pool_manager
    connector = session.connector
    session.detach()  # the new session takes the connector over; the old one never sent a request
    # kubernetes_asyncio's read buffer (a watch event may carry an object up to etcd's 1.5 MiB)
    rest.pool_manager = aiohttp.ClientSession(
        connector=connector,
        trust_env=False,
        read_bufsize=2**21,
        trace_configs=[trace_config()] if traced else None,
    )
    return api


def load_incluster_config(cfg: Configuration, mount: pathlib.Path) -> None:
    """Host, CA and token of the pod's ServiceAccount into ``cfg``.

    The kubelet rotates the projected token (an atomic swap of the mount's ``..data`` link),
    so the token file is stat-ed before every request and read again whenever it changed.
    """
    loader = InClusterConfigLoader(
        token_filename=str(mount / "token"), cert_filename=str(mount / "ca.crt"), try_refresh_token=False
    )
    loader.load_and_set(cfg)
    token = _RotatingToken(mount / "token")
    cfg.api_key["BearerToken"] = token.current()
    cfg.refresh_api_key_hook = lambda c: c.api_key.__setitem__("BearerToken", token.current())


class _RotatingToken:
    def __init__(self, path: pathlib.Path) -> None:
        self._path = path
        self._seen: tuple[int, int, int] | None = None
        self._value = ""

    def current(self) -> str:
        """``Bearer <token>``, read again when the file behind the path changed."""
        try:
            st = self._path.stat()
            key = (st.st_ino, st.st_mtime_ns, st.st_size)
            if key != self._seen:
                text = self._path.read_text().strip()
                if text:  # a half-written file keeps the previous token
                    self._value, self._seen = f"Bearer {text}", key
        except OSError:
            pass  # mid-swap: the previous token until the new one is there
        if not self._value:
            raise ConfigError(f"no ServiceAccount token in {self._path}")
        return self._value


def pod_namespace(service_account_dir: str = SERVICE_ACCOUNT_DIR) -> str | None:
    """The namespace the operator runs in: ``$POD_NAMESPACE`` (downward API), else the mount's."""
    if value := os.environ.get("POD_NAMESPACE", "").strip():
        return value
    try:
        return (pathlib.Path(service_account_dir) / "namespace").read_text().strip() or None
    except OSError:
        return None


def _exists(path: str) -> bool:
    return pathlib.Path(path).expanduser().is_file()


def _default_kubeconfig() -> str | None:
    path = pathlib.Path(os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0]).expanduser()
    return str(path) if path.exists() else None
