"""kubernetes_asyncio's packages load lazily in the operator's process (``kube.lazy_packages``).

Each check runs in a fresh interpreter: the test process has long imported the whole package.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_operator_imports_no_generated_api_or_model_module() -> None:
    out = _run(
        """
        import sys
        import nova_operator.cli
        loaded = [m for m in sys.modules if m.startswith("kubernetes_asyncio.client.")]
        print(sorted(m for m in loaded if ".models." in m or ".api." in m))
        print("kubernetes_asyncio.client.api_client" in sys.modules)
        """
    )
    assert out.splitlines() == ["[]", "True"]


def test_a_client_built_by_the_seam_still_has_the_whole_package_on_demand() -> None:
    out = _run(
        """
        import sys
        from nova_operator.kube.config import ApiClient, Configuration
        import kubernetes_asyncio
        import kubernetes_asyncio.client as client
        from kubernetes_asyncio.client import V1ObjectMeta
        from kubernetes_asyncio.config import load_kube_config
        print(client.ApiClient is ApiClient, client.Configuration is Configuration)
        print(client.CoreV1Api.__module__, V1ObjectMeta.__module__, kubernetes_asyncio.__version__ != "")
        print(callable(load_kube_config), kubernetes_asyncio.watch.__name__)
        """
    )
    assert out.splitlines() == [
        "True True",
        "kubernetes_asyncio.client.api.core_v1_api kubernetes_asyncio.client.models.v1_object_meta True",
        "True kubernetes_asyncio.watch",
    ]


def test_nothing_is_replaced_once_the_whole_package_is_imported() -> None:
    out = _run(
        """
        import kubernetes_asyncio.client as before
        from nova_operator.kube import lazy_packages
        lazy_packages.install()
        import sys
        print(sys.modules["kubernetes_asyncio.client"] is before, type(before).__name__)
        """
    )
    assert out == "True module"


def test_an_unknown_name_is_an_attribute_error_after_the_package_loads() -> None:
    out = _run(
        """
        import nova_operator.kube.client
        import kubernetes_asyncio.client as client
        try:
            client.NoSuchThing
        except AttributeError as exc:
            print("AttributeError", "NoSuchThing" in str(exc))
        print(hasattr(client, "CoreV1Api"))
        """
    )
    assert out.splitlines() == ["AttributeError True", "True"]
