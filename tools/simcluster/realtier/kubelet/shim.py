"""The container runtime's per-container process (standard library only; run as root).

``python shim.py run SPEC STATUS_FD`` starts the container that SPEC (JSON) describes: it joins the
pod's network namespace (if any), unshares mount, UTS and PID namespaces and forks the container's
first process, which is PID 1 of its namespace and leads its own session (``setsid``). That process
mounts the image (an overlay on the image's root tree, so each run starts from the image), the
image's read-only binds, ``/proc``, a minimal ``/dev`` and the volume mounts, pivots into the new
root, sets the hostname, drops to the container's user (no capabilities and ``no_new_privs`` unless
privileged) and execs the command. Every mount lives only in the container's mount namespace, so
nothing is left on the host once its processes are gone.

The shim writes ``pid <host pid>`` to STATUS_FD (and ``error <message>`` if the exec fails, exit 128)
and exits with the container's status (128 + signal when it was killed). Both the shim and the
container carry a parent-death signal: if the kubelet dies, its containers die.

``python shim.py exec SPEC PID -- ARGV...`` runs ARGV inside the running container whose first
process is PID (its namespaces, root, user and environment): exec probes and preStop hooks.
"""

from __future__ import annotations

import ctypes
import json
import os
import pathlib
import signal
import socket
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SYS_PIVOT_ROOT = 155  # x86_64
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {source} on {target}",
    )


def inside(root: str, path: str) -> str:
    """``path`` (absolute, in the container) resolved under ``root``: symlinks are followed as the
    container would see them, so an absolute link in the image never points at the host."""
    parts = [p for p in path.split("/") if p and p != "."]
    resolved: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        candidate = os.path.join(root, *resolved, part)
        if os.path.islink(candidate):
            hops += 1
            if hops > 40:
                raise OSError(f"too many symlinks in {path}")
            link = os.readlink(candidate)
            if link.startswith("/"):
                resolved = []
            parts = [p for p in link.split("/") if p and p != "."] + parts
            continue
        resolved.append(part)
    return os.path.join(root, *resolved)


def bind(source: str, target: str, read_only: bool) -> None:
    mount(source, target, None, MS_BIND | MS_REC)
    if read_only:
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def mount_target(root: str, path: str, is_file: bool) -> str:
    target = inside(root, path)
    if is_file:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            with open(target, "a"):
                pass
    else:
        os.makedirs(target, exist_ok=True)
    return target


def build_root(spec: dict[str, Any]) -> None:
    """Mount the container's filesystem at ``spec['rootfs']`` and pivot into it."""
    rootfs = spec["rootfs"]
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount(
        "overlay",
        rootfs,
        "overlay",
        0,
        f"lowerdir={spec['image_root']},upperdir={spec['upper']},workdir={spec['work']}",
    )
    layers = []
    for i, (path, source) in enumerate(spec.get("image_binds", [])):
        target = mount_target(rootfs, path, os.path.isfile(source))
        if os.path.isfile(source):
            bind(source, target, True)
            continue
        # A directory of the host the image shares (its /usr) is a read-only lower layer too, with a
        # writable layer of this run on top: mount points the volumes need below it (a node's
        # /lib/modules) are created there, as a runtime creates them in the image's root.
        upper, work = f"{spec['upper']}.{i}", f"{spec['work']}.{i}"
        os.makedirs(upper, exist_ok=True)
        os.makedirs(work, exist_ok=True)
        mount("overlay", target, "overlay", 0, f"lowerdir={source},upperdir={upper},workdir={work}")
        layers.append(target)
    proc = mount_target(rootfs, "/proc", False)
    mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    dev = mount_target(rootfs, "/dev", False)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID, "mode=755,size=65536k")
    for name in DEVICES:
        if os.path.exists(f"/dev/{name}"):
            bind(f"/dev/{name}", mount_target(rootfs, f"/dev/{name}", True), False)
    for name, link in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(link, os.path.join(dev, name))
    shm = mount_target(rootfs, "/dev/shm", False)
    mount("shm", shm, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=65536k")
    for m in spec.get("mounts", []):
        bind(m["source"], mount_target(rootfs, m["target"], os.path.isfile(m["source"])), m["readOnly"])
    if spec.get("read_only_root"):
        for target in [rootfs, *layers]:
            mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    os.chdir(rootfs)
    _check(libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    _check(libc.umount2(b".", MNT_DETACH), "umount old root")
    os.chdir("/")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def become_user(spec: dict[str, Any]) -> None:
    """The container's user and groups; unless privileged: no capabilities at all, no_new_privs."""
    uid, gid = spec.get("uid") or 0, spec.get("gid") or 0
    os.setgroups(sorted(set(spec.get("groups", []))))
    privileged = spec.get("privileged", False)
    if not privileged:
        last = int(pathlib.Path("/proc/sys/kernel/cap_last_cap").read_text())
        for cap in range(last + 1):
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if not privileged:
        libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        header = _CapHeader(0x20080522, 0)
        data = (_CapData * 2)()
        _check(libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")
        _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    # set last: a change of credentials clears the parent-death signal
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def exec_command(spec: dict[str, Any], argv: list[str], report: int | None) -> None:
    env = dict(spec["env"])
    try:
        os.chdir(spec.get("cwd") or "/")
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        if report is not None:
            os.write(report, f"error {argv[0]}: {exc.strerror or exc}\n".encode())
        os._exit(128)


def wait_status(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def run(spec: dict[str, Any], report: int) -> int:
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:
        return 137
    if spec.get("netns"):
        fd = os.open(spec["netns"], os.O_RDONLY)
        _check(libc.setns(fd, CLONE_NEWNET), "setns net")
        os.close(fd)
    _check(libc.unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWPID), "unshare")
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            build_root(spec)
            socket.sethostname(spec["hostname"])
            become_user(spec)
            os.set_inheritable(report, False)
        except BaseException as exc:
            os.write(report, f"error {exc}\n".encode())
            os._exit(128)
        exec_command(spec, spec["argv"], report)
    os.write(report, f"pid {pid}\n".encode())
    os.close(report)
    return wait_status(pid)


def enter(spec: dict[str, Any], target: int, argv: list[str]) -> int:
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    fds = [
        (os.open(f"/proc/{target}/ns/{ns}", os.O_RDONLY), flag)
        for ns, flag in (
            ("net", CLONE_NEWNET),
            ("uts", CLONE_NEWUTS),
            ("pid", CLONE_NEWPID),
            ("mnt", CLONE_NEWNS),
        )
    ]
    for fd, flag in fds:
        _check(libc.setns(fd, flag), f"setns {flag:#x}")
        os.close(fd)
    pid = os.fork()
    if pid == 0:
        try:
            become_user(spec)
        except BaseException as exc:
            sys.stderr.write(f"exec: {exc}\n")
            os._exit(126)
        exec_command(spec, argv, 2)
    return wait_status(pid)


def main(args: list[str]) -> int:
    with open(args[1]) as fh:
        spec = json.load(fh)
    if args[0] == "run":
        return run(spec, int(args[2]))
    if args[0] == "exec":
        return enter(spec, int(args[2]), args[4:])
    raise SystemExit(f"usage: shim.py run SPEC FD | exec SPEC PID -- ARGV (not {args[0]})")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
