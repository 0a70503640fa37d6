"""Pydantic types of the two kinds of ``nova.openstack.c5c3.io/v1alpha1``.

``Nova`` / ``NovaCompute`` parse what the API server stores (camelCase JSON) with
``model_validate`` and serialize it back without loss with
``model_dump(by_alias=True, exclude_none=True)``. ``crd.render_crds()`` generates the CRDs
from the same types. Pure: no I/O, no Kubernetes client.
"""

from nova_operator.models.meta import Condition, ObjectMeta, OwnerReference
from nova_operator.models.nova import Nova, NovaSpec, NovaStatus
from nova_operator.models.novacompute import NovaCompute, NovaComputeSpec, NovaComputeStatus

GROUP = "nova.openstack.c5c3.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

__all__ = [
    "API_VERSION",
    "GROUP",
    "VERSION",
    "Condition",
    "Nova",
    "NovaCompute",
    "NovaComputeSpec",
    "NovaComputeStatus",
    "NovaSpec",
    "NovaStatus",
    "ObjectMeta",
    "OwnerReference",
]
