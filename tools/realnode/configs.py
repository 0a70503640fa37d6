"""The configuration files of a real node's daemons: containerd, the CNI network, the kubelet and
kube-proxy (trap numbers refer to ``/work/shared/design/real-kubelet.md``)."""

from __future__ import annotations

import pathlib

from realnode import images
from realnode.host import CNI_BIN
from realnode.node import Node

POD_CIDR = "10.88.0.0/16"


def registry_hosts_dir(node: Node) -> pathlib.Path:
    """containerd's ``config_path``: ``<host[:port]>/hosts.toml`` per registry that is not reached as
    containerd's defaults would (``realnode.registry``'s plain HTTP); empty, every default holds."""
    return node.state / "etc" / "containerd" / "certs.d"


def containerd_root(node: Node) -> pathlib.Path:
    """containerd's ``root`` (its content store, snapshots and metadata): in the node's workdir."""
    return node.state / "containerd" / "root"


def containerd_config(node: Node) -> str:
    """containerd 1.6 (Debian bookworm); every path it would put under /var/lib, /run, /opt or /etc
    is the node's: the content store in the workdir, the state, sockets and runc's state in the
    node's own /run (an overlay, node-init.sh)."""
    s = node.state / "containerd"
    return f"""version = 2
root = "{containerd_root(node)}"
state = "/run/containerd"
oom_score = 0
[grpc]
  address = "{node.socket}"
[ttrpc]
  address = "{node.socket}.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{s / "opt"}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{images.SANDBOX_IMAGE}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  # pod network namespaces under the state directory, not the host's /run/netns
  netns_mounts_under_state_dir = true
  # root here lacks CAP_SYS_RESOURCE: runc cannot lower a sandbox's oom_score_adj to the kubelet's
  # -998 and every sandbox fails ("can't get final child's PID from pipe"). Clamp (trap 1).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "/run/containerd/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{registry_hosts_dir(node)}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{node.state / "etc" / "cni"}"
    max_conf_num = 1
"""


def cni_config(node: Node) -> str:
    """A bridge per node with host-local IPAM; no ipMasq (it would need iptables, trap 9)."""
    gateway = node.pod_subnet.replace(".0/24", ".1")
    return f"""{{
  "cniVersion": "1.0.0",
  "name": "realnode",
  "plugins": [
    {{
      "type": "bridge",
      "bridge": "{node.bridge}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {{
        "type": "host-local",
        "ranges": [[{{"subnet": "{node.pod_subnet}", "gateway": "{gateway}"}}]],
        "routes": [{{"dst": "0.0.0.0/0"}}],
        "dataDir": "{node.state / "cni-ipam"}"
      }}
    }}
  ]
}}
"""


def kubelet_config(node: Node, client_ca: pathlib.Path | None = None, cluster_dns: str | None = None) -> str:
    """kubelet v1.37 on cgroup v1 (``failCgroupV1: false``, trap 4) with the cgroupfs driver
    (containerd 1.6 has no RuntimeConfig RPC, trap 10); ``cluster_dns``: the nameserver of its
    ClusterFirst pods (``realnode.dns``), none without it (trap 13)."""
    dns = f"clusterDNS: [{cluster_dns}]\n" if cluster_dns else ""
    return f"""apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://{node.socket}
cgroupDriver: cgroupfs
cgroupRoot: /{node.cgroup_root}
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
failCgroupV1: false
failSwapOn: false
address: {node.ip}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {10148 + 100 * node.index}
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: "{client_ca or ""}"}}
authorization:
  mode: Webhook
{dns}clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
podLogsDir: /var/log/pods
volumePluginDir: /var/lib/kubelet/volume-plugins
serializeImagePulls: false
rotateCertificates: false
serverTLSBootstrap: false
registerNode: true
nodeStatusReportFrequency: 10s
syncFrequency: 10s
fileCheckFrequency: 20s
imageGCHighThresholdPercent: 100
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%"
  imagefs.available: "1%"
  nodefs.inodesFree: "1%"
"""


def kube_proxy_config(node: Node, kubeconfig: pathlib.Path) -> str:
    """nftables mode (only the nft binary is needed); conntrack left alone: its limits are global (trap 7)."""
    return f"""apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection:
  kubeconfig: {kubeconfig}
hostnameOverride: {node.name}
bindAddress: {node.ip}
clusterCIDR: {POD_CIDR}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
"""
