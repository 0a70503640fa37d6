"""Issue 26 item 13: a kubeconfig ``exec`` plugin's token is fetched anew on expiry and on 401.

A real kubeconfig names a real plugin (a small script: each run hands out the next token, ``t1``,
``t2``, ..., expiring when the test says) and a local HTTP server that records the token of each
request and refuses the ones the test revoked. On e59040d every request carried the token of the
plugin's first run, however long ago it expired.
"""

from __future__ import annotations

import pathlib
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml
from aiohttp import web

from nova_operator.kube import Kube
from nova_operator.kube.errors import KubeError
from nova_operator.kube.resources import CONFIGMAPS
from nova_operator.metrics import Metrics

PLUGIN = """
import json, pathlib, sys
state = pathlib.Path(sys.argv[1])
runs = int((state / "runs").read_text() or 0) + 1 if (state / "runs").exists() else 1
(state / "runs").write_text(str(runs))
expiry = (state / "expiry").read_text().strip()
status = {"token": f"t{runs}"}
if expiry:
    status["expirationTimestamp"] = expiry
kind = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential"}
print(json.dumps({**kind, "status": status}))
"""
PAST, FUTURE = "2001-01-01T00:00:00Z", "2999-01-01T00:00:00Z"


class Server:
    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.revoked: set[str] = set()

    async def handle(self, request: web.Request) -> web.Response:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        self.tokens.append(token)
        if token in self.revoked:
            body = {"kind": "Status", "code": 401, "reason": "Unauthorized", "message": "Unauthorized"}
            return web.json_response(body, status=401)
        return web.json_response({"kind": "ConfigMap", "metadata": {"name": "x", "namespace": "ns"}})


@pytest.fixture
async def setup(tmp_path: pathlib.Path) -> AsyncIterator[tuple[Server, pathlib.Path, pathlib.Path]]:
    server = Server()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    state = tmp_path / "state"
    state.mkdir()
    (state / "expiry").write_text(FUTURE)
    (tmp_path / "plugin.py").write_text(PLUGIN)
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [
            {
                "name": "u",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": sys.executable,
                        "args": [str(tmp_path / "plugin.py"), str(state)],
                        "interactiveMode": "Never",
                    }
                },
            }
        ],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    try:
        yield server, kubeconfig, state
    finally:
        await runner.cleanup()


async def test_an_expired_exec_token_is_fetched_anew_before_the_request(
    setup: tuple[Server, pathlib.Path, pathlib.Path],
) -> None:
    server, kubeconfig, state = setup
    (state / "expiry").write_text(PAST)  # every token the plugin hands out has expired already
    async with await Kube.connect(kubeconfig=str(kubeconfig), metrics=Metrics()) as kube:
        await kube.get(CONFIGMAPS, "x", "ns")  # t1 (loaded with the kubeconfig) expired: t2
        (state / "expiry").write_text(FUTURE)
        await kube.get(CONFIGMAPS, "x", "ns")  # t2 expired too: t3, valid
        await kube.get(CONFIGMAPS, "x", "ns")  # t3 still valid: no run
    assert server.tokens == ["t2", "t3", "t3"]
    assert (state / "runs").read_text() == "3"


async def test_a_refused_exec_token_is_fetched_anew_and_the_request_sent_once_more(
    setup: tuple[Server, pathlib.Path, pathlib.Path],
) -> None:
    server, kubeconfig, _ = setup
    async with await Kube.connect(kubeconfig=str(kubeconfig), metrics=Metrics()) as kube:
        await kube.get(CONFIGMAPS, "x", "ns")
        server.revoked.add("t1")  # revoked before its expiry
        got = await kube.get(CONFIGMAPS, "x", "ns")
        assert got["metadata"]["name"] == "x"
        server.revoked.add("t2")
        server.revoked.add("t3")  # a plugin whose tokens are all refused: the 401 is the answer
        with pytest.raises(KubeError) as refused:
            await kube.get(CONFIGMAPS, "x", "ns")
        assert refused.value.status == 401
    assert server.tokens == ["t1", "t1", "t2", "t2", "t3"]
