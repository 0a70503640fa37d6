"""The API server's way to the kubelets (``kubectl logs``, ``exec``, ``port-forward``).

The API server runs on the host's loopback; the kubelets listen on node IPs inside the nodes' network
namespace. ``KubeletAccess.prepare()`` writes what the API server needs before it starts and returns
its flags:

* an egress selector: its ``cluster`` traffic (to nodes, pods and services) goes by HTTP CONNECT to
  the abstract unix socket ``@<name>``, where ``realnode.forward connect`` (started by ``RealNodes``)
  dials inside the namespace;
* a client certificate (``system:masters``) from a CA of its own, which the kubelets trust;
* ``InternalIP`` first: a node's hostname means nothing in the namespace.
"""

from __future__ import annotations

import pathlib
import secrets
import subprocess
from dataclasses import dataclass, field

from simcluster import SimCluster, find_binaries

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


@dataclass
class KubeletAccess:
    workdir: pathlib.Path
    name: str = field(default_factory=lambda: f"realnode-egress-{secrets.token_hex(4)}")

    @property
    def ca_file(self) -> pathlib.Path:
        return self.workdir / "kubelet-ca.crt"

    def prepare(self) -> list[str]:
        """Write the CA, the API server's client certificate and the egress configuration; the flags."""
        w = self.workdir
        w.mkdir(parents=True, exist_ok=True)
        ca_key, client_key, client_crt = (
            w / "kubelet-ca.key",
            w / "apiserver-client.key",
            w / "apiserver-client.crt",
        )

        def run(*argv: str) -> None:
            subprocess.run(["openssl", *argv], check=True, capture_output=True)

        run("req", "-x509", *EC, "-keyout", str(ca_key), "-out", str(self.ca_file), "-days", "30",
            "-subj", "/CN=realnode-kubelet-client-ca")  # fmt: skip
        run("req", *EC, "-keyout", str(client_key), "-out", str(w / "client.csr"),
            "-subj", "/O=system:masters/CN=kube-apiserver-kubelet-client")  # fmt: skip
        (w / "client.ext").write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
        run(
            "x509", "-req", "-in", str(w / "client.csr"), "-CA", str(self.ca_file), "-CAkey", str(ca_key),
            "-CAcreateserial", "-out", str(client_crt), "-days", "30", "-extfile", str(w / "client.ext"),
        )  # fmt: skip
        egress = w / "egress.yaml"
        egress.write_text(
            "apiVersion: apiserver.k8s.io/v1beta1\nkind: EgressSelectorConfiguration\negressSelections:\n"
            "- name: cluster\n  connection:\n    proxyProtocol: HTTPConnect\n"
            f"    transport:\n      uds:\n        udsName: '@{self.name}'\n"
        )
        return [
            f"--kubelet-client-certificate={client_crt}",
            f"--kubelet-client-key={client_key}",
            "--kubelet-preferred-address-types=InternalIP",
            f"--egress-selector-config-file={egress}",
        ]


def accessible_control_plane(workdir: pathlib.Path) -> tuple[SimCluster, KubeletAccess]:
    """A started control plane that reaches the kubelets (logs, exec, port-forward) and gives pods
    their ServiceAccount tokens, and the access to hand to ``RealNodes``."""
    access = KubeletAccess(workdir / "access")
    cluster = SimCluster(
        workdir / "cp",
        find_binaries(),
        extra_apiserver_args=access.prepare(),
        service_account_admission=True,
        kwok=False,  # real nodes only
    ).start()
    return cluster, access
