"""Real nodes: a kubelet on containerd per node, a CNI bridge network and kube-proxy, in namespaces of
their own, joined to a control plane the project starts (``simcluster.SimCluster``).

``RealNodes(cluster, workdir, count=N).start()`` returns once every node is Ready and schedulable;
``stop()`` ends every process it started and every container, removes the cgroups, and leaves nothing
behind; ``leftovers()`` says what is left, if anything (for tests). Recipe and traps:
``/work/shared/design/real-kubelet.md`` (numbers below refer to its traps).

Layout:

* One network namespace, held by a ``sleep`` started with ``unshare --net`` (no ``ip netns add``:
  no bind mount on the host). In it: ``lo``; a veth pair whose two ends both stay inside (this
  kernel has no dummy driver, trap 3), carrying node *n*'s IP ``10.87.0.(n+1)``; one bridge per node
  for its pods' ``10.88.(n-1).0/24``; kube-proxy's nftables table (trap 9).
* The host's API server is reached at its own address, ``127.0.0.1:<port>``, through
  ``realnode.forward``: the kubeconfigs and the serving certificate stay those of the control plane.
* Per node, a mount namespace prepared by ``node-init.sh``: its own ``/sys`` with the host's cgroup
  mounts (trap 2), overlays on ``/run`` and ``/var/lib`` and a bind on ``/var/log``, all kept in the
  node's state directory (trap 6), the global sysctls the kubelet sets masked (trap 5). containerd
  and the kubelet run in it, with their sockets and state at their default paths; each node has a
  cgroup root of its own in every hierarchy.
* The kubelets and kube-proxy authenticate with ServiceAccount tokens bound to the ``system:node``
  and ``system:node-proxier`` ClusterRoles (the control plane knows static tokens only).

A janitor process (``realnode.janitor``) outlives the owner: if the owner dies without ``stop()``,
even by SIGKILL, it ends what containerd started (shims, containers) and removes the cgroups.

The API server on the host reaches the kubelets (``kubectl logs``, ``exec``, ``port-forward``) when
the control plane was started with ``KubeletAccess.prepare()``'s flags and ``access`` is given: its
egress goes through ``realnode.forward connect`` into the namespace, with a client certificate the
kubelets trust.
"""

from __future__ import annotations

import atexit
import os
import pathlib
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from simcluster.client.kube import Kube, KubeError
from simcluster.platform.controlplane import REPO, ControlPlane
from simcluster.platform.process import ManagedProcess, spawn

from realnode import cleanup, cpu_weight, dns, host, images
from realnode.access import KubeletAccess
from realnode.configs import cni_config, containerd_config, containerd_root, kube_proxy_config, kubelet_config
from realnode.host import HOST_PATHS, find_binaries, missing_packages
from realnode.images import ImageSpec
from realnode.node import Node
from realnode.store import clone

HERE = pathlib.Path(__file__).resolve().parent
NODE_INIT = HERE / "node-init.sh"
NICE = ["nice", "-n", "10"]  # containers inherit it through the shim (trap 17)
# Where pods reach the API server (the ``kubernetes`` Service's endpoint): the forwarder, in the namespace.
API_IP = "10.87.0.1"
KUBE_SYSTEM = "kube-system"


class Cluster(Protocol):
    """What the nodes need of a started control plane: ``simcluster.SimCluster`` has it (its controller
    manager clears a new node's not-ready taint, its scheduler places pods)."""

    control_plane: ControlPlane
    kube: Kube


class RealNodeError(RuntimeError):
    """A node's process failed to start, or a node did not turn Ready."""


def _python_env() -> dict[str, str]:
    """This environment with ``tools/`` on the path, for the helpers run as ``python -m realnode.*``."""
    path = os.pathsep.join(p for p in (str(REPO / "tools"), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def _alive(proc: ManagedProcess | None) -> bool:
    return proc is not None and proc.alive


def _stop(proc: ManagedProcess | None, grace: float = 10.0) -> None:
    if proc is not None:
        proc.stop(grace)


def _wait(check: Callable[[], bool], timeout: float, what: str, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RealNodeError(f"{what}: not after {timeout:.0f} s")
        time.sleep(interval)


def _write_if_changed(path: pathlib.Path, text: str) -> None:
    """kube-proxy exits when its config file is rewritten, even unchanged (trap 8)."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


@dataclass
class RealNodes:
    """``count`` real nodes for ``cluster`` (started), with state and logs in ``workdir``."""

    cluster: Cluster
    workdir: pathlib.Path
    count: int = 1
    bindir: pathlib.Path | None = None
    image_specs: Sequence[ImageSpec] = ()
    ready_timeout: float = 180.0
    name_prefix: str = "realnode"  # node names are <prefix>-<n>
    names: Sequence[str] = ()  # or these, one per node (``count`` is then their number)
    labels: Mapping[str, str] = field(default_factory=dict)  # on every node, from its registration
    taints: Sequence[str] = ()  # ``key=value:Effect``, on every node from its registration
    node_taints: Mapping[str, Sequence[str]] = field(default_factory=dict)  # or these, by node name
    # host directories each node overlays (its own upper layer in its state directory): where the
    # hostPath volumes of its pods would otherwise create files on the host (e.g. /etc, /usr/lib)
    overlays: Sequence[str] = ()
    access: KubeletAccess | None = None  # prepared for the control plane: logs, exec, port-forward
    # a store's root (``realnode.store.ensure``): each node's containerd starts from a copy of it, its
    # images already unpacked
    store: pathlib.Path | None = None
    dns: bool = True  # cluster DNS (``realnode.dns``): CoreDNS behind kube-dns, Ready before start() returns
    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    nodes: list[Node] = field(default_factory=list)
    netns_holder: ManagedProcess | None = None
    net_inode: int | None = None
    janitor: subprocess.Popen[bytes] | None = None  # not a ManagedProcess: it must outlive this one
    egress: ManagedProcess | None = None  # the API server's way to the kubelets (``access``)
    forwarder: ManagedProcess | None = None
    kube_proxy: ManagedProcess | None = None
    relays: list[ManagedProcess] = field(default_factory=list)
    startup_seconds: float = 0.0
    dns_seconds: float = 0.0  # of startup_seconds: from the nodes Ready to the first name resolved
    _host_settings: dict[str, str] = field(default_factory=dict)
    _host_paths_before: set[str] = field(default_factory=set)
    _started: bool = False

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> RealNodes:
        t0 = time.monotonic()
        missing = missing_packages()
        if missing:
            raise RealNodeError(f"missing {', '.join(missing)}: run tools/realnova/install.sh")
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.names:
            self.count = len(self.names)
        if self.bindir is None:
            self.bindir = find_binaries()
        self._host_settings = host.settings()
        self._host_paths_before = {p for p in HOST_PATHS if os.path.lexists(p)}
        self._started = True
        atexit.register(self.stop)
        try:
            self._start_janitor()
            specs = [images.pause_image(self.bindir), *self.image_specs]
            if self.dns:
                specs.append(dns.coredns_image(dns.find_binary()))
            tars = [images.build(spec) for spec in specs]
            self._network()
            self.traces.save(self.traces_file)
            self._forward()
            self._kubernetes_endpoint()
            kubelet_token, proxy_token = self._identities()
            for n in range(1, self.count + 1):
                given = self.names[n - 1] if self.names else ""
                state = self.workdir / f"node-{n}"
                node = Node(n, self.tag, state, prefix=self.name_prefix, given_name=given)
                self.nodes.append(node)
                self._node_up(node, kubelet_token, list(zip(specs, tars, strict=True)))
            self._kube_proxy(proxy_token)
            self._wait_ready()
            if self.dns:
                self._cluster_dns()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        """Stop kube-proxy, the kubelets, every container, containerd, the namespaces; remove the
        cgroups. Idempotent."""
        if not self._started:
            return
        self._started = False
        atexit.unregister(self.stop)
        _stop(self.kube_proxy)
        for node in self.nodes:
            _stop(node.kubelet)
        for node in self.nodes:
            _stop(node.containerd)
        # What containerd leaves (its shims, trap 14), the containers and the node-init holders: every
        # process in the namespaces or the cgroups.
        spare = {
            p.pid
            for p in (self.forwarder, self.egress, self.netns_holder, self.janitor, *self.relays)
            if p is not None
        }
        cleanup.sweep(self.traces, spare)
        for node in self.nodes:
            _stop(node.init, 5)
        _stop(self.forwarder, 5)
        for relay in self.relays:
            _stop(relay, 5)
        _stop(self.egress, 5)
        _stop(self.netns_holder, 5)
        if self.janitor is not None and self.janitor.stdin is not None:
            self.janitor.stdin.close()  # it sweeps once more, finds nothing, and exits
            try:
                self.janitor.wait(30)
            except subprocess.TimeoutExpired:
                self.janitor.kill()
                self.janitor.wait()

    def __enter__(self) -> RealNodes:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- access ----------------------------------------------------------------------------

    @property
    def traces(self) -> cleanup.Traces:
        """What identifies these nodes' processes and cgroups (``realnode.cleanup``)."""
        return cleanup.Traces(
            self.net_inode,
            [n.mnt_inode for n in self.nodes if n.mnt_inode is not None],
            [Node(n, self.tag, self.workdir).cgroup_root for n in range(1, self.count + 1)],
        )

    @property
    def traces_file(self) -> pathlib.Path:
        return self.workdir / "traces.json"

    def in_netns(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run in the nodes' network namespace (the host's mount namespace)."""
        assert self.netns_holder is not None
        return ["nsenter", f"--net=/proc/{self.netns_holder.pid}/ns/net", "--", *argv]

    def in_cluster(self, argv: Sequence[str], namespace: str = "default") -> list[str]:
        """``argv`` run as a pod in ``namespace`` resolves and reaches the cluster: in the nodes'
        network namespace (Services through kube-proxy's rules, the API server at the control plane's
        own address through the forwarder) and a mount namespace of its own whose
        ``/etc/resolv.conf`` names the cluster's DNS (``dns.resolv_conf``). For a process of the
        host, such as the operator run locally; it keeps the host's files otherwise."""
        resolv = self.workdir / f"resolv-{namespace}.conf"
        _write_if_changed(resolv, dns.resolv_conf(namespace))
        script = 'mount --bind "$0" /etc/resolv.conf && exec "$@"'
        private = ["unshare", "--mount", "--propagation", "private"]
        return self.in_netns([*private, "sh", "-c", script, str(resolv), *argv])

    def relay(self, address: str, ports: Sequence[int], upstream: str | None = None) -> None:
        """Servers of the host at ``upstream:port`` (default ``address``: an address of the host's
        own) reached at ``address`` and the same ports from the nodes and
        their pods: the address on the namespace's ``lo``, and ``realnode.forward relay`` between
        the two. With ``upstream`` (e.g. ``127.0.0.1``), ``address`` need not exist on the host.
        Called again for the same address (more ports later), it adds a relay of those ports."""
        assert self.netns_holder is not None
        shown = subprocess.run(
            self.in_netns(["ip", "-o", "-4", "addr", "show", "dev", "lo"]),
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        if f" {address}/32 " not in shown:
            self._run_in_netns("ip", "addr", "add", f"{address}/32", "dev", "lo")
        netns = f"/proc/{self.netns_holder.pid}/ns/net"
        name = f"relay-{address}-{len(self.relays)}"
        to = ["--to", upstream] if upstream is not None and upstream != address else []
        self.relays.append(self._helper(name, ["relay", netns, address, *(str(p) for p in ports), *to]))

    def publish(self, port: int, target: str, target_port: int, address: str = "127.0.0.1") -> None:
        """``address:port`` of the host (its loopback) leads to ``target:target_port`` as the nodes'
        namespace reaches it (a Service's ClusterIP, through kube-proxy's rules there):
        ``realnode.forward publish``, stopped with the nodes."""
        assert self.netns_holder is not None
        netns = f"/proc/{self.netns_holder.pid}/ns/net"
        argv = ["publish", netns, address, str(port), target, str(target_port)]
        self.relays.append(self._helper(f"publish-{port}", argv))

    def mount_path(self, node: Node, path: str) -> pathlib.Path:
        """``path`` as the node sees it (its own ``/run``, ``/var/lib`` and overlays), from the host."""
        assert node.init is not None
        return pathlib.Path(f"/proc/{node.init.pid}/root") / path.lstrip("/")

    def logs(self, tail_bytes: int = 8000) -> str:
        parts = []
        for log in sorted(self.workdir.glob("**/*.log")):
            data = log.read_bytes()[-tail_bytes:]
            parts.append(f"===== {log.relative_to(self.workdir)} =====\n{data.decode(errors='replace')}")
        return "\n".join(parts)

    def changed_host_settings(self) -> list[str]:
        """The global kernel settings (``host.GLOBAL_SETTINGS``) that differ from before ``start()``."""
        now = host.settings()
        return [f"{p}: {v} -> {now.get(p)}" for p, v in self._host_settings.items() if now.get(p) != v]

    def leftovers(self) -> list[str]:
        """What of these nodes is still there: processes in their namespaces or cgroups, cgroups,
        host mounts under the workdir, host paths they created, changed global settings, host
        links or nftables tables with their names."""
        found: list[str] = []
        roots = self.traces.cgroup_roots
        for pid in cleanup.pids():
            why = cleanup.belongs(pid, self.traces)
            if why and not cleanup.zombie(pid):
                found.append(f"process {pid} {why}: {cleanup.cmdline(pid)}")
        for root in roots:
            found += [f"cgroup {d}" for d in cleanup.cgroup_dirs(root)]
        mounts = pathlib.Path("/proc/self/mountinfo").read_text()
        found += [
            f"host mount {line.split()[4]}" for line in mounts.splitlines() if str(self.workdir) in line
        ]
        found += [
            f"host path {p}" for p in HOST_PATHS if os.path.lexists(p) and p not in self._host_paths_before
        ]
        found += self.changed_host_settings()
        found += [f"relay {proc.pid}: {proc.name}" for proc in self.relays if proc.alive]
        if self.access is not None and f"@{self.access.name}" in pathlib.Path("/proc/net/unix").read_text():
            found.append(f"abstract socket @{self.access.name}")
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
        found += [f"host link {w}" for w in links.split() if self.tag in w]
        tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
        found += [f"host nftables {line}" for line in tables.splitlines() if "kube-proxy" in line]
        return found

    # -- network ---------------------------------------------------------------------------

    def _spawn(self, name: str, argv: Sequence[str], log: pathlib.Path | None = None) -> ManagedProcess:
        """``argv`` by the one process wrapper, its log ``log`` (default ``<workdir>/<name>.log``)."""
        if log is None:
            return spawn(name, argv, self.workdir)
        return spawn(log.stem, argv, log.parent)

    def _start_janitor(self) -> None:
        """``realnode.janitor``: it outlives this process (no parent-death signal, a session of its own)
        and sweeps the traces when the pipe it reads ends, that is when this process stops it or dies."""
        self.traces.save(self.traces_file)
        with (self.workdir / "janitor.log").open("ab") as fh:
            self.janitor = subprocess.Popen(
                [sys.executable, "-m", "realnode.janitor", str(self.traces_file)],
                stdin=subprocess.PIPE,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=_python_env(),
            )

    def _run_in_netns(self, *argv: str) -> None:
        subprocess.run(self.in_netns(argv), check=True, capture_output=True)

    def _network(self) -> None:
        self.netns_holder = self._spawn("netns", ["unshare", "--net", "--", "sleep", "infinity"])
        holder = self.netns_holder.pid
        host = cleanup.ns_inode(os.getpid(), "net")
        _wait(
            lambda: cleanup.ns_inode(holder, "net") not in (None, host) or not _alive(self.netns_holder),
            10,
            "the network namespace",
            0.02,
        )
        if not _alive(self.netns_holder):
            raise RealNodeError(f"unshare --net failed\n{self.logs()}")
        self.net_inode = cleanup.ns_inode(holder, "net")
        a, b = f"rn{self.tag}a", f"rn{self.tag}b"
        self._run_in_netns("ip", "link", "set", "lo", "up")
        self._run_in_netns("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        for n in range(self.count + 1):
            self._run_in_netns("ip", "addr", "add", f"10.87.0.{n + 1}/24", "dev", a)  # API_IP, node IPs
        self._run_in_netns("ip", "link", "set", a, "up")
        self._run_in_netns("ip", "link", "set", b, "up")
        # the node itself routes to ClusterIPs through a default route (kube-proxy's DNAT does the rest)
        self._run_in_netns("ip", "route", "add", "default", "dev", a)
        # per-namespace: bridged pod-to-pod replies pass kube-proxy's DNAT (trap 9)
        self._run_in_netns("sysctl", "-qw", "net.ipv4.ip_forward=1", "net.bridge.bridge-nf-call-iptables=1")

    def _helper(self, name: str, args: Sequence[str]) -> ManagedProcess:
        """``python -m realnode.forward ARGS``, once it says ready."""
        proc = spawn(name, [sys.executable, "-m", "realnode.forward", *args], self.workdir, env=_python_env())
        _wait(lambda: "ready" in proc.output() or not _alive(proc), 30, name)
        if not _alive(proc):
            raise RealNodeError(f"{name} exited\n{proc.output()}")
        return proc

    def _forward(self) -> None:
        assert self.netns_holder is not None
        netns = f"/proc/{self.netns_holder.pid}/ns/net"
        port = self.cluster.control_plane.api_port
        self.forwarder = self._helper("forward", ["listen", netns, str(port), "127.0.0.1", API_IP])
        if self.access is not None:
            self.egress = self._helper("egress", ["connect", netns, self.access.name])

    def _kubernetes_endpoint(self) -> None:
        """The ``kubernetes`` Service leads pods to the forwarder (the control plane's API server
        reconciles no endpoints of its own: ``--endpoint-reconciler-type=none``)."""
        self.cluster.kube.apply(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": "kubernetes-realnode",
                    "labels": {
                        "kubernetes.io/service-name": "kubernetes",
                        "endpointslice.kubernetes.io/managed-by": "realnode",
                    },
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": [API_IP], "conditions": {"ready": True}}],
                "ports": [{"name": "https", "port": self.cluster.control_plane.api_port, "protocol": "TCP"}],
            },
            namespace="default",
        )

    # -- identities ------------------------------------------------------------------------

    def _identities(self) -> tuple[str, str]:
        """ServiceAccount tokens for the kubelets and kube-proxy, bound to the stock ClusterRoles."""
        kube = self.cluster.kube
        tokens = []
        for account, role in (("realnode-kubelet", "system:node"), ("realnode-proxy", "system:node-proxier")):
            kube.apply(
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}},
                namespace=KUBE_SYSTEM,
            )
            kube.apply(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": account},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                    "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": KUBE_SYSTEM}],
                }
            )
            req = kube.post(
                f"/api/v1/namespaces/{KUBE_SYSTEM}/serviceaccounts/{account}/token",
                {
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenRequest",
                    "spec": {"expirationSeconds": 86400},
                },
            )
            tokens.append(str(req["status"]["token"]))
        return tokens[0], tokens[1]

    def _kubeconfig(self, path: pathlib.Path, user: str, token: str) -> pathlib.Path:
        cp = self.cluster.control_plane
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f'clusters:\n- name: local\n  cluster:\n    server: "{cp.server}"\n'
            f'    certificate-authority: "{cp.ca_file}"\n'
            f'users:\n- name: {user}\n  user:\n    token: "{token}"\n'
            f"contexts:\n- name: local\n  context:\n    cluster: local\n    user: {user}\n"
            "current-context: local\n"
        )
        return path

    # -- nodes -----------------------------------------------------------------------------

    def _node_up(self, node: Node, token: str, image_tars: Iterable[tuple[ImageSpec, pathlib.Path]]) -> None:
        assert self.netns_holder is not None
        assert self.bindir is not None
        node.state.mkdir(parents=True, exist_ok=True)
        etc = node.state / "etc"
        (etc / "cni").mkdir(parents=True, exist_ok=True)
        log = node.state / "node-init.log"
        node.init = self._spawn(
            f"{node.name}-init",
            [
                "nsenter",
                f"--net=/proc/{self.netns_holder.pid}/ns/net",
                "--",
                "unshare",
                "--mount",
                "--uts",
                "--propagation",
                "private",
                "--",
                "bash",
                str(NODE_INIT),
                str(node.state),
                node.cgroup_root,
                *self.overlays,
            ],
            log,
        )
        _wait(
            lambda: "ready\n" in log.read_text() or not _alive(node.init),
            30,
            f"{node.name}'s mount namespace",
        )
        if not _alive(node.init):
            raise RealNodeError(f"node-init.sh failed for {node.name}:\n{log.read_text()}")
        assert node.init is not None
        cpu_weight.weigh(node.cgroup_root)  # the node's pods weigh what they did as sessions (cpu_weight)
        node.mnt_inode = cleanup.ns_inode(node.init.pid, "mnt")
        self.traces.save(self.traces_file)
        # The node's own hostname, which its hostNetwork pods share (as on any node): with the host's,
        # two nodes' nova-compute took the same oslo.messaging reply queue
        # (``use_queue_manager``: reply_<hostname>:<process>:<n>) and got each other's replies.
        subprocess.run(
            ["nsenter", f"--uts=/proc/{node.init.pid}/ns/uts", "hostname", node.name],
            check=True,
            capture_output=True,
        )
        enter = [
            "nsenter",
            f"--net=/proc/{self.netns_holder.pid}/ns/net",
            f"--mount=/proc/{node.init.pid}/ns/mnt",
            f"--uts=/proc/{node.init.pid}/ns/uts",
            "--",
            *NICE,
        ]
        (etc / "containerd.toml").write_text(containerd_config(node))
        if self.store is not None and not containerd_root(node).exists():
            clone(self.store, containerd_root(node))
        (etc / "cni" / "10-realnode.conflist").write_text(cni_config(node))
        (etc / "kubelet.yaml").write_text(
            kubelet_config(
                node, self.access.ca_file if self.access else None, dns.DNS_IP if self.dns else None
            )
        )
        node.containerd = self._spawn(
            f"{node.name}-containerd",
            [*enter, "containerd", "--config", str(etc / "containerd.toml")],
            node.state / "containerd.log",
        )
        _wait(
            lambda: (
                not _alive(node.containerd)
                or subprocess.run(node.ctr("version"), capture_output=True).returncode == 0
            ),
            60,
            f"{node.name}'s containerd",
        )
        if not _alive(node.containerd):
            raise RealNodeError(f"containerd of {node.name} exited\n{self.logs()}")
        for spec, tar in image_tars:
            subprocess.run(
                node.ctr("images", "import", "--base-name", spec.repo, str(tar)),
                check=True,
                capture_output=True,
            )
        kubeconfig = self._kubeconfig(node.state / "kubelet.kubeconfig", "kubelet", token)
        taints = self.node_taints.get(node.name, self.taints)
        node.kubelet = self._spawn(
            f"{node.name}-kubelet",
            [
                *enter,
                str(self.bindir / "kubelet"),
                f"--config={etc / 'kubelet.yaml'}",
                f"--kubeconfig={kubeconfig}",
                # the defaults, made explicit: inside the node's /var/lib overlay, so in the workdir, but with
                # short socket paths (pod-resources/kubelet.sock)
                "--root-dir=/var/lib/kubelet",
                "--cert-dir=/var/lib/kubelet/pki",
                f"--hostname-override={node.name}",
                f"--node-ip={node.ip}",
                f"--node-labels={_labels({dns.REAL_NODE_LABEL: 'true', **self.labels})}",
                *([f"--register-with-taints={','.join(taints)}"] if taints else []),
                "--v=1",
            ],
            node.state / "kubelet.log",
        )

    def _kube_proxy(self, token: str) -> None:
        assert self.netns_holder is not None
        assert self.bindir is not None
        first = self.nodes[0]
        kubeconfig = self._kubeconfig(self.workdir / "kube-proxy.kubeconfig", "kube-proxy", token)
        config = self.workdir / "kube-proxy.yaml"
        _write_if_changed(config, kube_proxy_config(first, kubeconfig))
        self.kube_proxy = self._spawn(
            "kube-proxy",
            [
                "nsenter",
                f"--net=/proc/{self.netns_holder.pid}/ns/net",
                "--",
                *NICE,
                str(self.bindir / "kube-proxy"),
                f"--config={config}",
                "--v=1",
            ],
        )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        for node in self.nodes:
            while True:
                for proc, what in ((node.kubelet, "kubelet"), (node.containerd, "containerd")):
                    if not _alive(proc):
                        raise RealNodeError(f"the {what} of {node.name} exited\n{self.logs()}")
                if not _alive(self.kube_proxy):
                    raise RealNodeError(f"kube-proxy exited\n{self.logs()}")
                try:
                    if _schedulable(self.cluster.kube.get(f"/api/v1/nodes/{node.name}")):
                        break
                except KubeError as exc:
                    if exc.status != 404:
                        raise
                if time.monotonic() > deadline:
                    raise RealNodeError(
                        f"{node.name} not Ready after {self.ready_timeout:.0f} s\n{self.logs()}"
                    )
                time.sleep(0.5)

    def _cluster_dns(self) -> None:
        """CoreDNS in kube-system; Ready once the ``kubernetes`` Service's name resolves through the
        ``kube-dns`` ClusterIP from the nodes' namespace (so kube-proxy's rules are in place too)."""
        assert self.netns_holder is not None
        t0 = time.monotonic()
        for doc in dns.manifests():
            self.cluster.kube.apply(doc, namespace=dns.NAMESPACE)
        netns = f"/proc/{self.netns_holder.pid}/ns/net"
        name = f"kubernetes.default.svc.{dns.CLUSTER_DOMAIN}"

        def resolved() -> bool:
            try:
                return dns.query(netns, name, timeout=1.0)[1] != []
            except OSError:  # TimeoutError: no rule or no endpoint yet
                return False

        try:
            _wait(resolved, self.ready_timeout, f"{name} resolved by cluster DNS", 0.5)
        except RealNodeError as exc:
            raise RealNodeError(f"{exc}\n{self.logs()}") from None
        self.dns_seconds = time.monotonic() - t0

    # -- teardown --------------------------------------------------------------------------


def _labels(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _schedulable(node: dict[str, object]) -> bool:
    status = node.get("status")
    spec = node.get("spec")
    conditions = status.get("conditions", []) if isinstance(status, dict) else []
    taints = spec.get("taints", []) if isinstance(spec, dict) else []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return ready and not any(str(t.get("key", "")).startswith("node.kubernetes.io/") for t in taints)
