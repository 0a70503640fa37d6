"""Cluster DNS for real nodes: CoreDNS in ``kube-system`` behind the ``kube-dns`` Service, so pods
reach Services by name (``web``, ``web.ns``, ``web.ns.svc.cluster.local``) as in any cluster (trap 13).

* The binary: ``tools/coredns/build.sh`` builds it from Go modules with only the plugins the Corefile
  below uses; ``coredns_image()`` packs it like the pause image (``realnode.images``).
* The kubelets name ``DNS_IP`` (in the control plane's Service range) as ``clusterDNS`` and
  ``CLUSTER_DOMAIN`` as the domain (``realnode.configs.kubelet_config``).
* ``manifests()``: a ServiceAccount with read access to Services, EndpointSlices and Namespaces, the
  Corefile, a Deployment (non-root, read-only root, no capability: it listens on ``PORT``, which the
  Service maps from 53) and the Service. Its token is a projected volume of its own, so CoreDNS
  reaches the API server in-cluster whether or not the control plane runs ServiceAccount admission.
* The nodes' namespace has no way out, so nothing is forwarded: a name outside the cluster's zones
  is answered NXDOMAIN at once rather than left to time out.
"""

from __future__ import annotations

import os
import pathlib
import secrets
import socket
import struct
import subprocess
import threading
from typing import Any

from simcluster.platform.controlplane import REPO

from realnode.forward import setns
from realnode.images import ImageSpec, file

NAMESPACE = "kube-system"
NAME = "coredns"
SERVICE = "kube-dns"
DNS_IP = "10.96.0.10"  # inside simcluster.platform.controlplane.SERVICE_CIDR (10.96.0.0/16)
CLUSTER_DOMAIN = "cluster.local"
IMAGE = "realnode.local/coredns:1"
PORT = 1053  # unprivileged: no NET_BIND_SERVICE
READY_PORT = 8181
HEALTH_PORT = 8080
UID = 65532
# Every real node carries this label (``realnode.nodes``): CoreDNS runs on one of them, never on a
# node of another kind that may share the control plane (a kwok node, which runs no image).
REAL_NODE_LABEL = "realnode.c5c3.io/real"

COREFILE = f"""{CLUSTER_DOMAIN}:{PORT} in-addr.arpa:{PORT} ip6.arpa:{PORT} {{
    errors
    health :{HEALTH_PORT}
    ready :{READY_PORT}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        ttl 5
    }}
    cache 5
}}
.:{PORT} {{
    errors
    template ANY ANY {{
        rcode NXDOMAIN
    }}
}}
"""


def find_binary() -> pathlib.Path:
    """``coredns``: in ``$REALNODE_COREDNS_BIN`` (a directory), or ``tools/coredns/build.sh``'s output."""
    env = os.environ.get("REALNODE_COREDNS_BIN")
    if env:
        return pathlib.Path(env) / "coredns"
    out = subprocess.run(
        ["bash", str(REPO / "tools" / "coredns" / "build.sh")], check=True, stdout=subprocess.PIPE, text=True
    )
    return pathlib.Path(out.stdout.strip().splitlines()[-1]) / "coredns"


def coredns_image(binary: pathlib.Path) -> ImageSpec:
    """The static ``/coredns`` alone, as ``UID``; the Corefile comes from a ConfigMap."""
    return ImageSpec(
        IMAGE,
        {"coredns": file(binary.read_bytes(), 0o755)},
        entrypoint=["/coredns"],
        env=[],
        user=f"{UID}:{UID}",
    )


def _meta(name: str, namespace: str | None = NAMESPACE) -> dict[str, Any]:
    labels = {"k8s-app": SERVICE, "app.kubernetes.io/managed-by": "realnode"}
    return {"name": name, "labels": labels, **({"namespace": namespace} if namespace else {})}


def _token_volume() -> dict[str, Any]:
    """What ServiceAccount admission would mount: a bound token, the root CA and the namespace."""
    return {
        "name": "kube-api-access",
        "projected": {
            "defaultMode": 0o444,
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]
                    }
                },
            ],
        },
    }


def _deployment() -> dict[str, Any]:
    ports = [
        {"name": "dns", "containerPort": PORT, "protocol": "UDP"},
        {"name": "dns-tcp", "containerPort": PORT, "protocol": "TCP"},
    ]
    container = {
        "name": NAME,
        "image": IMAGE,
        "imagePullPolicy": "Never",
        "args": ["-conf", "/etc/coredns/Corefile"],
        "ports": ports,
        "readinessProbe": {"httpGet": {"path": "/ready", "port": READY_PORT}, "periodSeconds": 1},
        "livenessProbe": {
            "httpGet": {"path": "/health", "port": HEALTH_PORT},
            "periodSeconds": 10,
            "failureThreshold": 5,
        },
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
        "securityContext": {
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/coredns", "readOnly": True},
            {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(NAME),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"k8s-app": SERVICE}},
            "template": {
                "metadata": {"labels": {"k8s-app": SERVICE}},
                "spec": {
                    "serviceAccountName": NAME,
                    "automountServiceAccountToken": False,
                    "dnsPolicy": "Default",  # not itself
                    "nodeSelector": {REAL_NODE_LABEL: "true"},
                    # the cluster's DNS: on any real node, whatever workload it is dedicated to
                    "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
                    "securityContext": {"runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID},
                    "containers": [container],
                    "volumes": [{"name": "config", "configMap": {"name": NAME}}, _token_volume()],
                },
            },
        },
    }


def manifests() -> list[dict[str, Any]]:
    """Everything cluster DNS is, in the order to apply it."""
    read = ["get", "list", "watch"]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(NAME)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta(f"realnode:{NAME}", None),
            "rules": [
                {"apiGroups": [""], "resources": ["services", "namespaces"], "verbs": read},
                {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": read},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta(f"realnode:{NAME}", None),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": f"realnode:{NAME}",
            },
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
        },
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(NAME), "data": {"Corefile": COREFILE}},
        _deployment(),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(SERVICE),
            "spec": {
                "selector": {"k8s-app": SERVICE},
                "clusterIP": DNS_IP,
                "ports": [
                    {"name": "dns", "port": 53, "targetPort": PORT, "protocol": "UDP"},
                    {"name": "dns-tcp", "port": 53, "targetPort": PORT, "protocol": "TCP"},
                ],
            },
        },
    ]


def resolv_conf(namespace: str = "default") -> str:
    """A pod's ``/etc/resolv.conf`` in ``namespace`` (the kubelet's ``ClusterFirst``): the cluster's
    DNS, its search list, ``ndots:5``."""
    search = f"{namespace}.svc.{CLUSTER_DOMAIN} svc.{CLUSTER_DOMAIN} {CLUSTER_DOMAIN}"
    return f"nameserver {DNS_IP}\nsearch {search}\noptions ndots:5\n"


def udp_socket_in(netns: str) -> socket.socket:
    """A UDP socket of the network namespace at ``netns``, made in a thread of its own (``setns``
    moves the calling thread only), usable from any thread afterwards."""
    made: list[socket.socket] = []
    failed: list[BaseException] = []

    def make() -> None:
        fd = os.open(netns, os.O_RDONLY)
        try:
            setns(fd)
            made.append(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        except BaseException as exc:  # re-raised in the caller
            failed.append(exc)
        finally:
            os.close(fd)

    thread = threading.Thread(target=make)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return made[0]


def query(
    netns: str, name: str, server: str = DNS_IP, timeout: float = 2.0, port: int = 53
) -> tuple[int, list[str]]:
    """Ask ``server`` for ``name``'s A records from inside ``netns``: the response code (0 NOERROR,
    3 NXDOMAIN) and the addresses. ``TimeoutError`` when nothing answers."""
    ident = secrets.randbelow(1 << 16)
    qname = b"".join(bytes([len(label)]) + label.encode() for label in name.rstrip(".").split(".")) + b"\0"
    packet = struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + qname + struct.pack("!HH", 1, 1)
    with udp_socket_in(netns) as sock:
        sock.settimeout(timeout)
        sock.sendto(packet, (server, port))
        while True:
            reply = sock.recv(4096)
            if len(reply) >= 12 and struct.unpack("!H", reply[:2])[0] == ident:
                break
    flags, qdcount, ancount = struct.unpack("!HHH", reply[2:8])
    at = 12
    for _ in range(qdcount):
        at = _skip_name(reply, at) + 4
    addresses = []
    for _ in range(ancount):
        at = _skip_name(reply, at)
        rtype, _class, _ttl, length = struct.unpack("!HHIH", reply[at : at + 10])
        at += 10
        if rtype == 1 and length == 4:
            addresses.append(socket.inet_ntoa(reply[at : at + 4]))
        at += length
    return flags & 0xF, addresses


def _skip_name(message: bytes, at: int) -> int:
    while message[at] != 0:
        if message[at] & 0xC0 == 0xC0:  # a pointer ends the name
            return at + 2
        at += message[at] + 1
    return at + 1
