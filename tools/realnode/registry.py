"""A private registry for real nodes: Debian's distribution registry (package ``docker-registry``)
asking for a user and password (htpasswd, bcrypt), serving plain HTTP on ``127.0.0.1:<port>`` inside
the nodes' network namespace, where every node's containerd pulls from it.

containerd reaches a plain-HTTP registry only when the registry's ``hosts.toml`` says so: one is
written per node under its ``config_path`` (``configs.registry_hosts_dir``). Images are pushed with
``skopeo`` (package ``skopeo``) from the OCI layout tars ``realnode.images`` writes, with the
registry's credentials: the registry has nothing it was not given by an authenticated push.

    registry = Registry(nodes, workdir / "registry", "puller", password).start()
    ref = registry.push(images.build(spec), "private/app", "1")  # 127.0.0.1:5000/private/app:1
    ...
    registry.stop()
"""

from __future__ import annotations

import base64
import ctypes
import ctypes.util
import json
import pathlib
import shutil
import subprocess
import sys
from dataclasses import dataclass

from simcluster.platform.process import ManagedProcess, spawn, wait_until

from realnode.configs import registry_hosts_dir
from realnode.nodes import RealNodeError, RealNodes

REGISTRY_BIN = "docker-registry"
SKOPEO_BIN = "skopeo"
# an anonymous GET /v2/ answers 401 once the registry serves (and asks for credentials)
PROBE = """
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=2)
except urllib.error.HTTPError as exc:
    sys.exit(0 if exc.code == 401 else 1)
except OSError:
    sys.exit(1)
sys.exit(2)
"""


def bcrypt(password: str) -> str:
    """``password`` hashed as the registry's htpasswd wants it (bcrypt, ``$2b$``), by the system's
    libcrypt (libxcrypt): Python's ``crypt`` module is deprecated, and no bcrypt package is needed."""
    lib = ctypes.CDLL(ctypes.util.find_library("crypt") or "libcrypt.so.1")
    lib.crypt_gensalt.restype = ctypes.c_char_p
    lib.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int]
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    salt = lib.crypt_gensalt(b"$2b$", 10, None, 0)  # no random bytes given: libcrypt draws its own
    hashed = lib.crypt(password.encode(), salt) if salt else None
    if not hashed or not hashed.startswith(b"$2b$"):
        raise RealNodeError("libcrypt made no bcrypt hash")
    return str(hashed.decode())


def missing_packages() -> list[str]:
    """The Debian packages (``tools/realnova/install.sh``) the registry needs and this machine lacks."""
    needs = (("docker-registry", REGISTRY_BIN), ("skopeo", SKOPEO_BIN))
    return [package for package, binary in needs if not shutil.which(binary)]


def docker_config_json(host: str, username: str, password: str) -> str:
    """The ``.dockerconfigjson`` of a ``kubernetes.io/dockerconfigjson`` Secret for ``host``."""
    auth = base64.b64encode(f"{username}:{password}".encode()).decode()
    return json.dumps({"auths": {host: {"username": username, "password": password, "auth": auth}}})


@dataclass
class Registry:
    """``start()`` serves the registry and tells every node's containerd about it; ``stop()`` ends it."""

    nodes: RealNodes
    workdir: pathlib.Path
    username: str
    password: str
    port: int = 5000  # inside the nodes' own network namespace: no other user of the port
    process: ManagedProcess | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Registry:
        missing = missing_packages()
        if missing:
            raise RealNodeError(f"missing {', '.join(missing)}: run tools/realnova/install.sh")
        self.workdir.mkdir(parents=True, exist_ok=True)
        htpasswd = self.workdir / "htpasswd"
        htpasswd.write_text(f"{self.username}:{bcrypt(self.password)}\n")
        htpasswd.chmod(0o600)
        config = self.workdir / "config.yml"
        config.write_text(
            "version: 0.1\n"
            "log:\n  level: info\n"
            f"storage:\n  filesystem:\n    rootdirectory: {self.workdir / 'data'}\n"
            f"http:\n  addr: {self.host}\n"
            f"auth:\n  htpasswd:\n    realm: realnode\n    path: {htpasswd}\n"
        )
        serve = self.nodes.in_netns([REGISTRY_BIN, "serve", str(config)])
        self.process = spawn("registry", serve, self.workdir)
        probe = self.nodes.in_netns([sys.executable, "-c", PROBE, f"http://{self.host}/v2/"])
        wait_until(
            lambda: subprocess.run(probe, capture_output=True).returncode == 0,
            self.process,
            what="the registry",
            timeout=60,
            error=RealNodeError,
        )
        for node in self.nodes.nodes:
            hosts = registry_hosts_dir(node) / self.host / "hosts.toml"
            hosts.parent.mkdir(parents=True, exist_ok=True)
            url = f"http://{self.host}"
            hosts.write_text(f'server = "{url}"\n\n[host."{url}"]\n  capabilities = ["pull", "resolve"]\n')
        return self

    def push(self, layout_tar: pathlib.Path, repository: str, tag: str) -> str:
        """Copy the image of an OCI layout tar to ``<host>/<repository>:<tag>``, as the user; its ref."""
        ref = f"{self.host}/{repository}:{tag}"
        argv = [
            SKOPEO_BIN,
            "--insecure-policy",  # no /etc/containers/policy.json needed: the image is ours
            "copy",
            "--dest-tls-verify=false",
            "--dest-creds",
            f"{self.username}:{self.password}",
            f"oci-archive:{layout_tar}",
            f"docker://{ref}",
        ]
        done = subprocess.run(self.nodes.in_netns(argv), capture_output=True, text=True)
        if done.returncode != 0:
            raise RealNodeError(f"skopeo copy to {ref} failed:\n{done.stderr[-4000:]}")
        return ref

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None
