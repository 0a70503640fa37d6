"""Pod networking for the kubelet stand-in: a network namespace per pod on a bridge, Services by
nftables DNAT, Service names by ``/etc/hosts``.

Each pod gets a network namespace held by a small process (``unshare --net``, with a parent-death
signal), a veth pair whose host end is a port of the bridge (``simkube0`` by default, gateway
``10.244.0.1/16``) and whose pod end is ``eth0`` with the pod's own IP, so replicas can each bind
the same port. Nothing leaves the machine: the pod range is private, forwarding is enabled on the
bridge alone, and a forward rule drops whatever would leave the bridge for another interface.

Services: **nftables DNAT**, kept in sync from the Services and EndpointSlices (watched): a ClusterIP
and port is DNATed, per connection and at random, to one of the ready endpoints (a jump per endpoint,
as kube-proxy's nftables mode), and connections a pod makes that way are masqueraded so replies come
back through the host. Chosen over the real kube-proxy because kube-proxy would have to be built from
the Kubernetes module (minutes of compile on 2 cores, another binary to cache), wants a node it owns
(conntrack tuning, its own health ports, the node's full ruleset) and programs the host's own
namespace for every Service; a table of our own with a handful of rules per Service is enough for
ClusterIP TCP/UDP and is removed in one ``nft delete table``.

Names: **``/etc/hosts``** in every pod, rewritten in place when Services change:
``<svc>.<ns>.svc.cluster.local``, ``<svc>.<ns>.svc``, ``<svc>.<ns>`` and, in the pod's own
namespace, ``<svc>``; headless Services list their ready endpoints. Chosen over a real CoreDNS
because that needs another Go build, a Service and pods of its own, and a resolver in every pod;
the hosts file answers the same names for the clients this cluster runs (glibc and Python resolve
``/etc/hosts`` first), with no process to keep alive. What it does not do: SRV records, negative
answers, and names of pods behind a headless Service's ``subdomain``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import pathlib
import subprocess
import time
from collections.abc import Iterable, Mapping
from typing import Any

from simcluster.client.asynckube import JSON, AsyncKube
from simcluster.client.watchcache import Store, reflect

log = logging.getLogger("simcluster.kubelet")
CLUSTER_DOMAIN = "cluster.local"
SERVICE_LABEL = "kubernetes.io/service-name"


def _run(*argv: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, input=stdin, text=True, capture_output=True, check=check)


def ruleset(table: str, bridge: str, cidr: str, services: Iterable[JSON], slices: Iterable[JSON]) -> str:
    """The whole nftables table (pure): DNAT of every ClusterIP port to its ready endpoints."""
    by_service: dict[tuple[str, str], list[JSON]] = {}
    for s in slices:
        name = (s["metadata"].get("labels") or {}).get(SERVICE_LABEL)
        if name:
            by_service.setdefault((s["metadata"]["namespace"], name), []).append(s)
    rules: list[str] = []
    chains: list[str] = []
    for svc in sorted(services, key=lambda s: (s["metadata"]["namespace"], s["metadata"]["name"])):
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        ip = (svc.get("spec") or {}).get("clusterIP")
        if not ip or ip == "None":
            continue
        for port in svc["spec"].get("ports") or []:
            proto = port.get("protocol", "TCP").lower()
            targets = sorted(
                {
                    (addr, int(ep_port["port"]))
                    for s in by_service.get((ns, name), [])
                    for ep_port in s.get("ports") or []
                    if ep_port.get("name", "") == port.get("name", "")
                    and ep_port.get("protocol", "TCP").lower() == proto
                    for ep in s.get("endpoints") or []
                    if (ep.get("conditions") or {}).get("ready", True)
                    for addr in ep.get("addresses") or []
                }
            )
            match = f"ip daddr {ip} {proto} dport {int(port['port'])}"
            if not targets:
                rules.append(f"{match} reject")
                continue
            jumps = []
            for i, (addr, target) in enumerate(targets):
                chain = f"endpoint-{len(chains)}"  # {ns}/{name} port {port}, endpoint {i}
                chains.append(f"  chain {chain} {{\n    meta l4proto {proto} dnat to {addr}:{target}\n  }}")
                jumps.append(f"{i} : jump {chain}")
            rules.append(f"{match} numgen random mod {len(targets)} vmap {{ {', '.join(jumps)} }}")
    body = "\n".join(f"    {r}" for r in rules)
    return (
        f"table ip {table} {{\n"
        f"  chain services {{\n{body}\n  }}\n"
        + "".join(c + "\n" for c in chains)
        + "  chain prerouting {\n    type nat hook prerouting priority dstnat; policy accept;\n"
        "    jump services\n  }\n"
        "  chain output {\n    type nat hook output priority -100; policy accept;\n    jump services\n  }\n"
        "  chain postrouting {\n    type nat hook postrouting priority srcnat; policy accept;\n"
        f"    ct status dnat ip saddr {cidr} masquerade\n  }}\n"
        "  chain forward {\n    type filter hook forward priority filter; policy accept;\n"
        f'    iifname "{bridge}" oifname != "{bridge}" drop\n'
        f'    oifname "{bridge}" iifname != "{bridge}" drop\n  }}\n'
        "}\n"
    )


def hosts_file(
    pod: JSON,
    ip: str,
    services: Iterable[JSON],
    slices: Iterable[JSON],
    aliases: Mapping[str, tuple[str, str]] | None = None,
) -> str:
    """A pod's ``/etc/hosts`` (pure): itself, then every Service's names, then each alias (a name
    outside the cluster domain, ``name -> (namespace, service)``) at its Service's ClusterIP, as a
    cluster DNS with a stub zone for an external name would answer."""
    services = list(services)
    ns = pod["metadata"]["namespace"]
    hostname = pod["spec"].get("hostname") or pod["metadata"]["name"]
    lines = [
        "# Kubernetes-managed hosts file (simcluster kubelet stand-in).",
        "127.0.0.1\tlocalhost",
        "::1\tlocalhost ip6-localhost ip6-loopback",
        f"{ip}\t{hostname}",
    ]
    ready: dict[tuple[str, str], list[str]] = {}
    for s in slices:
        name = (s["metadata"].get("labels") or {}).get(SERVICE_LABEL)
        for ep in s.get("endpoints") or []:
            if name and (ep.get("conditions") or {}).get("ready", True):
                ready.setdefault((s["metadata"]["namespace"], name), []).extend(ep.get("addresses") or [])
    for svc in sorted(services, key=lambda s: (s["metadata"]["namespace"], s["metadata"]["name"])):
        sns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        names = [f"{name}.{sns}.svc.{CLUSTER_DOMAIN}", f"{name}.{sns}.svc", f"{name}.{sns}"]
        if sns == ns:
            names.append(name)
        ip_ = (svc.get("spec") or {}).get("clusterIP")
        addresses = sorted(set(ready.get((sns, name), []))) if ip_ in (None, "", "None") else [ip_]
        lines.extend(f"{a}\t{' '.join(names)}" for a in addresses)
    cluster_ips = {
        (s["metadata"]["namespace"], s["metadata"]["name"]): (s.get("spec") or {}).get("clusterIP")
        for s in services
    }
    for alias, target in sorted((aliases or {}).items()):
        ip_ = cluster_ips.get(target)
        if ip_ not in (None, "", "None"):
            lines.append(f"{ip_}\t{alias}")
    return "\n".join(lines) + "\n"


class PodSandbox:
    """One pod's network namespace (held by a process) and veth."""

    def __init__(
        self, network: PodNetwork, pod: JSON, ip: str, holder: asyncio.subprocess.Process, veth: str
    ):
        self.network, self.pod, self.ip, self.holder, self.veth = network, pod, ip, holder, veth
        self.netns: str | None = f"/proc/{holder.pid}/ns/net"

    async def close(self) -> None:
        self.network.release(self)
        with contextlib.suppress(ProcessLookupError):
            self.holder.kill()
        await self.holder.wait()  # the namespace, and the veth pair with it, go with its last process
        await asyncio.to_thread(_run, "ip", "link", "del", self.veth, check=False)


class PodNetwork:
    def __init__(
        self,
        kube: AsyncKube,
        *,
        bridge: str = "simkube0",
        cidr: str = "10.244.0.0/16",
        table: str = "simkubelet",
    ) -> None:
        self.kube = kube
        self.bridge, self.table = bridge, table
        self.net = ipaddress.ip_network(cidr)
        self.gateway = str(self.net.network_address + 1)
        self.services = Store("Service", "/api/v1/services")
        self.slices = Store("EndpointSlice", "/apis/discovery.k8s.io/v1/endpointslices")
        self.sandboxes: dict[str, PodSandbox] = {}
        self._hosts: dict[str, tuple[JSON, str, pathlib.Path]] = {}  # pod uid -> pod, its IP, its hosts file
        self.aliases: dict[str, tuple[str, str]] = {}  # external name -> (namespace, Service)
        self._used: set[str] = set()
        self._next = 2
        self._dirty = asyncio.Event()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._applied = ""

    # -- the bridge and the table ----------------------------------------------------------

    async def start(self) -> None:
        await asyncio.to_thread(self._setup_host)
        self._stop.clear()
        self._tasks = [
            asyncio.create_task(reflect(self.kube, self.services, self._changed, self._stop)),
            asyncio.create_task(reflect(self.kube, self.slices, self._changed, self._stop)),
            asyncio.create_task(self._sync_loop()),
        ]
        async with asyncio.timeout(30):
            await asyncio.gather(self.services.synced.wait(), self.slices.synced.wait())
        await self.sync()

    def _setup_host(self) -> None:
        if _run("ip", "link", "show", self.bridge, check=False).returncode != 0:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "addr", "replace", f"{self.gateway}/{self.net.prefixlen}", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        pathlib.Path(f"/proc/sys/net/ipv4/conf/{self.bridge}/forwarding").write_text("1\n")
        self._apply(ruleset(self.table, self.bridge, str(self.net), [], []))

    def _apply(self, text: str) -> None:
        if text == self._applied:
            return
        exists = _run("nft", "list", "table", "ip", self.table, check=False).returncode == 0
        prefix = f"delete table ip {self.table}\n" if exists else ""
        _run("nft", "-f", "-", stdin=prefix + text)
        self._applied = text

    async def stop(self) -> None:
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for sandbox in list(self.sandboxes.values()):
            await sandbox.close()
        await asyncio.to_thread(self._teardown_host)

    def _teardown_host(self) -> None:
        _run("nft", "delete", "table", "ip", self.table, check=False)
        _run("ip", "link", "del", self.bridge, check=False)
        self._applied = ""

    def _changed(self, store: Store, obj: JSON, deleted: bool) -> None:
        self._dirty.set()

    async def _sync_loop(self) -> None:
        while True:
            await self._dirty.wait()
            await asyncio.sleep(0.05)  # one sync for a burst of changes
            self._dirty.clear()
            try:
                await self.sync()
            except (OSError, subprocess.CalledProcessError) as exc:
                log.warning("service sync failed: %s", getattr(exc, "stderr", exc))

    async def sync(self) -> None:
        services, slices = list(self.services.list()), list(self.slices.list())
        text = ruleset(self.table, self.bridge, str(self.net), services, slices)
        await asyncio.to_thread(self._apply, text)
        for pod, ip, path in list(self._hosts.values()):
            self._write_hosts(pod, ip, path, services, slices)

    # -- pods ------------------------------------------------------------------------------

    def _allocate(self) -> str:
        hosts = self.net.num_addresses - 2
        for _ in range(hosts):
            candidate = str(self.net.network_address + self._next)
            self._next = self._next + 1 if self._next < hosts else 2
            if candidate not in self._used:
                self._used.add(candidate)
                return candidate
        raise RuntimeError(f"no free address left in {self.net}")

    def release(self, sandbox: PodSandbox) -> None:
        self.sandboxes.pop(sandbox.pod["metadata"]["uid"], None)
        self._used.discard(sandbox.ip)

    async def sandbox(self, pod: JSON) -> PodSandbox:
        """A network namespace for ``pod`` with its own IP on the bridge."""
        ip = self._allocate()
        holder = await asyncio.create_subprocess_exec(
            "setpriv",
            "--pdeathsig",
            "KILL",
            "--",
            "unshare",
            "--net",
            "--",
            "sleep",
            "infinity",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        veth = "vs" + pod["metadata"]["uid"].replace("-", "")[:12]
        sandbox = PodSandbox(self, pod, ip, holder, veth)
        try:
            await asyncio.to_thread(self._plumb, holder.pid, veth, ip)
        except BaseException:
            await sandbox.close()
            raise
        self.sandboxes[pod["metadata"]["uid"]] = sandbox
        return sandbox

    def _plumb(self, pid: int, veth: str, ip: str) -> None:
        netns = f"/proc/{pid}/ns/net"
        for _ in range(100):  # unshare has switched namespaces once its ns link differs from ours
            if os.path.exists(netns) and os.readlink(netns) != os.readlink("/proc/self/ns/net"):
                break
            time.sleep(0.01)
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", str(pid))
        _run("ip", "link", "set", veth, "master", self.bridge, "up")
        inside = ["nsenter", f"--net={netns}", "--"]
        _run(*inside, "ip", "link", "set", "lo", "up")
        _run(*inside, "ip", "addr", "add", f"{ip}/{self.net.prefixlen}", "dev", "eth0")
        _run(*inside, "ip", "link", "set", "eth0", "up")
        _run(*inside, "ip", "route", "add", "default", "via", self.gateway)

    def hosts(self, pod: JSON, ip: str) -> str:
        return hosts_file(pod, ip, self.services.list(), self.slices.list(), self.aliases)

    def attach_hosts(self, pod: JSON, ip: str, path: pathlib.Path) -> None:
        """Keep ``path`` (the pod's /etc/hosts, host network or not) current as Services change."""
        self._hosts[pod["metadata"]["uid"]] = (pod, ip, path)

    def detach_hosts(self, uid: str) -> None:
        self._hosts.pop(uid, None)

    def _write_hosts(
        self, pod: JSON, ip: str, path: pathlib.Path, services: list[JSON], slices: list[JSON]
    ) -> None:
        text = hosts_file(pod, ip, services, slices, self.aliases)
        with contextlib.suppress(FileNotFoundError):
            if path.read_text() != text:
                with path.open("r+") as fh:  # in place: containers bind the file's inode
                    fh.write(text)
                    fh.truncate()
