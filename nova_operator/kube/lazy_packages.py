"""Import kubernetes_asyncio's packages without running their ``__init__`` until a name needs it.

``kubernetes_asyncio/__init__.py`` imports ``client``, whose ``__init__`` imports every generated
API class and model (about 900 modules, 35 MiB of the operator's resident memory). The seam uses
four modules of it (``Configuration``, ``ApiClient`` with raw responses, the kubeconfig and
in-cluster loaders) and no model. ``install()`` registers each package as an empty module with the
package's real search path, so ``import kubernetes_asyncio.client.api_client`` loads that file and
what it imports, nothing else. A name the empty module does not have (``client.CoreV1Api``, a model
class) runs the package's real ``__init__`` in that module then and there (PEP 562 ``__getattr__``),
so code that wants the whole package still gets it, with the same module objects.

Nothing happens for a package that is already imported: then its ``__init__`` has run anyway.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import types
from typing import Any, Final

PACKAGES: Final = (
    "kubernetes_asyncio",
    "kubernetes_asyncio.client",
    "kubernetes_asyncio.client.models",
    "kubernetes_asyncio.config",
)
_lock = threading.RLock()


class LazyPackage(types.ModuleType):
    """A package whose ``__init__`` runs on the first lookup of a name it does not define."""

    def __getattr__(self, name: str) -> Any:
        submodule = f"{self.__name__}.{name}"
        if submodule in sys.modules or importlib.util.find_spec(submodule) is not None:
            # ``from package import submodule`` asks the package first: the submodule alone
            return importlib.import_module(submodule)
        with _lock:
            state = self.__dict__
            if not state.get("_lazy_loaded"):
                state["_lazy_loaded"] = True
                spec = state["__spec__"]
                assert spec is not None
                assert spec.loader is not None
                spec.loader.exec_module(self)
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None


def _register(name: str) -> None:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError(f"{name} is not an installed package")
    module = LazyPackage(name)
    module.__spec__ = spec
    module.__file__ = spec.origin
    module.__path__ = list(spec.submodule_search_locations)
    module.__package__ = name
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)


def install() -> None:
    """Register the packages not imported yet (parents first); idempotent.

    The two names the config loaders import from ``kubernetes_asyncio.client`` itself
    (``ApiClient``, ``Configuration``) are set on it from their own modules, which would otherwise
    be lookups that run the whole ``__init__``.
    """
    with _lock:
        for name in PACKAGES:
            if name not in sys.modules:
                _register(name)
        client = sys.modules["kubernetes_asyncio.client"]
        if isinstance(client, LazyPackage) and not client.__dict__.get("_lazy_loaded"):
            api_client = importlib.import_module("kubernetes_asyncio.client.api_client")
            configuration = importlib.import_module("kubernetes_asyncio.client.configuration")
            client.__dict__.setdefault("ApiClient", api_client.ApiClient)
            client.__dict__.setdefault("Configuration", configuration.Configuration)
