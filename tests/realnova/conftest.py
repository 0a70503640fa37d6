"""Fixtures of the real-Nova tier: the real backing servers, started once per session, and the
real-Nova cluster (``cluster``; ``minimal``: with the samples Ready), once per session too: real
nodes (``simcluster.realtier.all_real``: kubelets on containerd) with the operator installed by its
chart.

A missing Debian package fails these tests (``tools/realnova/install.sh`` installs them; CI runs it):
the real tier is never skipped. The servers speak TLS too (``pki``: a CA, their certificate, a
client certificate and the certificates a verifying client must refuse).
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest
from catalogs.generate import venv_dir
from simcluster import SimHandle
from simcluster.platform.controlplane import REPO
from simcluster.realtier.all_real import launch_all_real
from simcluster.realtier.services.backends import RealBackends
from simcluster.realtier.services.pki import PKI, make_pki

from tests.realnova.realcluster import (
    NAMESPACE,
    NOVA,
    POOL,
    POOL_LABELS,
    SAMPLES,
    UPGRADE_POOL_LABELS,
    full_sample_image,
    is_ready,
    not_ready_detail,
    not_ready_summary,
    sample_secret,
    start_operator,
    tier_nova,
    tier_pool,
    wait_for,
)

MAKE_RUN = ("tests/realnova/test_make_run.py::",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``make run``'s tests first in the tier: their real clusters are up and gone before the tier's
    own starts (``cluster`` lives until the tier's last test), so two never run at once."""
    first = [item for item in items if item.nodeid.startswith(MAKE_RUN)]
    rest = [item for item in items if not item.nodeid.startswith(MAKE_RUN)]
    at = next((i for i, item in enumerate(rest) if item.nodeid.startswith("tests/realnova/")), len(rest))
    items[:] = [*rest[:at], *first, *rest[at:]]


# The release whose nova venv runs the clients nova uses (oslo.db, SQLAlchemy, PyMySQL, kombu).
NOVA_RELEASE = "2026.1"


@pytest.fixture(scope="session")
def nova_python() -> pathlib.Path:
    """The interpreter of that release's nova venv (``tools/catalogs/ensure_venvs.sh`` makes it)."""
    python = venv_dir(NOVA_RELEASE) / "bin" / "python"
    if not python.exists():
        pytest.fail(f"no nova venv for {NOVA_RELEASE} ({python}): run tools/catalogs/ensure_venvs.sh")
    return python


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    """Server certificates for ``localhost`` and ``127.0.0.1`` (where the backends listen)."""
    return make_pki(pathlib.Path(tmp_path_factory.mktemp("pki")), dns=("localhost",), ips=("127.0.0.1",))


@pytest.fixture(scope="session")
def backends(tmp_path_factory: pytest.TempPathFactory, pki: PKI) -> Iterator[RealBackends]:
    servers = RealBackends(pathlib.Path(tmp_path_factory.mktemp("backends")), pki=pki).start()
    try:
        yield servers
    finally:
        servers.stop()


RELEASES = ("2025.2", "2026.1", "2026.2")  # the samples' releases, and the upgrade's last
COMPUTE_NODES = ("compute-0", "compute-1", "compute-2")
CONTROL = {"node-role.kubernetes.io/control-plane": ""}
NODE_LABELS = {
    "control-0": {**CONTROL, "topology.kubernetes.io/zone": "az1"},
    "control-1": {**CONTROL, "topology.kubernetes.io/zone": "az2"},
    "compute-0": POOL_LABELS,
    "compute-1": POOL_LABELS,
    "compute-2": UPGRADE_POOL_LABELS,  # the release upgrade's own pool (test_upgrade.py)
}


# The real-Nova cluster: one per session (package scope), shared by every module of the tier.
@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    workdir = pathlib.Path(tmp_path_factory.mktemp("real"))
    handle = launch_all_real(
        workdir,
        control_nodes=("control-0", "control-1"),
        compute_nodes=COMPUTE_NODES,
        node_labels=NODE_LABELS,
        releases=RELEASES,
        image_aliases={full_sample_image(): "2026.1"},
    )
    try:
        assert handle.real is not None
        handle.create_gateway(NAMESPACE, "public-gateway")
        handle.real.openstack.add_service_user("nova", sample_secret("nova-service-user", "password"))
        start_operator(handle)
        print(
            f"\nreal-Nova tier on real nodes: started in "
            f"{handle.startup_seconds:.0f} s; {handle.real.startup}"
        )
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="package")
def minimal(cluster: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> SimHandle:
    """The minimal sample and the NovaCompute sample (on the fake driver) applied, both Ready."""
    workdir = pathlib.Path(tmp_path_factory.mktemp("samples"))
    cluster.apply(
        SAMPLES / "secrets.yaml",
        REPO / "tools" / "simcluster" / "samples" / "dependencies.yaml",
        tier_nova(workdir),
        tier_pool(workdir),
        namespace=NAMESPACE,
    )
    wait_for(
        lambda: is_ready(cluster, "novas", NOVA) or None,
        within=300,
        what="the minimal Nova Ready",
        handle=cluster,
        detail=lambda: not_ready_summary(cluster, "novas", NOVA),
    )
    wait_for(
        lambda: is_ready(cluster, "novacomputes", POOL) or None,
        within=240,
        what="the sample pool Ready",
        handle=cluster,
        detail=lambda: not_ready_detail(
            cluster,
            "novacomputes",
            POOL,
            f"app.kubernetes.io/instance={POOL}",
            f"app.kubernetes.io/instance={NOVA},app.kubernetes.io/component=api",
        ),
    )
    return cluster
