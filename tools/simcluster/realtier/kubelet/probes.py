"""Running one probe or lifecycle handler: exec, httpGet, tcpSocket (as the kubelet's prober).

exec: the command in the container (its namespaces, user, env), success on exit 0, a timeout is a
failure. httpGet: a GET to ``host`` (default: the pod IP) and port (a number or a container port's
name), ``User-Agent: kube-probe/<version>``, custom headers; any status from 200 to 399 is success,
redirects are not followed; HTTPS is not verified. tcpSocket: a connect within the timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from simcluster.realtier.kubelet.probestate import Result

JSON = dict[str, Any]
USER_AGENT = "kube-probe/1.37"
Exec = Callable[[Sequence[str], float], Awaitable[tuple[int | None, str]]]


def resolve_port(port: int | str, container: JSON) -> int:
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for p in container.get("ports") or []:
        if p.get("name") == port:
            return int(p["containerPort"])
    raise ValueError(f"no container port named {port!r}")


async def http_get(action: JSON, container: JSON, pod_ip: str, seconds: float) -> Result:
    host = action.get("host") or pod_ip
    port = resolve_port(action["port"], container)
    path = action.get("path") or "/"
    if not path.startswith("/"):
        path = "/" + path
    tls = action.get("scheme", "HTTP").upper() == "HTTPS"
    headers = {"Host": f"{host}:{port}", "User-Agent": USER_AGENT, "Accept": "*/*"}
    for h in action.get("httpHeaders") or []:
        headers[h["name"]] = h["value"]
    context = None
    if tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE

    async def go() -> int:
        reader, writer = await asyncio.open_connection(host, port, ssl=context)
        try:
            request = f"GET {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
            writer.write((request + "Connection: close\r\n\r\n").encode())
            await writer.drain()
            line = await reader.readline()
            return int(line.split()[1])
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()

    try:
        async with asyncio.timeout(seconds):
            code = await go()
    except (TimeoutError, OSError, ValueError, IndexError, ssl.SSLError):
        return Result.FAILURE
    return Result.SUCCESS if 200 <= code < 400 else Result.FAILURE


async def tcp_socket(action: JSON, container: JSON, pod_ip: str, seconds: float) -> Result:
    host = action.get("host") or pod_ip
    port = resolve_port(action["port"], container)
    try:
        async with asyncio.timeout(seconds):
            _, writer = await asyncio.open_connection(host, port)
    except (TimeoutError, OSError):
        return Result.FAILURE
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return Result.SUCCESS


async def run(handler: JSON, container: JSON, pod_ip: str, seconds: float, exec_in: Exec) -> Result:
    """One probe (or lifecycle handler) outcome."""
    if "exec" in handler:
        code, _ = await exec_in(handler["exec"].get("command") or [], seconds)
        return Result.SUCCESS if code == 0 else Result.FAILURE
    if "httpGet" in handler:
        return await http_get(handler["httpGet"], container, pod_ip, seconds)
    if "tcpSocket" in handler:
        return await tcp_socket(handler["tcpSocket"], container, pod_ip, seconds)
    if "sleep" in handler:
        await asyncio.sleep(float(handler["sleep"].get("seconds", 0)))
        return Result.SUCCESS
    return Result.FAILURE
