#!/usr/bin/env bash
# The Debian packages of the real-Nova tier: the backing servers (MariaDB, RabbitMQ, memcached), the
# noVNC web files a nova image carries, nftables and Open vSwitch's ovsdb-server for the nodes; and what
# a real node runs beside the kubelet (tools/realnode): containerd, runc, the CNI plugins, and the static
# busybox its test image is made of (libc6-dev: the static pause binary of tools/realnode/build.sh), and
# the private registry its pull-secret test pulls from (docker-registry, with skopeo to push to it);
# mmdebstrap, which makes the Debian bases of the nova images (tools/realnode/nova_image.py) and of the
# operator's image, which buildah builds from the Dockerfile (tools/opimage).
# Idempotent: returns at once when every package is installed. No service is started (no systemd
# here); tools/simcluster/realtier/services starts each as a plain process.
set -euo pipefail
# python3.11-dev, python3.11-venv and gcc: the venvs (tools/catalogs/ensure_venvs.sh, venvs.sh) are made with
# Debian's interpreter, and uWSGI compiles against its libpython.
PACKAGES=(mariadb-server mariadb-client rabbitmq-server memcached novnc nftables openvswitch-switch iproute2
  python3.11-dev python3.11-venv gcc
  containerd runc containernetworking-plugins busybox-static libc6-dev docker-registry skopeo
  buildah mmdebstrap)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  # an install stopped half-way (Ctrl-C of make run) leaves dpkg needing this; otherwise a no-op
  dpkg --configure -a
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
