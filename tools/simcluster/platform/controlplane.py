"""Start etcd + kube-apiserver (and optionally the simulated-cluster processes) on loopback.

The binaries are built by ``tools/envtest/build.sh``; ``find_binaries`` locates them from
``ENVTEST_BIN`` or by running the (idempotent, cached) build script.

Authentication uses static bearer tokens: an admin in ``system:masters`` and the
operator, whose user name is that of its production ServiceAccount, so the RBAC in
``config/rbac/`` is exercised as it is.
"""

from __future__ import annotations

import collections
import os
import pathlib
import secrets
import shutil
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from simcluster.platform.process import ManagedProcess, Processes, wait_until

REPO = pathlib.Path(__file__).resolve().parents[3]
OPERATOR_NAMESPACE = "nova-system"
OPERATOR_SERVICE_ACCOUNT = "nova-operator"
OPERATOR_USER = f"system:serviceaccount:{OPERATOR_NAMESPACE}:{OPERATOR_SERVICE_ACCOUNT}"
# Room for 300+ Services (a Nova has a handful): a /16 of ClusterIPs, apart from kwok's pod range.
SERVICE_CIDR = "10.96.0.0/16"
STOP_GRACE = 3.0  # seconds a process may take to exit on SIGTERM when the whole control plane stops
# With ``audit=True`` the API server logs (Metadata level, one JSON line per request once its response
# is complete) every request of the operator's user, and the status writes of anyone else to the
# kinds an install waits on: what the benchmark counts requests and dates child changes by.
AUDIT_POLICY = f"""apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  users: ["{OPERATOR_USER}"]
- level: Metadata
  verbs: ["update", "patch"]
  resources:
  - group: "apps"
    resources: ["deployments/status"]
  - group: "batch"
    resources: ["jobs/status"]
  - group: "k8s.mariadb.com"
    resources: ["mariadbs/status", "databases/status", "users/status", "grants/status"]
  - group: "gateway.networking.k8s.io"
    resources: ["httproutes/status"]
  - group: "rabbitmq.com"
    resources: ["rabbitmqclusters/status"]
- level: None
"""


class ControlPlaneError(RuntimeError):
    """A process of the control plane failed to start or exited early."""


def find_binaries(*, build: bool = True, kwok: bool = False) -> pathlib.Path:
    """The directory with kube-apiserver and etcd (and kwok, with ``kwok``): ``$ENVTEST_BIN``, or the
    build script's output. When ``$ENVTEST_BIN`` lacks the kwok asked for, the script's output too: it
    builds kwok, or waits for the build of it in progress (CI builds kwok beside the tiers that come
    before the simulated cluster's, and ``make test`` finds the control plane without it)."""
    env = os.environ.get("ENVTEST_BIN")
    if env and (not kwok or (pathlib.Path(env) / "kwok").exists()):
        return pathlib.Path(env)
    if not build:
        raise ControlPlaneError(
            f"ENVTEST_BIN is {'not set' if not env else 'without kwok'}; run tools/envtest/build.sh"
        )
    script_env = {k: v for k, v in os.environ.items() if k not in ("ENVTEST_NO_KWOK", "ENVTEST_ONLY_CORE")}
    out = subprocess.run(
        ["bash", str(REPO / "tools" / "envtest" / "build.sh")],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
        env=script_env if kwok else None,
    )
    return pathlib.Path(out.stdout.strip().splitlines()[-1])


# Where ``free_port`` looks first: below the kernel's ephemeral range, from this port up.
LOWEST_PORT = 10000
EPHEMERAL_RANGE = pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel gives outgoing connections (``ip_local_port_range``; Linux's default if
    unreadable)."""
    try:
        low, high = (int(n) for n in EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def bindable(port: int) -> bool:
    """Whether no socket holds ``port`` on any IPv4 address now (a bind on all of them succeeds)."""
    with socket.socket() as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
        return True


_ISSUED: collections.deque[int] = collections.deque(maxlen=256)  # the latest ports free_port gave
_RANDOM = secrets.SystemRandom()  # not the module's shared generator, which a test may have seeded


def free_port(pick: Callable[[int, int], int] = _RANDOM.randint) -> int:
    """A port free now, for a server that binds it a moment later.

    Chosen below the ephemeral range, so no outgoing connection made meanwhile is given it: a port
    the kernel handed out (a bind to port 0) could be taken by any connection before the server
    bound it, as a real-tier Keystone found (``bind(): Address already in use``) on a busy machine.
    Falls back to the kernel's choice when that range is too small."""
    low, _ = ephemeral_range()
    if low - LOWEST_PORT >= 1000:
        for _ in range(100):
            port = pick(LOWEST_PORT, low - 1)
            # not one this process handed out lately: its server may not have bound it yet
            if port not in _ISSUED and bindable(port):
                _ISSUED.append(port)
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        chosen: int = s.getsockname()[1]
        return chosen


def _insecure_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


@dataclass
class ControlPlane:
    """etcd + kube-apiserver on free loopback ports, in ``workdir``.

    ``start()`` blocks until the API server answers ``/readyz`` and the ``default``
    namespace exists; ``stop()`` terminates every process it started (apiserver first).
    """

    workdir: pathlib.Path
    bindir: pathlib.Path
    start_timeout: float = 90.0
    admin_token: str = field(default_factory=lambda: secrets.token_hex(16))
    operator_token: str = field(default_factory=lambda: secrets.token_hex(16))
    api_port: int = 0
    etcd_port: int = 0
    audit: bool = False
    # more kube-apiserver flags, after the others (realnode: the kubelet client and its egress)
    extra_apiserver_args: Sequence[str] = ()
    # real kubelets mount a pod's ServiceAccount token; kwok and the stand-in have no use for it
    service_account_admission: bool = False
    # what ``stop()`` took per process ("... (SIGKILL)": it outlived its grace period)
    stop_seconds: dict[str, float] = field(default_factory=dict)
    _procs: Processes = field(init=False)

    def __post_init__(self) -> None:
        self._procs = Processes(self.workdir)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> ControlPlane:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for attempt in (1, 2):  # a port taken between free_port() and bind: retry once
            try:
                self._start_once()
                return self
            except ControlPlaneError:
                self.stop()
                if attempt == 2:
                    raise
        return self

    def _start_once(self) -> None:
        w = self.workdir
        self.etcd_port, peer_port, self.api_port = free_port(), free_port(), free_port()
        sa_key = w / "sa.key"
        if not sa_key.exists():
            subprocess.run(
                ["openssl", "genrsa", "-out", str(sa_key), "2048"], check=True, capture_output=True
            )
        (w / "tokens.csv").write_text(
            f'{self.admin_token},envtest-admin,uid-admin,"system:masters"\n'
            f"{self.operator_token},{OPERATOR_USER},uid-nova-operator,"
            f'"system:serviceaccounts,system:serviceaccounts:{OPERATOR_NAMESPACE}"\n'
        )
        shutil.rmtree(w / "etcd", ignore_errors=True)
        etcd = self._spawn(
            "etcd",
            [
                "--name=envtest",
                f"--data-dir={w / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=envtest=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        self._wait_ok(f"http://127.0.0.1:{self.etcd_port}/health", etcd, timeout=30)
        self.start_apiserver()

    def start_apiserver(self) -> None:
        """Start (or restart, after ``stop_apiserver``) kube-apiserver on the same port."""
        w = self.workdir
        api = self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                f"--cert-dir={w / 'pki'}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.api_port}",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={w / 'sa.key'}",
                f"--service-account-signing-key-file={w / 'sa.key'}",
                f"--token-auth-file={w / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                *([] if self.service_account_admission else ["--disable-admission-plugins=ServiceAccount"]),
                "--allow-privileged=true",
                *self._audit_flags(),
                *self.extra_apiserver_args,
            ],
        )
        self._wait_ok(f"{self.server}/readyz", api, self.admin_token, timeout=self.start_timeout)
        self._wait_ok(f"{self.server}/api/v1/namespaces/default", api, self.admin_token, timeout=30)
        self.write_kubeconfig()

    def _audit_flags(self) -> list[str]:
        if not self.audit:
            return []
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY)
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
            "--audit-log-maxsize=0",  # never rotate: the benchmark reads the whole file
        ]

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver only (etcd keeps the data), for restart tests."""
        for p in [p for p in self._procs.running if p.name == "kube-apiserver"]:
            p.stop(20.0)
            self._procs.running.remove(p)

    def kill_apiserver(self) -> None:
        """SIGKILL kube-apiserver (a crash: watches end without a goodbye); ``start_apiserver`` again."""
        for p in [p for p in self._procs.running if p.name == "kube-apiserver"]:
            p.kill()
            self._procs.running.remove(p)

    def stop(self) -> None:
        """Stop every process, clients first. The data is thrown away, so a process that has not
        exited ``STOP_GRACE`` seconds after SIGTERM (the API server draining its connections) is
        killed rather than waited for."""
        self.stop_seconds.update(self._procs.stop_all(STOP_GRACE))

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- access ----------------------------------------------------------------------------

    def processes(self) -> dict[str, int]:
        """Name -> pid of every process it started that still runs."""
        return {p.name: p.pid for p in self._procs.running if p.alive}

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def kubeconfig(self) -> pathlib.Path:
        return self.workdir / "kubeconfig"

    @property
    def audit_log(self) -> pathlib.Path:
        """The audit log (JSON lines, the operator's requests), when started with ``audit=True``."""
        return self.workdir / "audit.log"

    @property
    def ca_file(self) -> pathlib.Path:
        return self.workdir / "pki" / "apiserver.crt"

    def write_kubeconfig(self) -> None:
        """A kubeconfig with two contexts: ``admin`` (current) and ``operator``."""
        self.kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\n"
            f'clusters:\n- name: envtest\n  cluster:\n    server: "{self.server}"\n'
            f'    certificate-authority: "{self.ca_file}"\n'
            f'users:\n- name: envtest-admin\n  user:\n    token: "{self.admin_token}"\n'
            f'- name: nova-operator\n  user:\n    token: "{self.operator_token}"\n'
            "contexts:\n"
            "- name: admin\n  context:\n    cluster: envtest\n    user: envtest-admin\n"
            "    namespace: default\n"
            "- name: operator\n  context:\n    cluster: envtest\n    user: nova-operator\n"
            f"    namespace: {OPERATOR_NAMESPACE}\n"
            "current-context: admin\n"
        )

    def logs(self, tail_bytes: int = 20_000) -> str:
        """The tail of every process log, for a failed test's report."""
        parts = []
        for log in sorted(self.workdir.glob("*.log")):
            data = log.read_bytes()[-tail_bytes:]
            parts.append(f"===== {log.name} (last {len(data)} bytes) =====\n{data.decode(errors='replace')}")
        return "\n".join(parts)

    # -- internals -------------------------------------------------------------------------

    def _spawn(self, name: str, args: Sequence[str]) -> ManagedProcess:
        """A control plane binary from ``bindir``, its log ``<workdir>/<name>.log``, stopped by ``stop``."""
        return self._procs.spawn(name, [str(self.bindir / name), *args])

    def _wait_ok(self, url: str, proc: ManagedProcess, token: str | None = None, *, timeout: float) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        ctx = _insecure_context()
        last = ["no answer"]

        def ok() -> bool:
            try:
                with urllib.request.urlopen(
                    urllib.request.Request(url, headers=headers), context=ctx, timeout=3
                ) as resp:
                    return bool(resp.status == 200)
            except (urllib.error.URLError, OSError) as exc:
                last[0] = str(exc)
                return False

        try:
            wait_until(ok, proc, what=f"{proc.name} ({url})", timeout=timeout, error=ControlPlaneError)
        except ControlPlaneError as exc:
            raise ControlPlaneError(f"{exc}\nlast answer: {last[0]}\n{self.logs(4000)}") from None
