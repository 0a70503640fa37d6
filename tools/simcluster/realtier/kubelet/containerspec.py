"""What a container of a pod sees, from the pod object and the pod's directory (pure but for the
files it writes there): the runtime's spec (``build``: root tree, mounts, identity, command and
environment), the ``/etc`` files every container gets (``write_etc``) and the termination message
read back after it ended (``termination_message``).
"""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import Mapping
from typing import Any

from simcluster.realtier.kubelet import envvars, volumes
from simcluster.realtier.kubelet.runtime import Image

JSON = dict[str, Any]
MESSAGE_LIMIT = 4096  # bytes of terminationMessagePath read into the status
DEFAULT_TERMINATION_LOG = "/dev/termination-log"


def api_backed(pod: JSON, name: str) -> bool:
    """Whether volume ``name`` holds API objects' data (the kubelet mounts these read-only)."""
    vol: JSON = next((v for v in pod["spec"].get("volumes") or [] if v["name"] == name), {})
    return any(k in vol for k in ("configMap", "secret", "downwardAPI", "projected"))


def volume_source(pod: JSON, name: str, pod_dir: pathlib.Path, hostpath_root: pathlib.Path) -> pathlib.Path:
    """The node's directory behind volume ``name`` of ``pod``."""
    vol = next((v for v in pod["spec"].get("volumes") or [] if v["name"] == name), None)
    if vol is None:
        raise envvars.ConfigError(f'volume "{name}" is not defined')
    if "hostPath" in vol:
        return volumes.host_path(vol, hostpath_root)
    return pathlib.Path(pod_dir / "volumes" / name)


def build(
    pod: JSON,
    c: JSON,
    image: Image,
    env: Mapping[str, str],
    *,
    pod_dir: pathlib.Path,
    hostpath_root: pathlib.Path,
    netns: str | None,
) -> JSON:
    """Container ``c`` of ``pod`` as the runtime's spec; ``envvars.ConfigError`` when it cannot run."""
    psc = pod["spec"].get("securityContext") or {}
    csc = c.get("securityContext") or {}
    uid = csc.get("runAsUser", psc.get("runAsUser"))
    gid = csc.get("runAsGroup", psc.get("runAsGroup"))
    if csc.get("runAsNonRoot", psc.get("runAsNonRoot")) and not uid:
        raise envvars.ConfigError("container has runAsNonRoot and image will run as root")
    groups = [int(g) for g in psc.get("supplementalGroups") or []]
    if psc.get("fsGroup") is not None:
        groups.append(int(psc["fsGroup"]))
    mounts: list[JSON] = []
    for vm in c.get("volumeMounts") or []:
        source = volume_source(pod, vm["name"], pod_dir, hostpath_root)
        sub = vm.get("subPath") or envvars.expand(vm.get("subPathExpr") or "", env)
        if sub:
            if sub.startswith("/") or ".." in pathlib.PurePosixPath(sub).parts:
                raise envvars.ConfigError(f"invalid subPath {sub!r}")
            source = source / sub
            if not source.exists() and not source.is_symlink():
                source.mkdir(parents=True, exist_ok=True)
        mounts.append(
            {
                "source": str(source),
                "target": vm["mountPath"],
                "readOnly": bool(vm.get("readOnly")) or api_backed(pod, vm["name"]),
            }
        )
    targets = {m["target"] for m in mounts}
    for name in ("hosts", "hostname", "resolv.conf"):
        if f"/etc/{name}" not in targets:
            mounts.insert(
                0, {"source": str(pod_dir / "etc" / name), "target": f"/etc/{name}", "readOnly": False}
            )
    argv = envvars.argv(c, env, image.entrypoint, image.cmd)
    if not argv:
        raise envvars.ConfigError("no command specified")
    return {
        "image_root": str(image.root),
        "image_binds": sorted(image.binds.items()),
        "mounts": mounts,
        "hostname": pod["spec"].get("hostname") or pod["metadata"]["name"],
        "netns": netns,
        "uid": None if uid is None else int(uid),
        "gid": None if gid is None else int(gid),
        "groups": groups,
        "privileged": bool(csc.get("privileged")),
        "read_only_root": bool(csc.get("readOnlyRootFilesystem")),
        "cwd": c.get("workingDir") or image.workdir,
        "argv": argv,
        "env": dict(env),
    }


def resolv(namespace: str) -> str:
    return f"search {namespace}.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"


def write_etc(etc: pathlib.Path, pod: JSON, ip: str, network: Any) -> None:
    """The pod's ``hosts``, ``hostname`` and ``resolv.conf`` in ``etc``; ``network`` (a
    ``network.PodNetwork``, or None) writes the hosts file and keeps it current."""
    etc.mkdir(parents=True, exist_ok=True)
    hostname = pod["spec"].get("hostname") or pod["metadata"]["name"]
    hosts = (
        network.hosts(pod, ip)
        if network is not None
        else f"# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n{ip}\t{hostname}\n"
    )
    for name, text in (
        ("hosts", hosts),
        ("hostname", hostname + "\n"),
        ("resolv.conf", resolv(pod["metadata"]["namespace"])),
    ):
        (etc / name).write_text(text)
        (etc / name).chmod(0o644)
    if network is not None:
        network.attach_hosts(pod, ip, etc / "hosts")


def termination_message(c: JSON, code: int, run_dir: pathlib.Path, log_file: pathlib.Path) -> str:
    """What the container left in its termination log (``run_dir``), or under
    ``FallbackToLogsOnError`` the tail of its log after a failure."""
    text: str
    try:
        with (run_dir / "termination-log").open("rb") as fh:
            text = fh.read(MESSAGE_LIMIT).decode(errors="replace")
    except OSError:
        text = ""
    if not text and code != 0 and c.get("terminationMessagePolicy") == "FallbackToLogsOnError":
        with contextlib.suppress(OSError):
            lines = log_file.read_bytes().decode(errors="replace").splitlines()[-80:]
            text = "\n".join(lines)[-2048:]
    return text
