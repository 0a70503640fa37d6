"""Real Kubernetes nodes for tests: kubelet and kube-proxy built from Go modules
(``tools/realnode/build.sh``), Debian's containerd, runc and CNI plugins.

* ``images``: OCI images written here (uncompressed, cached by content) for ``ctr images import``.
"""
