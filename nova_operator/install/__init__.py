"""The operator's install layout, generated: kustomize bases under ``config/`` and the Helm chart
``charts/nova-operator/``, both from the objects in ``install.objects`` (so the two never drift).

- ``install.rbac``: the operator's rules, taken from the generator's RBAC (``render_rbac``),
  split into the leader-election Role, the cluster-scoped and the namespaced part;
- ``install.objects``: the Deployment, Services, RBAC, PDB, ServiceMonitor, NetworkPolicy ... for
  a ``Target`` (literal kustomize names, or Helm template expressions);
- ``install.kustomize`` and ``install.chart``: the files, as ``{relative path: text}``.

``nova_operator.install.manifests`` writes and verifies them (``make manifests``, ``make verify-manifests``).
"""
