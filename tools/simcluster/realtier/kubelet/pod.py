"""One pod on a stand-in node: volumes, init containers, containers, probes, deletion.

A ``PodWorker`` is driven by the pod object (``update`` on every watch event) and writes the whole
``status`` through the status subresource, only when it changed. Its life:

1. the sandbox (the pod's network, see ``network.py``; the node's network when ``hostNetwork``),
   ``/etc/hosts`` and the volumes (retried until their ConfigMaps/Secrets exist);
2. the init containers one after the other, each to success (a failure restarts it with the
   back-off, or fails the pod under ``restartPolicy: Never``);
3. the containers, each restarted by ``restartPolicy`` with the kubelet's back-off, probed by its
   startup, readiness and liveness probes;
4. on deletion (``deletionTimestamp``): preStop hooks, SIGTERM to each container's first process,
   SIGKILL once ``deletionGracePeriodSeconds`` ran out, a terminal phase written, then the object
   released (deleted with ``gracePeriodSeconds: 0`` and its uid as precondition), as the kubelet does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pathlib
import shutil
import signal
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp

from simcluster.client.asynckube import ApiError, AsyncKube
from simcluster.realtier.kubelet import containerspec, envvars, probes, volumes
from simcluster.realtier.kubelet.backoff import BackOff
from simcluster.realtier.kubelet.probestate import ProbeState, Result, Timing
from simcluster.realtier.kubelet.runtime import Image, Process, StartError
from simcluster.realtier.kubelet.status import Record, render

JSON = dict[str, Any]
log = logging.getLogger("simcluster.kubelet")
RETRY = 2.0  # seconds between attempts while an image, ConfigMap or Secret is missing
MIN_GRACE = 2.0  # the kubelet never gives a container less than this after preStop


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Sandbox:
    """A pod's network: its IP and the namespace its containers join (``None``: the node's)."""

    ip: str
    netns: str | None

    async def close(self) -> None: ...


class HostSandbox(Sandbox):
    def __init__(self, ip: str) -> None:
        self.ip, self.netns = ip, None


@dataclass
class NodeContext:
    """What a pod worker needs of its node and kubelet."""

    kube: AsyncKube
    node: str
    host_ip: str
    allocatable: Mapping[str, str]
    images: Mapping[str, Image]
    state_dir: pathlib.Path  # the kubelet's pods/ and hostpath/ live here
    backoff: BackOff = field(default_factory=BackOff)
    volume_resync: float = 10.0
    network: Any = None  # a network.PodNetwork; None: every pod on the node's network


async def _cancelled(task: asyncio.Task[Any]) -> None:
    """``task`` cancelled and ended: cancelled again while it runs on (a cancel that a library
    swallowed must not leave the pod's life running and its deletion waiting on it for good)."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=1.0)
    if not task.cancelled():
        task.exception()  # retrieved: its failure was logged by the task's own callback


def _should_restart(policy: str, code: int) -> bool:
    return policy == "Always" or (policy == "OnFailure" and code != 0)


class PodWorker:
    def __init__(self, ctx: NodeContext, pod: JSON) -> None:
        self.ctx = ctx
        self.pod = pod
        meta = pod["metadata"]
        self.uid: str = meta["uid"]
        self.name: str = meta["name"]
        self.namespace: str = meta["namespace"]
        self.path = f"/api/v1/namespaces/{self.namespace}/pods/{self.name}"
        self.dir = ctx.state_dir / "pods" / self.uid
        spec = pod["spec"]
        self.init = {c["name"]: Record(c["name"], c["image"]) for c in spec.get("initContainers") or []}
        main_waiting = "PodInitializing" if self.init else "ContainerCreating"
        self.main = {
            c["name"]: Record(c["name"], c["image"], state={"waiting": {"reason": main_waiting}})
            for c in spec["containers"]
        }
        self.procs: dict[str, Process] = {}
        self.runs: dict[str, int] = {}
        self.changed = asyncio.Event()
        self.deleting = asyncio.Event()
        self.removed = False  # the object is gone from the API
        self.terminating = False
        self.sandbox: Sandbox | None = None
        self.start_time = now_iso()
        self._pushed: JSON | None = None
        self._push_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._finished: dict[str, float] = {}  # monotonic time each container last ended
        self._regraced = asyncio.Event()  # set (and replaced) when the deletion's grace may have shrunk

    # -- driven by the watch -----------------------------------------------------------------

    def update(self, pod: JSON) -> None:
        before = self.pod["metadata"].get("deletionGracePeriodSeconds")
        self.pod = pod
        if pod["metadata"].get("deletionTimestamp"):
            self.deleting.set()
            if pod["metadata"].get("deletionGracePeriodSeconds") != before:
                self._wake_killers()
        self.changed.set()

    def gone(self) -> None:
        self.removed = True
        self.deleting.set()
        self.changed.set()
        self._wake_killers()

    def _wake_killers(self) -> None:
        """Every container being stopped looks at the grace again (a second, shorter delete, or a
        force delete), as the kubelet does: the deadline only ever moves closer."""
        woken, self._regraced = self._regraced, asyncio.Event()
        woken.set()

    # -- the life of the pod --------------------------------------------------------------------

    async def run(self) -> None:
        life: asyncio.Task[None] | None = None
        try:
            if (self.pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                life = asyncio.create_task(self._life(), name=f"pod {self.namespace}/{self.name}")
                life.add_done_callback(self._log_failure)
            await self.deleting.wait()
            log.info(
                "pod %s/%s: deleting (grace %s, gone from the API: %s)",
                self.namespace,
                self.name,
                self.pod["metadata"].get("deletionGracePeriodSeconds"),
                self.removed,
            )
            if life is not None:
                await _cancelled(life)
                await self._terminate()
            if not self.removed:
                await self._release()
            log.info("pod %s/%s: released", self.namespace, self.name)
        finally:
            if life is not None and not life.done():
                await _cancelled(life)
            await self.cleanup()

    def _log_failure(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("pod %s/%s: %r", self.namespace, self.name, task.exception())

    async def _life(self) -> None:
        log.info("pod %s/%s: starting (uid %s)", self.namespace, self.name, self.uid)
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.ctx.network is not None and not self.pod["spec"].get("hostNetwork"):
            self.sandbox = await self.ctx.network.sandbox(self.pod)
        else:
            self.sandbox = HostSandbox(self.ctx.host_ip)
        containerspec.write_etc(self.dir / "etc", self.pod, self._pod_ip(), self.ctx.network)
        await self.push()
        await self._mount_volumes()
        self._spawn(self._refresh_volumes())
        policy = self.pod["spec"].get("restartPolicy", "Always")
        for c in self.pod["spec"].get("initContainers") or []:
            rec = self.init[c["name"]]
            while True:
                code = await self._run_once(c, rec)
                if code == 0:
                    break
                if policy == "Never":
                    for main in self.main.values():
                        main.state = {"waiting": {"reason": "PodInitializing"}}
                    await self.push()
                    return
                await self._back_off(c, rec)
        for rec in self.main.values():
            rec.state = {"waiting": {"reason": "ContainerCreating"}}
        await asyncio.gather(*(self._keep_running(c) for c in self.pod["spec"]["containers"]))

    async def _keep_running(self, c: JSON) -> None:
        rec = self.main[c["name"]]
        policy = self.pod["spec"].get("restartPolicy", "Always")
        while True:
            code = await self._run_once(c, rec)
            if not _should_restart(policy, code):
                return
            await self._back_off(c, rec)

    async def _back_off(self, c: JSON, rec: Record) -> None:
        key = f"{self.uid}/{c['name']}"
        now = time.monotonic()
        remaining = self.ctx.backoff.remaining(key, self._finished.get(c["name"], now), now)
        if remaining > 0:
            delay = self.ctx.backoff.delay(key, now)
            rec.last_state = {"terminated": rec.state["terminated"]}
            rec.state = {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off {delay:.0f}s restarting failed container={c['name']} "
                    f"pod={self.name}_{self.namespace}({self.uid})",
                }
            }
            await self.push()
            await asyncio.sleep(remaining)
        self.ctx.backoff.next(key, time.monotonic())

    async def _run_once(self, c: JSON, rec: Record) -> int:
        """Start the container (waiting while it cannot), let it run, record how it ended."""
        proc = await self._start(c, rec)
        if proc is None:
            code = 128
        else:
            started = asyncio.Event()  # the kubelet's manual readiness trigger
            probers = [
                asyncio.create_task(self._probe(c, rec, proc, kind, started))
                for kind in ("startup", "readiness", "liveness")
                if c.get(f"{kind}Probe")
            ]
            try:
                code = await proc.wait()
            finally:
                for task in probers:
                    task.cancel()
                await asyncio.gather(*probers, return_exceptions=True)
            self.procs.pop(c["name"], None)
            term: JSON = {
                "exitCode": code,
                "reason": "Completed" if code == 0 else "Error",
                "startedAt": rec.state.get("running", {}).get("startedAt", now_iso()),
                "finishedAt": now_iso(),
                "containerID": rec.container_id,
            }
            if code > 128:
                term["signal"] = code - 128
            message = self._termination_message(c, code)
            if message:
                term["message"] = message
            rec.state = {"terminated": term}
        self._finished[c["name"]] = time.monotonic()
        rec.ready = rec.started = False
        await self.push()
        return code

    async def _start(self, c: JSON, rec: Record) -> Process | None:
        name = c["name"]
        while True:
            image = self.ctx.images.get(c["image"])
            waiting: JSON | None = None
            if image is None:
                waiting = {
                    "reason": "ErrImagePull",
                    "message": f'failed to pull image "{c["image"]}": the stand-in has no root tree for it',
                }
            else:
                try:
                    env = envvars.build(self.pod, c, await self._objects(), self.ctx.allocatable, image.env)
                    spec = containerspec.build(
                        self.pod,
                        c,
                        image,
                        env,
                        pod_dir=self.dir,
                        hostpath_root=self._hostpath_root(),
                        netns=self.sandbox.netns if self.sandbox else None,
                    )
                except envvars.ConfigError as exc:
                    waiting = {"reason": "CreateContainerConfigError", "message": str(exc)}
                except (ApiError, aiohttp.ClientError, TimeoutError) as exc:
                    log.warning("pod %s/%s: reading its objects: %s", self.namespace, self.name, exc)
                    await asyncio.sleep(RETRY)
                    continue
            if waiting is not None:
                if rec.state.get("terminated"):
                    rec.last_state = {"terminated": rec.state["terminated"]}
                rec.state = {"waiting": waiting}
                await self.push()
                await self._wait_change(RETRY)
                continue
            break
        run = self.runs[name] = self.runs.get(name, -1) + 1
        run_dir = self.dir / "containers" / name / str(run)
        shutil.rmtree(self.dir / "containers" / name / str(run - 1), ignore_errors=True)
        run_dir.mkdir(parents=True, exist_ok=True)
        term_log = run_dir / "termination-log"
        term_log.touch()
        term_log.chmod(0o666)
        spec["mounts"].append(
            {
                "source": str(term_log),
                "target": c.get("terminationMessagePath") or containerspec.DEFAULT_TERMINATION_LOG,
                "readOnly": False,
            }
        )
        if rec.state.get("terminated"):
            rec.last_state = {"terminated": rec.state["terminated"]}
        if run > 0:
            rec.restart_count += 1
        rec.container_id = f"simkubelet://{uuid.uuid4().hex}"
        try:
            proc = await Process.start(spec, run_dir, self.dir / "containers" / name / f"{run}.log")
        except StartError as exc:
            now = now_iso()
            rec.state = {
                "terminated": {
                    "exitCode": 128,
                    "reason": "StartError",
                    "message": str(exc),
                    "startedAt": now,
                    "finishedAt": now,
                    "containerID": rec.container_id,
                }
            }
            return None
        self.procs[name] = proc
        rec.state = {"running": {"startedAt": now_iso()}}
        rec.started = not c.get("startupProbe")
        rec.ready = rec.started and not c.get("readinessProbe") and name in self.main
        await self.push()
        return proc

    def _termination_message(self, c: JSON, code: int) -> str:
        run = self.dir / "containers" / c["name"] / str(self.runs[c["name"]])
        log_file = self.dir / "containers" / c["name"] / f"{self.runs[c['name']]}.log"
        return containerspec.termination_message(c, code, run, log_file)

    # -- probes --------------------------------------------------------------------------------

    async def _probe(self, c: JSON, rec: Record, proc: Process, kind: str, started: asyncio.Event) -> None:
        """One probe worker, as the kubelet's: it ticks every ``periodSeconds`` from the container's
        start and skips the ticks before ``initialDelaySeconds``; liveness and readiness skip until
        the startup probe succeeded. A startup success syncs the pod, and that sync runs the
        readiness probe at once (the kubelet's manual trigger), not at its next tick."""
        spec = c[f"{kind}Probe"]
        state = ProbeState(kind, Timing.of(spec))
        loop = asyncio.get_running_loop()
        begun = loop.time()
        tick = 0
        while True:
            if kind == "startup" and rec.started:
                return
            if state.due(loop.time() - begun) and (kind == "startup" or rec.started):
                outcome = await probes.run(spec, c, self._pod_ip(), state.timing.timeout, proc.exec)
                changed = state.record(outcome)
                if kind == "readiness" and changed:
                    rec.ready = state.result == Result.SUCCESS
                    await self.push()
                elif kind == "startup" and state.result == Result.SUCCESS:
                    rec.started = True
                    rec.ready = not c.get("readinessProbe")
                    started.set()
                    await self.push()
                    return
                if state.on_hold:  # liveness or startup failed: the container is restarted
                    grace = spec.get("terminationGracePeriodSeconds")
                    log.info(
                        "pod %s/%s: container %s failed its %s probe",
                        self.namespace,
                        self.name,
                        c["name"],
                        kind,
                    )
                    self._spawn(self._kill(c, proc, self._grace(grace)))
                    return
            # The next tick; ticks missed while a probe ran are dropped, as a Go ticker drops them.
            tick = max(tick + 1, int((loop.time() - begun) / state.timing.period) + 1)
            wait = max(0.0, begun + tick * state.timing.period - loop.time())
            if kind == "readiness" and not started.is_set() and c.get("startupProbe"):
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await started.wait()
                if started.is_set():
                    tick -= 1  # the trigger runs out of turn; the ticker keeps its phase
                    continue
            else:
                await asyncio.sleep(wait)

    # -- stopping ------------------------------------------------------------------------------

    def _grace(self, override: int | None = None) -> float:
        if override is not None:
            return float(override)
        deletion = self.pod["metadata"].get("deletionGracePeriodSeconds")
        if deletion is not None and self.pod["metadata"].get("deletionTimestamp"):
            return float(deletion)
        return float(self.pod["spec"].get("terminationGracePeriodSeconds", 30))

    async def _kill(self, c: JSON, proc: Process, grace: float, regrace: asyncio.Event | None = None) -> None:
        """preStop, SIGTERM to the first process, SIGKILL when ``grace`` ran out, or sooner when the
        deletion's grace shrinks after ``regrace`` (the event current when ``grace`` was read: a
        change during the preStop hook is not lost)."""
        event = regrace or self._regraced
        started = time.monotonic()
        pre_stop = (c.get("lifecycle") or {}).get("preStop")
        if pre_stop and proc.returncode is None and grace > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await probes.run(pre_stop, c, self._pod_ip(), grace, proc.exec)
        if proc.returncode is not None:
            return
        remaining = max(grace - (time.monotonic() - started), MIN_GRACE if grace > 0 else 0.0)
        proc.signal(signal.SIGTERM)
        deadline = time.monotonic() + remaining
        exited = asyncio.ensure_future(proc.wait())  # not cancelled on the way out (as the shield was)
        while True:
            regraced = asyncio.ensure_future(event.wait())
            timeout = max(deadline - time.monotonic(), 0.0)
            done, _ = await asyncio.wait({exited, regraced}, timeout=timeout, return_when="FIRST_COMPLETED")
            regraced.cancel()
            if exited in done:
                return
            if regraced not in done:  # the grace ran out
                proc.signal(signal.SIGKILL)
                await proc.kill()
                return
            event = self._regraced  # the next change, taken before this one is read
            deadline = min(deadline, time.monotonic() + self._grace_left())

    def _grace_left(self) -> float:
        """The grace of a stop in progress from now on, after the deletion changed: none once the pod
        is gone from the API (a force delete), else the deletion's own, at least ``MIN_GRACE``."""
        return 0.0 if self.removed else max(self._grace(), MIN_GRACE)

    async def _terminate(self) -> None:
        self.terminating = True
        regrace = self._regraced
        grace = 0.0 if self.removed else self._grace()
        containers = {c["name"]: c for c in self.pod["spec"].get("initContainers") or []}
        containers.update({c["name"]: c for c in self.pod["spec"]["containers"]})

        async def stop(name: str, proc: Process) -> None:
            await self._kill(containers[name], proc, grace, regrace)
            rec = self.init.get(name) or self.main[name]
            code = proc.returncode if proc.returncode is not None else 137
            term: JSON = {
                "exitCode": code,
                "reason": "Completed" if code == 0 else "Error",
                "startedAt": rec.state.get("running", {}).get("startedAt", now_iso()),
                "finishedAt": now_iso(),
                "containerID": rec.container_id,
            }
            rec.state, rec.ready = {"terminated": term}, False

        await asyncio.gather(*(stop(n, p) for n, p in list(self.procs.items())))
        self.procs.clear()
        if not self.removed:
            await self.push(terminal=True)

    async def _release(self) -> None:
        body = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": self.uid},
        }
        try:
            await self.ctx.kube.request("DELETE", self.path, body)
        except ApiError as exc:
            if exc.status not in (404, 409):
                raise

    async def cleanup(self) -> None:
        """Kill whatever still runs, close the sandbox, remove the pod's directory."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for proc in list(self.procs.values()):
            with contextlib.suppress(Exception):
                await proc.kill()
        self.procs.clear()
        if self.ctx.network is not None:
            self.ctx.network.detach_hosts(self.uid)
        if self.sandbox is not None:
            with contextlib.suppress(Exception):
                await self.sandbox.close()
            self.sandbox = None
        await asyncio.to_thread(shutil.rmtree, self.dir, True)

    # -- status ---------------------------------------------------------------------------------

    def _pod_ip(self) -> str:
        return self.sandbox.ip if self.sandbox else ""

    async def push(self, *, terminal: bool = False) -> None:
        """Write the status when it differs from what was written last."""
        async with self._push_lock:
            pod = dict(self.pod)
            previous = (
                (self._pushed or {}).get("conditions")
                or (self.pod.get("status") or {}).get("conditions")
                or []
            )
            status = render(
                {**pod, "status": {**(pod.get("status") or {}), "conditions": previous}},
                list(self.init.values()),
                list(self.main.values()),
                sandbox_ready=self.sandbox is not None and not terminal,
                host_ip=self.ctx.host_ip,
                pod_ip=self._pod_ip(),
                start_time=self.start_time,
                now=now_iso(),
                terminal=terminal,
            )
            if status == self._pushed or self.removed:
                return
            try:
                await self.ctx.kube.merge_patch(f"{self.path}/status", {"status": status})
            except ApiError as exc:
                if exc.status == 404:
                    return
                log.warning("pod %s/%s: status not written: %s", self.namespace, self.name, exc)
                self._spawn(self._push_later())
                return
            except (aiohttp.ClientError, TimeoutError) as exc:
                log.warning("pod %s/%s: status not written: %s", self.namespace, self.name, exc)
                self._spawn(self._push_later())
                return
            self._pushed = status

    async def _push_later(self) -> None:
        await asyncio.sleep(1.0)
        await self.push()

    # -- volumes --------------------------------------------------------------------------------

    async def _objects(self) -> envvars.FetchedObjects:
        configmaps, secrets = envvars.references(self.pod)
        base = f"/api/v1/namespaces/{self.namespace}"
        cms = {n: await self.ctx.kube.get(f"{base}/configmaps/{n}") for n in sorted(configmaps)}
        sec = {n: await self.ctx.kube.get(f"{base}/secrets/{n}") for n in sorted(secrets)}
        return envvars.FetchedObjects(cms, sec)

    def _fs_group(self) -> int | None:
        value = (self.pod["spec"].get("securityContext") or {}).get("fsGroup")
        return None if value is None else int(value)

    async def _project_volumes(self) -> None:
        objects = await self._objects()
        pod = {
            **self.pod,
            "status": {**(self.pod.get("status") or {}), "podIP": self._pod_ip(), "hostIP": self.ctx.host_ip},
        }
        for vol in self.pod["spec"].get("volumes") or []:
            files = volumes.project(vol, pod, objects, self.ctx.allocatable)
            if files is not None:
                target = self.dir / "volumes" / vol["name"]
                await asyncio.to_thread(volumes.write_atomic, target, files, self._fs_group())

    async def _mount_volumes(self) -> None:
        while True:
            try:
                await self._project_volumes()
                for vol in self.pod["spec"].get("volumes") or []:
                    volumes.prepare_local(
                        vol, self.dir / "volumes" / vol["name"], self._hostpath_root(), self._fs_group()
                    )
                return
            except volumes.MountError as exc:
                log.info("pod %s/%s: FailedMount: %s", self.namespace, self.name, exc)
                await self._wait_change(RETRY)
            except (ApiError, aiohttp.ClientError, TimeoutError) as exc:
                log.warning("pod %s/%s: reading its volumes: %s", self.namespace, self.name, exc)
                await asyncio.sleep(RETRY)

    def _hostpath_root(self) -> pathlib.Path:
        return self.ctx.state_dir / "hostpath" / self.ctx.node

    async def _refresh_volumes(self) -> None:
        while True:
            await asyncio.sleep(self.ctx.volume_resync)
            with contextlib.suppress(volumes.MountError, ApiError, aiohttp.ClientError, TimeoutError):
                await self._project_volumes()

    # -- helpers --------------------------------------------------------------------------------

    async def _wait_change(self, seconds: float) -> None:
        """Until the pod changes, at most ``seconds``. Not ``asyncio.wait_for``: on Python 3.11 it
        returns the inner result when the waiter is cancelled in the same turn the event is set, and a
        deletion does both (``update`` sets ``deleting`` and ``changed``), so the cancel was lost."""
        self.changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self.changed.wait()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
