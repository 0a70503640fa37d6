"""The only package that imports kubernetes_asyncio: the ``Kube`` seam, resource table, errors."""

from nova_operator.kube import lazy_packages

lazy_packages.install()  # before the first kubernetes_asyncio import: the modules the seam uses, no model

from nova_operator.kube.client import Kube, WatchEvent, WatchStream  # noqa: E402
from nova_operator.kube.config import ConfigError, load_api_client  # noqa: E402
from nova_operator.kube.resources import ResourceRef, ref_for  # noqa: E402
from nova_operator.kube.types import Object  # noqa: E402

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
