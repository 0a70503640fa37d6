"""Containers as process trees: images are root trees, each run a ``shim.py`` child (see there).

``Image(root, binds=...)`` is what an image name maps to: a directory used as the read-only lower
layer of each container's overlay, plus host paths bound read-only into it (e.g. the host's
``/usr``), and the image config a runtime would read (entrypoint, cmd, env, working directory).
``Process.start(spec, ...)`` runs one container and returns once its command was exec'd (or raises
``StartError``); ``signal`` reaches its first process (as the CRI does), ``kill`` its whole PID
namespace, ``wait`` gives the exit status.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SHIM = pathlib.Path(__file__).resolve().parent / "shim.py"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Image:
    root: pathlib.Path
    binds: Mapping[str, str] = field(default_factory=dict)  # container path -> host path (read-only)
    env: Mapping[str, str] = field(default_factory=lambda: {"PATH": DEFAULT_PATH})
    entrypoint: Sequence[str] = ()
    cmd: Sequence[str] = ()
    workdir: str = "/"


class StartError(Exception):
    """The container's command could not be started (reason ``StartError``, exit code 128)."""


def _read_report(fd: int) -> str:
    chunks = []
    with os.fdopen(fd, "rb") as fh:
        while chunk := fh.read(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


@dataclass
class Process:
    """One run of a container."""

    shim: asyncio.subprocess.Process
    pid: int  # host pid of the container's first process (its process group)
    spec_path: pathlib.Path

    @classmethod
    async def start(cls, spec: Mapping[str, Any], run_dir: pathlib.Path, log: pathlib.Path) -> Process:
        for sub in ("rootfs", "upper", "work"):
            (run_dir / sub).mkdir(parents=True, exist_ok=True)
        full = {
            **spec,
            "rootfs": str(run_dir / "rootfs"),
            "upper": str(run_dir / "upper"),
            "work": str(run_dir / "work"),
        }
        spec_path = run_dir / "spec.json"
        spec_path.write_text(json.dumps(full))
        spec_path.chmod(0o600)
        read_fd, write_fd = os.pipe()
        try:
            with log.open("ab") as out:
                shim = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-S",
                    str(SHIM),
                    "run",
                    str(spec_path),
                    str(write_fd),
                    pass_fds=(write_fd,),
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    start_new_session=True,
                )
        finally:
            os.close(write_fd)
        try:
            report = await asyncio.to_thread(_read_report, read_fd)
        except BaseException:  # cancelled while starting: nothing may outlive the kubelet's interest
            with contextlib.suppress(ProcessLookupError):
                shim.kill()
            await shim.wait()
            raise
        pid = next((int(line.split()[1]) for line in report.splitlines() if line.startswith("pid ")), 0)
        errors = [line[6:] for line in report.splitlines() if line.startswith("error ")]
        if errors or not pid:
            await shim.wait()
            raise StartError("; ".join(errors) or f"the runtime exited with {shim.returncode}")
        return cls(shim, pid, spec_path)

    async def wait(self) -> int:
        return await self.shim.wait()

    @property
    def returncode(self) -> int | None:
        return self.shim.returncode

    def signal(self, sig: int) -> None:
        """Signal the container's first process only, as the CRI's StopContainer does (containerd's
        task kill without ``all``): its children hear of it from it, or die with its PID namespace
        when it exits. A PID 1 with no handler for the signal ignores it (a shell running ``sleep``)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, sig)

    async def kill(self) -> int:
        """SIGKILL the container's first process (the kernel then kills its whole PID namespace)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        return await self.wait()

    async def exec(self, argv: Sequence[str], seconds: float) -> tuple[int | None, str]:
        """Run ``argv`` in the container (its namespaces, user, env); ``None`` on timeout."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-S",
            str(SHIM),
            "exec",
            str(self.spec_path),
            str(self.pid),
            "--",
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            async with asyncio.timeout(seconds):
                out, _ = await proc.communicate()
        except TimeoutError:
            return None, ""
        finally:  # timed out or cancelled: the exec'd process is killed (its child by pdeathsig)
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        return proc.returncode, out.decode(errors="replace")
