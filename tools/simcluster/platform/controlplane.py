"""Start etcd + kube-apiserver (and optionally the simulated-cluster processes) on loopback.

The binaries are built by ``tools/envtest/build.sh``; ``find_binaries`` locates them from
``ENVTEST_BIN`` or by running the (idempotent, cached) build script.

Authentication uses static bearer tokens: an admin in ``system:masters`` and the
operator, whose user name is that of its production ServiceAccount, so the RBAC in
``config/rbac/`` is exercised as it is.
"""

from __future__ import annotations

import os
import pathlib
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field

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


# Children get SIGKILL when the thread that started them dies (even by SIGKILL), so a killed test
# run or launcher leaves no etcd or apiserver behind. setpriv (util-linux) execs the binary in
# place, so the pid and process group stay the binary's own.
DEATH_SIGNAL: list[str] = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []


class ControlPlaneError(RuntimeError):
    """A process of the control plane failed to start or exited early."""


def find_binaries(*, build: bool = True) -> pathlib.Path:
    """The directory with kube-apiserver and etcd: ``$ENVTEST_BIN``, or the build script's output."""
    env = os.environ.get("ENVTEST_BIN")
    if env:
        return pathlib.Path(env)
    if not build:
        raise ControlPlaneError("ENVTEST_BIN is not set; run tools/envtest/build.sh")
    out = subprocess.run(
        ["bash", str(REPO / "tools" / "envtest" / "build.sh")],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    return pathlib.Path(out.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _insecure_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: pathlib.Path


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
    _procs: list[_Proc] = field(default_factory=list)

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
        for p in [p for p in self._procs if p.name == "kube-apiserver"]:
            self._terminate(p)
            self._procs.remove(p)

    def stop(self) -> None:
        """Stop every process, clients first. The data is thrown away, so a process that has not
        exited ``STOP_GRACE`` seconds after SIGTERM (the API server draining its connections) is
        killed rather than waited for."""
        for p in reversed(self._procs):
            t0 = time.monotonic()
            killed = self._terminate(p, STOP_GRACE)
            self.stop_seconds[f"{p.name} (SIGKILL)" if killed else p.name] = time.monotonic() - t0
        self._procs.clear()

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- access ----------------------------------------------------------------------------

    def processes(self) -> dict[str, int]:
        """Name -> pid of every process it started that still runs."""
        return {p.name: p.popen.pid for p in self._procs if p.popen.poll() is None}

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

    def _spawn(self, name: str, args: Sequence[str]) -> subprocess.Popen[bytes]:
        log = self.workdir / f"{name}.log"
        with log.open("ab") as fh:
            popen = subprocess.Popen(
                [*DEATH_SIGNAL, str(self.bindir / name), *args],
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._procs.append(_Proc(name, popen, log))
        return popen

    @staticmethod
    def _terminate(p: _Proc, grace: float = 20.0) -> bool:
        """SIGTERM, SIGKILL after ``grace`` seconds; True when it had to be killed."""
        if p.popen.poll() is not None:
            return False
        p.popen.send_signal(signal.SIGTERM)
        try:
            p.popen.wait(grace)
        except subprocess.TimeoutExpired:
            p.popen.kill()
            p.popen.wait()
            return True
        return False

    def _name_of(self, proc: subprocess.Popen[bytes]) -> str:
        return next((p.name for p in self._procs if p.popen is proc), "process")

    def _wait_ok(
        self, url: str, proc: subprocess.Popen[bytes], token: str | None = None, *, timeout: float
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        ctx = _insecure_context()
        deadline, last = time.monotonic() + timeout, "no answer"
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ControlPlaneError(
                    f"{self._name_of(proc)} exited with {proc.returncode}\n{self.logs(4000)}"
                )
            try:
                with urllib.request.urlopen(
                    urllib.request.Request(url, headers=headers), context=ctx, timeout=3
                ) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.2)
        raise ControlPlaneError(f"{url} not ready after {timeout:.0f} s: {last}\n{self.logs(4000)}")
