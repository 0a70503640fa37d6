"""The operator as its pod runs it, without a kubelet: what a pod's process gets, made by hand.

* ``request_token``: a bound ServiceAccount token from the TokenRequest API (bound to a Secret,
  so deleting the Secret invalidates the token, as deleting a pod does its token);
* ``write_mount`` / ``rotate_token``: a directory laid out like the kubelet's projected
  ServiceAccount volume (``..<timestamp>/`` with ``token``, ``ca.crt``, ``namespace``, the
  ``..data`` link swapped atomically on rotation, top-level links through it);
* ``pod_process``: argv and environment of a rendered container spec (its command or the image's
  ENTRYPOINT, its args, its env with the downward API resolved) plus what the kubelet adds
  (``KUBERNETES_SERVICE_HOST/PORT``) and nothing else: no kubeconfig. The only change is the
  listen address of ``--*-bind-address`` flags: a pod has its own network namespace, a test
  process shares the host's, so each port is moved to a free loopback port (``ports`` says where).

Nothing here imports the operator.
"""

from __future__ import annotations

import datetime as dt
import os
import pathlib
import shutil
import sys
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from simcluster.client.kube import Kube
from simcluster.platform.controlplane import free_port

MOUNT_ENV = "NOVA_OPERATOR_SERVICE_ACCOUNT_DIR"  # the operator's test-only override of the mount path
IMAGE_ENTRYPOINT = ["nova-operator"]  # the Dockerfile's ENTRYPOINT
_FILES = ("token", "ca.crt", "namespace")


def request_token(
    kube: Kube, namespace: str, service_account: str, *, bound_secret: str | None = None, seconds: int = 3600
) -> str:
    """A token for ``namespace/service_account`` (valid ``seconds``), bound to a Secret if named."""
    spec: dict[str, Any] = {"expirationSeconds": seconds}
    if bound_secret is not None:
        secret = kube.get(f"/api/v1/namespaces/{namespace}/secrets/{bound_secret}")
        spec["boundObjectRef"] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "name": bound_secret,
            "uid": secret["metadata"]["uid"],
        }
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
    resp = kube.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token", body)
    token: str = resp["status"]["token"]
    return token


def _stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("..%Y_%m_%d_%H_%M_%S.%f")


def write_mount(mount: pathlib.Path, *, token: str, ca: pathlib.Path, namespace: str) -> pathlib.Path:
    """The projected volume at ``mount`` (created), as the kubelet writes it."""
    mount.mkdir(parents=True, exist_ok=True)
    data = mount / _stamp()
    data.mkdir()
    (data / "token").write_text(token)
    shutil.copyfile(ca, data / "ca.crt")
    (data / "namespace").write_text(namespace)
    (mount / "..data").symlink_to(data.name)
    for name in _FILES:
        (mount / name).symlink_to(f"..data/{name}")
    return mount


def rotate_token(mount: pathlib.Path, token: str) -> None:
    """Swap in a new token the kubelet's way: a new timestamped directory, ``..data`` renamed over."""
    old = (mount / "..data").resolve()
    data = mount / _stamp()
    data.mkdir()
    for name in _FILES:
        shutil.copyfile(old / name, data / name)
    (data / "token").write_text(token)
    tmp = mount / "..data_tmp"
    tmp.symlink_to(data.name)
    tmp.rename(mount / "..data")
    shutil.rmtree(old)


@dataclass
class PodProcess:
    argv: list[str]
    env: dict[str, str]
    ports: dict[int, int] = field(default_factory=dict)  # container port -> loopback port

    def changed_args(self, container: Mapping[str, Any]) -> set[str]:
        """The flags whose value differs from the container spec's (only listen addresses may)."""
        args = list(container.get("args") or [])
        ours = self.argv[len(self.argv) - len(args) :]
        return {a.partition("=")[0] for a, b in zip(args, ours, strict=True) if a != b}


def _field(path: str, pod: Mapping[str, str]) -> str:
    if path not in pod:
        raise ValueError(f"downward API field {path!r}: not simulated here")
    return pod[path]


def pod_process(
    container: Mapping[str, Any],
    *,
    server: str,
    mount: pathlib.Path,
    namespace: str,
    pod_name: str,
    service_account: str,
) -> PodProcess:
    """argv and env of ``container`` as the kubelet would start it in a pod of ``namespace``."""
    pod = {
        "metadata.namespace": namespace,
        "metadata.name": pod_name,
        "spec.serviceAccountName": service_account,
        "status.podIP": "127.0.0.1",
    }
    ports = {int(p["containerPort"]): free_port() for p in container.get("ports") or []}
    argv = list(container.get("command") or IMAGE_ENTRYPOINT)
    exe = shutil.which(argv[0], path=os.path.dirname(sys.executable))
    if exe is None:
        raise FileNotFoundError(f"{argv[0]}: not installed next to {sys.executable}")
    argv[0] = exe
    for arg in container.get("args") or []:
        flag, eq, value = arg.partition("=")
        if eq and flag.endswith("-bind-address") and ":" in value:
            port = int(value.rsplit(":", 1)[1])
            if port in ports:
                arg = f"{flag}=127.0.0.1:{ports[port]}"
        argv.append(arg)
    url = urllib.parse.urlsplit(server)
    env = {
        "PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin",
        "HOME": str(mount.parent),
        "KUBERNETES_SERVICE_HOST": url.hostname or "",
        "KUBERNETES_SERVICE_PORT": str(url.port or 443),
        MOUNT_ENV: str(mount),
    }
    for var in container.get("env") or []:
        if "value" in var:
            env[var["name"]] = str(var["value"])
        elif "fieldRef" in (var.get("valueFrom") or {}):
            env[var["name"]] = _field(var["valueFrom"]["fieldRef"]["fieldPath"], pod)
        else:
            raise ValueError(f"env {var['name']}: only values and fieldRefs are simulated")
    return PodProcess(argv, env, ports)
