"""``FakeOpenStack``: the fake cloud served on two ports, Keystone and Nova, with its call log,
injected faults (500s, dropped connections, a closed socket) and the ``/_sim/`` control endpoints
on the Nova port (not logged, no auth). ``await start()`` in an event loop, ``await stop()`` there
too; the state and test controls are ``Cloud``'s."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from aiohttp import web

from simcluster.standins.openstack.aggregates import AggregatesAPI, aggregate_view
from simcluster.standins.openstack.api import (
    MAX_MICROVERSION,
    ApiFault,
    mv_str,
    nova_error,
    redact,
    requested_microversion,
)
from simcluster.standins.openstack.cloud import Call, Cloud
from simcluster.standins.openstack.keystone import KeystoneAPI
from simcluster.standins.openstack.nova import NovaAPI, service_view


class FakeOpenStack(Cloud):
    """The cloud's state (``Cloud``) and two aiohttp apps serving it."""

    def __init__(self, *, host: str = "127.0.0.1", keystone_port: int = 0, nova_port: int = 0) -> None:
        super().__init__(host=host, keystone_port=keystone_port, nova_port=nova_port)
        self._runners: dict[str, web.AppRunner] = {}
        self._sites: dict[str, web.TCPSite] = {}

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
        with self.lock:  # requests on kept-alive connections are dropped too
            self._faults[api] = ("reset", None)
        site = self._sites.pop(api, None)
        if site is not None:
            await site.stop()

    async def go_online(self, api: Literal["keystone", "nova"] = "nova") -> None:
        if api not in self._sites:
            await self._listen(api)
        with self.lock:
            self._faults.pop(api, None)

    def _keystone_app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware("keystone")])
        KeystoneAPI(self).add_routes(app.router)
        return app

    def _nova_app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware("nova")])
        r = app.router
        r.add_get("/_sim/calls", self._sim_calls)
        r.add_get("/_sim/state", self._sim_state)
        r.add_post("/_sim/fault", self._sim_fault)
        r.add_post("/_sim/computes", self._sim_computes)
        NovaAPI(self).add_routes(r)
        AggregatesAPI(self).add_routes(r)
        return app

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
                mv = requested_microversion(request) if api == "nova" else None
            except ApiFault as exc:
                self._log(api, request, None, body, exc.status)
                return exc.response()
            fault = self.active_fault(api)
            if fault == "reset":
                self._log(api, request, mv, body, 0)
                if request.transport is not None:
                    request.transport.close()
                raise ConnectionResetError("fault injected")
            resp: web.StreamResponse
            if fault == "error":
                resp = nova_error(500, "Internal Server Error", "fault injected by the test").response()
            else:
                try:
                    resp = await handler(request)
                except ApiFault as exc:
                    resp = exc.response()
            if api == "nova" and mv is not None:
                resp.headers["OpenStack-API-Version"] = f"compute {mv_str(mv)}"
                resp.headers["X-OpenStack-Nova-API-Version"] = mv_str(mv)
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
            body = redact(body)
        call = Call(
            api, request.method, request.path, dict(request.query), mv_str(mv) if mv else None, body, status
        )
        self.record(call)

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
        with self.lock:
            state = {
                "services": [service_view(s, MAX_MICROVERSION) for s in self.services.values()],
                "mapped_hosts": sorted({h.host for h in self.hypervisors.values() if h.mapped}),
                "servers": [{"id": s.id, "host": s.host, "name": s.name} for s in self.servers],
                "aggregates": [aggregate_view(a, MAX_MICROVERSION) for a in self.aggregates.values()],
            }
        return web.json_response(state)

    async def _sim_fault(self, request: web.Request) -> web.Response:
        """Body: {"fault": "error" | "reset" | null, "api": "keystone" | "nova" | "all", "seconds": n}."""
        body = await request.json()
        fault = body.get("fault")
        if fault not in (None, "error", "reset") or body.get("api", "all") not in ("keystone", "nova", "all"):
            raise nova_error(
                400, "Bad Request", "fault must be error, reset or null; api keystone, nova or all"
            )
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
