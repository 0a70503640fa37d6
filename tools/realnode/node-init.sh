#!/usr/bin/env bash
# A real node's mount namespace. Started by realnode.nodes inside the cluster's network namespace and a
# fresh private mount namespace (`nsenter --net=... unshare -m --propagation private bash node-init.sh`);
# it prepares that namespace, prints "ready", then sleeps: containerd and the kubelet are started inside it
# with `nsenter --net=... --mount=/proc/<this pid>/ns/mnt`. Every mount below dies with the namespace,
# that is with this process and the daemons: nothing is mounted on the host.
# Args: STATE_DIR CGROUP_ROOT [DIR...]: each DIR gets an overlay too (host paths a workload's hostPath
# volumes would create, such as /etc/iscsi or /lib/modules).
set -euo pipefail
state="$1" cgroot="$2"
shift 2

# /sys of this network namespace (sysfs shows the mounting task's netns), keeping the host's cgroup mounts:
# a plain remount of /sys (as `ip netns exec` does) would hide /sys/fs/cgroup/* from containerd, runc, kubelet.
mkdir -p "$state/mnt/cgroup"
mount --rbind /sys/fs/cgroup "$state/mnt/cgroup"
mount -t sysfs sysfs /sys
mount --rbind "$state/mnt/cgroup" /sys/fs/cgroup
umount -l "$state/mnt/cgroup"

# Host paths the daemons write to whatever their flags say, redirected under the state directory:
# /var/log bound (the kubelet's /var/log/containers links); /run and /var/lib through overlays whose upper
# layers catch what lands there (containerd 1.6's shim sockets in /run/containerd/s, the kubelet's
# device-plugin socket, libcni's result cache). An overlay, not a mkdir and a bind: this namespace shares
# the host's filesystems, so even creating a mount point would leave a directory on the host.
mkdir -p "$state/varlog" "$state/run/upper" "$state/run/work" "$state/varlib/upper" "$state/varlib/work"
mount --bind "$state/varlog" /var/log
mount -t overlay overlay -o "lowerdir=/run,upperdir=$state/run/upper,workdir=$state/run/work" /run
mount -t overlay overlay -o "lowerdir=/var/lib,upperdir=$state/varlib/upper,workdir=$state/varlib/work" /var/lib
for dir in "$@"; do
  key="extra$(tr / _ <<<"$dir")"
  mkdir -p "$state/$key/upper" "$state/$key/work"
  mount -t overlay overlay -o "lowerdir=$dir,upperdir=$state/$key/upper,workdir=$state/$key/work" "$dir"
done

# The kubelet sets six kernel sysctls at start that are global, not per network namespace
# (vm.overcommit_memory=1, kernel.panic=10, ...): show it the values it wants, in this mount namespace only.
# Containers get a /proc of their own and never see these files.
mkdir -p "$state/sysctl"
want() {  # /proc/sys path, value
  local f
  f="$state/sysctl/$(tr / _ <<<"${1#/proc/sys/}")"
  if [[ "$(cat "$1")" != "$2" ]]; then echo "$2" >"$f"; mount --bind "$f" "$1"; fi
}
want /proc/sys/vm/overcommit_memory 1
want /proc/sys/vm/panic_on_oom 0
want /proc/sys/kernel/panic 10
want /proc/sys/kernel/panic_on_oops 1
want /proc/sys/kernel/keys/root_maxkeys 1000000
want /proc/sys/kernel/keys/root_maxbytes 25000000

# The kubelet's cgroupRoot must exist in every v1 hierarchy; a cpuset cgroup needs cpus and mems.
for d in /sys/fs/cgroup/*/; do
  d="${d%/}"
  [[ -L "$d" ]] && continue
  mkdir -p "$d/$cgroot"
done
cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/$cgroot/cpuset.cpus"
cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/$cgroot/cpuset.mems"

# Shared propagation, as on a systemd host: a pod's Bidirectional mount (the NovaCompute pool's
# /var/lib/nova) needs its host path on a shared mount, or containerd refuses the container ("is mounted
# on /var/lib but it is not a shared mount"). This namespace was made private, so its mounts form peer
# groups of their own: nothing propagates to or from the host.
mount --make-rshared /

echo ready
exec sleep infinity
