"""The manager: everything one operator process runs, started and stopped in order.

    servers (/metrics, /healthz, /readyz)  ┐
    event-loop lag (``runtime.looplag``)   │ background, for the whole life of the process
    informers (list+watch, one per kind)   ┘
    -> leader gate (a Lease; skipped with --no-leader-elect), while the caches sync
    -> wait until every cache has synced (ready)
    -> controllers (N workers each)

Before the informers start, ``run(setup=...)`` runs the caller's set-up (``run()`` below: wait until
the API server answers, retrying with backoff, then build the controllers) with the servers already
up: ``/healthz`` answers 200 and ``/readyz`` 503 meanwhile, and SIGTERM ends the wait at once.

Stopping (``stop()``, SIGTERM or SIGINT): at once the controllers' queues shut down (no
worker takes another key) and a replica still waiting for the Lease stops trying; in-flight
reconciles get ``shutdown_timeout`` seconds (``--drain-timeout``, 10 s: well inside the
kubelet's 30 s grace period) to finish, then are cancelled; the Lease is released the moment
the workers have stopped, so a standby replica takes over within about a second; then
informers and servers are cancelled. A lost Lease stops the controllers and ``run()`` raises
``LeaderElectionLost`` (the process should exit and restart). A controller whose workers end
without being asked to (a bug) makes ``run()`` raise ``ControllerStopped``: never a silent exit.

Liveness (``/healthz``, see ``health_problems``) fails only for what a restart can fix: 503 with
the reason when a worker has held one key for longer than ``queue.stuck_after``, or when the event
loop does not answer the probe (served from a thread of its own) within a second. A reflector that
has heard nothing from the API server for ``STALE_WATCH_TIMEOUTS`` inactivity timeouts is named by
readiness (``/readyz``, see ``readiness_problems``), not liveness: during an API server outage every
reflector is quiet, and restarting every replica would only delay the recovery.

Controllers are registered from outside the runtime as factories, ``Manager -> Controller``:
a factory asks the manager for shared informers (``manager.informer(ref, ...)``) and
builds its controller with ``manager.controller(name, reconciler)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import signal
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import structlog

from nova_operator.kube.client import Kube
from nova_operator.kube.errors import KubeError, Unreachable
from nova_operator.kube.resources import ResourceRef
from nova_operator.metrics import Metrics
from nova_operator.runtime.controller import Controller
from nova_operator.runtime.health import HttpServer, health_routes, metrics_routes, parse_address
from nova_operator.runtime.informer import Informer
from nova_operator.runtime.leaderelection import LeaderElector
from nova_operator.runtime.looplag import LoopLag
from nova_operator.runtime.reconciler import Reconciler
from nova_operator.runtime.scoped import ScopedInformer
from nova_operator.runtime.transform import ALL, Admits, Fields
from nova_operator.settings import Settings

log = structlog.get_logger("nova_operator.runtime.manager")

ControllerFactory = Callable[["Manager"], Controller]
AsyncControllerFactory = Callable[["Manager"], Awaitable[Controller]]
"""A factory that must ask the cluster something first (e.g. which kinds it serves)."""


STALE_WATCH_TIMEOUTS = 3
"""A reflector quiet for this many inactivity timeouts (no list, event, bookmark or new watch) is stale."""
CANCEL_GRACE = 2.0
"""After the drain timeout, how long cancelled reconciles get to unwind before the Lease is released."""


class CacheSyncTimeout(Exception):
    """The informer caches did not sync within ``watch.sync_timeout``."""


class ControllerStopped(Exception):
    """A controller's workers ended although nobody asked them to stop."""


class Manager:
    def __init__(self, kube: Kube, settings: Settings | None = None) -> None:
        self.kube = kube
        self.settings = settings if settings is not None else Settings()
        self.metrics: Metrics = kube.metrics
        self.controllers: list[Controller] = []
        self.elector: LeaderElector | None = None
        if self.settings.leader_election.enabled:
            self.elector = LeaderElector(
                kube,
                self.settings.leader_election,
                metrics=self.metrics,
                # the Lease requests on connections of their own (a test double of Kube serves them as is)
                own_connections=isinstance(kube, Kube),
            )
        self.metrics_server: HttpServer | None = None
        self.health_server: HttpServer | None = None
        self._informers: dict[tuple[ResourceRef, str | None, tuple[str, ...]], Informer] = {}
        # informers started but neither waited for nor part of readiness (``informer(optional=True)``)
        self._optional_keys: dict[tuple[ResourceRef, str | None, tuple[str, ...]], bool] = {}
        self._scoped: dict[tuple[ResourceRef, str | None], ScopedInformer] = {}
        self._stop = asyncio.Event()
        self._running = False
        self._gate = asyncio.Semaphore(max(1, self.settings.watch.max_concurrent_opens))
        self.loop_lag = LoopLag(self.metrics.loop_lag.observe)

    # -- registration ------------------------------------------------------------------------

    def informer(
        self,
        ref: ResourceRef,
        *,
        label_selector: str | None = None,
        namespaces: Sequence[str] | None = None,
        keep: Fields | None = ALL,
        optional: bool = False,
    ) -> Informer:
        """The shared informer for ``ref``, selector and namespaces (default: the watch settings).

        ``optional``: an informer the operator works without (its readers fall back to the API
        server until it has synced, e.g. one the install's RBAC may not allow): the manager starts
        it, but neither waits for its sync nor counts it in readiness. Any caller asking for the
        same informer without ``optional`` makes it required.

        ``keep``: what this caller reads of each object (``runtime.transform``); the informer stores
        the union of its callers' trees, so the default (``ALL``, every field) of any one caller
        keeps objects whole.
        """
        if namespaces is None:
            namespaces = self.settings.watch.namespaces
        key = (ref, label_selector, tuple(namespaces) if ref.namespaced else ())
        if key not in self._informers:
            if self._running:
                raise RuntimeError("informers must be registered before the manager runs")
            self._informers[key] = Informer(
                self.kube,
                ref,
                namespaces=key[2],
                label_selector=label_selector,
                settings=self.settings.watch,
                metrics=self.metrics,
                gate=self._gate,
            )
        informer = self._informers[key]
        informer.keep(keep)
        self._optional_keys[key] = optional and self._optional_keys.get(key, True)
        return informer

    def scoped_informer(
        self,
        ref: ResourceRef,
        *,
        label_selector: str | None = None,
        keep: Fields | None = ALL,
        when: Admits | None = None,
    ) -> ScopedInformer:
        """The shared informer for ``ref`` over only the namespaces it is told to cover (``keep``: as above;
        with ``when``, kept of the objects ``when`` admits only, see ``runtime.transform``).

        With ``watch.namespaces`` set, those namespaces are covered for good; either way the
        informer never lists or watches ``ref`` across all namespaces.
        """
        key = (ref, label_selector)
        if key not in self._scoped:
            if self._running:
                raise RuntimeError("informers must be registered before the manager runs")
            scoped = ScopedInformer(
                self.kube,
                ref,
                label_selector=label_selector,
                settings=self.settings.watch,
                metrics=self.metrics,
            )
            for namespace in self.settings.watch.namespaces:
                scoped.want(namespace, "settings")
            self._scoped[key] = scoped
        self._scoped[key].keep(keep, when)
        return self._scoped[key]

    def controller(self, name: str, reconciler: Reconciler) -> Controller:
        """A new controller with the manager's queue settings and metrics, already registered."""
        ctl = Controller(name, reconciler, settings=self.settings.queue, metrics=self.metrics)
        self.add_controller(ctl)
        return ctl

    def add_controller(self, controller: Controller) -> None:
        """Register ``controller`` (a no-op when it is registered already)."""
        if controller in self.controllers:
            return
        if any(c.name == controller.name for c in self.controllers):
            raise ValueError(f"duplicate controller name {controller.name!r}")
        self.controllers.append(controller)

    @property
    def informers(self) -> list[Informer]:
        return [*self._informers.values(), *self._scoped.values()]

    @property
    def required(self) -> list[Informer]:
        """The informers whose caches must sync before the controllers start (not the optional ones)."""
        return [
            *(inf for key, inf in self._informers.items() if not self._optional_keys.get(key)),
            *self._scoped.values(),
        ]

    def ready(self) -> bool:
        """Set up (the API server answered, the controllers are built) and every required cache synced."""
        return self._running and all(inf.has_synced for inf in self.required)

    def readiness_problems(self) -> list[str]:
        """Why this process is not ready (empty: it is); one line each, for ``/readyz``."""
        if not self._running:
            return ["starting: waiting for the API server"]
        if not self.ready():
            return ["caches not synced"]
        stale_after = STALE_WATCH_TIMEOUTS * self.settings.watch.inactivity_timeout
        return [
            f"watch stale: {where} heard nothing from the API server for over {stale_after:g} s"
            for key, inf in self._informers.items()
            if not self._optional_keys.get(key)
            for where in inf.stale(stale_after)
        ]

    def health_problems(self) -> list[str]:
        """Why this process is not live (empty: it is); one line each, for ``/healthz``.

        Only what a restart can fix: a stale reflector (the API server unreachable) is not here.
        """
        queue = self.settings.queue
        return [
            f"worker stuck: {key} reconciling for over {queue.stuck_after:g} s"
            for ctl in self.controllers
            for key in ctl.stuck(queue.stuck_after)
        ]

    @property
    def leading(self) -> bool:
        return self.elector.is_leader if self.elector is not None else self._running

    # -- lifecycle ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask for a graceful stop (idempotent; safe from a signal handler)."""
        self._stop.set()

    async def run(
        self, *, handle_signals: bool = False, setup: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """Run until ``stop()`` (or a signal); raises if a component fails or the lease is lost.

        ``setup``: awaited once the servers are up and before the informers start (it may register
        informers and controllers); a ``stop()`` meanwhile cancels it and ``run()`` returns.
        """
        loop = asyncio.get_running_loop()
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            async with asyncio.TaskGroup() as tg:
                background = [tg.create_task(srv.serve(), name="http") for srv in await self._servers()]
                background.append(tg.create_task(self.loop_lag.run(), name="event loop lag"))
                try:
                    if setup is not None and not await self._until_stopped(_as_coroutine(setup)):
                        return
                    self._running = True
                    background += [
                        tg.create_task(inf.run(), name=f"informer {inf.ref}") for inf in self.informers
                    ]
                    await self._main()
                finally:
                    for task in background:
                        task.cancel()
        except BaseExceptionGroup as group:
            raise _first(group) from None
        finally:
            self._running = False
            if handle_signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        log.info("signal received, stopping", signal=sig.name)
        self.stop()

    async def _servers(self) -> list[HttpServer]:
        servers: list[HttpServer] = []
        s = self.settings.servers
        if (addr := parse_address(s.metrics_bind_address)) is not None:
            self.metrics_server = HttpServer(*addr, metrics_routes(self.metrics.exposition))
            servers.append(self.metrics_server)
        if (addr := parse_address(s.health_probe_bind_address)) is not None:
            self.health_server = HttpServer(
                *addr,
                health_routes(self.ready, self.health_problems, self.readiness_problems),
                check_loop=asyncio.get_running_loop(),
            )
            servers.append(self.health_server)
        try:  # bind now, so a taken port fails the start, not a background task
            for srv in servers:
                await srv.start()
        except OSError:
            for srv in servers:
                await srv.stop()
            raise
        return servers

    async def _main(self) -> None:
        if self.elector is None:
            if await self._synced():
                await self._lead()
            return
        # Like controller-runtime: the election runs while the caches sync; the controllers start
        # once both are done. A replica leads within a second or two however many watches it opens.
        elector = self.elector
        election = asyncio.ensure_future(elector.run(self._lead_once_synced))
        stopping = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({election, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not election.done() and not elector.is_leader:
                election.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await election
        finally:
            stopping.cancel()
            election.cancel()
            await asyncio.gather(stopping, election, return_exceptions=True)

    async def _synced(self) -> bool:
        """Wait until every cache has synced; False when ``stop()`` came first."""
        if not await self._until_stopped(self._wait_for_sync()):
            return False
        log.info("caches synced", informers=len(self._informers))
        return True

    async def _lead_once_synced(self) -> None:
        if await self._synced():
            await self._lead()

    async def _wait_for_sync(self) -> None:
        try:
            async with asyncio.timeout(self.settings.watch.sync_timeout):
                await asyncio.gather(*(inf.wait_for_sync() for inf in self.required))
        except TimeoutError:
            pending = [str(inf.ref) for inf in self.required if not inf.has_synced]
            raise CacheSyncTimeout(f"caches not synced: {', '.join(pending)}") from None

    async def _until_stopped(self, coro: Coroutine[Any, Any, None]) -> bool:
        """Run ``coro`` unless ``stop()`` comes first; True when it finished."""
        work = asyncio.ensure_future(coro)
        stopping = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({work, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (work, stopping):
                if not task.done():
                    task.cancel()
            await asyncio.gather(work, stopping, return_exceptions=True)
        if work.cancelled():
            return False
        work.result()
        return True

    async def _lead(self) -> None:
        """Run every controller until ``stop()``; then drain within the shutdown (drain) timeout."""
        log.info("starting controllers", controllers=[c.name for c in self.controllers])
        tasks = {asyncio.ensure_future(c.run()): c for c in self.controllers}
        stopping = asyncio.ensure_future(self._stop.wait())
        failed: BaseException | None = None
        try:
            await asyncio.wait({*tasks, stopping}, return_when=asyncio.FIRST_COMPLETED)
            for c in self.controllers:  # at once: no worker takes another key
                c.stop()
            if not self._stop.is_set():
                ended = [t for t in tasks if t.done()]
                failed = next((t.exception() for t in ended if not t.cancelled() and t.exception()), None)
                names = ", ".join(tasks[t].name for t in ended)
                log.error("controller stopped without being asked to; stopping", controllers=names)
                failed = failed or ControllerStopped(f"controller {names} stopped without being asked to")
            await self._drain(list(tasks))
        finally:
            for c in self.controllers:
                c.stop()
            for task in (*tasks, stopping):
                task.cancel()
            _, pending = await asyncio.wait({*tasks, stopping}, timeout=CANCEL_GRACE)
            if pending:
                log.error("reconciles ignore cancellation; releasing the lease anyway", tasks=len(pending))
        results = [t.exception() for t in tasks if t.done() and not t.cancelled()]
        if failed is not None:
            raise failed
        for result in results:
            if result is not None:
                raise result

    async def _drain(self, tasks: list[asyncio.Future[None]]) -> None:
        """Wait for the workers to finish their keys, at most ``shutdown_timeout`` seconds."""
        if not tasks:
            return
        busy = sum(len(c.stuck(-1.0)) for c in self.controllers)
        timeout = self.settings.shutdown_timeout
        log.info("draining", in_flight=busy, drain_timeout=timeout)
        _, pending = await asyncio.wait(tasks, timeout=timeout)
        if pending:
            keys = [k for c in self.controllers for k in c.stuck(-1.0)]
            log.warning("reconciles still running after the drain timeout; cancelling", keys=keys)


async def _as_coroutine(setup: Callable[[], Awaitable[None]]) -> None:
    await setup()


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


async def check_reachable(kube: Kube, within: float = 10.0) -> None:
    """Raise ``Unreachable`` unless the API server answers GET /version within ``within`` seconds."""
    try:
        async with asyncio.timeout(within):
            await kube.version()
    except TimeoutError:
        raise Unreachable(f"no answer from {kube.host} within {within:.0f} s") from None
    except Unreachable:
        raise
    except KubeError as exc:
        raise Unreachable(f"{kube.host}: {exc}") from exc


RETRY_INITIAL, RETRY_MAX = 0.5, 30.0
"""Start-up: the first retry of an unreachable API server after this long, doubling to the maximum."""


async def wait_reachable(
    kube: Kube, *, initial: float = RETRY_INITIAL, maximum: float = RETRY_MAX, within: float = 10.0
) -> None:
    """Until the API server answers GET /version: each failure logged, retried with backoff.

    A restart cannot bring an API server back, so start-up waits for it rather than exiting
    (which would put the pod in CrashLoopBackOff and delay the recovery by up to 5 minutes).
    Cancellation (SIGTERM, through the manager's ``stop()``) ends the wait at once.
    """
    delay, attempt = initial, 0
    while True:
        attempt += 1
        try:
            await check_reachable(kube, within)
        except Unreachable as exc:
            log.warning(
                "cannot reach the Kubernetes API server; retrying",
                error=str(exc),
                attempt=attempt,
                retry_in=round(delay, 2),
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, maximum)
            continue
        if attempt > 1:
            log.info("the Kubernetes API server answers", attempts=attempt)
        return


async def run(
    settings: Settings,
    controllers: Sequence[ControllerFactory | AsyncControllerFactory] = (),
    *,
    kube: Kube | None = None,
    handle_signals: bool = True,
) -> None:
    """Connect, start the servers, wait until the API server answers, build the controllers, run."""
    own = kube is None
    if kube is None:
        kube = await Kube.connect(
            kubeconfig=settings.kube.kubeconfig,
            context=settings.kube.context,
            service_account_dir=settings.kube.service_account_dir,
        )
        kube.timeout = settings.kube.request_timeout
    try:
        manager = Manager(kube, settings)
        connected = kube

        async def setup() -> None:
            await wait_reachable(connected)
            for factory in controllers:
                built = factory(manager)
                manager.add_controller(await built if inspect.isawaitable(built) else built)

        await manager.run(handle_signals=handle_signals, setup=setup)
    finally:
        if own:
            await kube.close()
