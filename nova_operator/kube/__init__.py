"""The only package that imports kubernetes_asyncio: the ``Kube`` seam, resource table, errors."""

from nova_operator.kube.client import ConfigError, Kube, Object, WatchEvent, WatchStream, load_api_client
from nova_operator.kube.resources import ResourceRef, ref_for

__all__ = [
    "ConfigError",
    "Kube",
    "Object",
    "ResourceRef",
    "WatchEvent",
    "WatchStream",
    "load_api_client",
    "ref_for",
]
