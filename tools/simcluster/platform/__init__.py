"""The platform: what a cluster is made of and how it starts.

``controlplane`` (etcd + kube-apiserver, the operator's identity), ``cluster`` (that plus
kube-controller-manager, kube-scheduler and kwok), ``launch`` (a cluster with the dependency CRDs,
the stand-ins and the fake OpenStack), ``installtools`` (helm, kustomize, kubectl), ``prometheus``
and ``incluster`` (the operator run as a pod would see itself).
"""
