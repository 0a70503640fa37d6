"""Fixtures of the renderer tests: sample Novas, the inputs a pass hands the renderers, goldens.

Goldens live under ``golden/``; a changed byte fails the test with a diff.  To accept a
deliberate change, rerun with ``UPDATE_GOLDEN=1`` and review the diff in git.
"""

from __future__ import annotations

import difflib
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from nova_operator.models.nova import Nova

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
GOLDEN = HERE / "golden"
SAMPLES = ("minimal", "full")


def load_nova(sample: str) -> Nova:
    return Nova.model_validate(yaml.safe_load((FIXTURES / f"{sample}.yaml").read_text()))


@pytest.fixture(params=SAMPLES)
def sample(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def nova(sample: str) -> Nova:
    return load_nova(sample)


Golden = Callable[[str, str], None]


@pytest.fixture
def golden() -> Golden:
    def check(relative: str, text: str) -> None:
        path = GOLDEN / relative
        if os.environ.get("UPDATE_GOLDEN"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        if not path.exists():
            pytest.fail(f"no golden {path.relative_to(HERE)}; run with UPDATE_GOLDEN=1 to create it")
        want = path.read_text(encoding="utf-8")
        if want != text:
            diff = "".join(
                difflib.unified_diff(
                    want.splitlines(keepends=True), text.splitlines(keepends=True), "golden", "rendered"
                )
            )
            pytest.fail(f"{relative} differs from its golden:\n{diff}")

    return check


@pytest.fixture
def load_sample() -> Callable[[str], Nova]:
    return load_nova


DIGEST_KEY = b"0f1e2d3c4b5a69788796a5b4c3d2e1f0"  # the Nova's {name}-digest-key in the goldens

# Distinctive values for every referenced Secret: the leak test searches every rendered byte for them.
SECRET_VALUES = {
    "api_db_username": "apiuser-7Kq2",
    "api_db_password": "ApiDbPw-9x!Zr@/%ZZ",
    "cell_db_username": "celluser-4Lm8",
    "cell_db_password": "CellDbPw-3v#Qe:;",
    "service_password": "SvcUserPw-6Tn1$&",
    "metadata_secret": "MetaShared-8Hw5",
    "rabbit_username": "rabbituser-2Pd9",
    "rabbit_password": "RabbitPw-5Gc7+=",
    "remote_transport_url": "rabbit://remoteuser-1Jk3:RemotePw-0Fz4@mq.example.org:5671/",
    "ca_crt": "-----BEGIN CERTIFICATE-----\nMIIBcaFakeCa-6Rt2\n-----END CERTIFICATE-----\n",
}


def render_everything(nova: Nova) -> dict[str, Any]:
    """Every object the renderers produce for ``nova``, keyed ``<kind>/<name>``, from fixed inputs."""
    from nova_operator import digests
    from nova_operator.renderers import (
        hpa,
        http_route,
        jobs,
        mariadb,
        network_policy,
        novaconf,
        pdb,
        secrets,
        service,
        workload,
    )

    v = SECRET_VALUES
    api_dsn = secrets.database_dsn(nova, "api", username=v["api_db_username"], password=v["api_db_password"])
    cell_dsn = secrets.database_dsn(
        nova, "cell", username=v["cell_db_username"], password=v["cell_db_password"]
    )
    transport = secrets.managed_transport_url(
        username=v["rabbit_username"], password=v["rabbit_password"], host="rabbitmq.openstack.svc", port=5672
    )
    port = secrets.check_transport_url(transport)
    inputs = novaconf.conf_inputs(nova)
    data = novaconf.config_data(inputs)
    cm = novaconf.config_map(nova, data)
    work = workload.WorkloadInputs(
        config_map=cm["metadata"]["name"],
        broker_port=port,
        digests=workload.Digests(
            api_db_connection=digests.credential_digest(api_dsn, DIGEST_KEY),
            db_connection=digests.credential_digest(cell_dsn, DIGEST_KEY),
            authtoken=digests.credential_digest(v["service_password"], DIGEST_KEY),
            transport_url=digests.credential_digest(transport, DIGEST_KEY),
            metadata_secret=digests.credential_digest(v["metadata_secret"], DIGEST_KEY),
        ),
    )
    tls = nova.spec.messaging.tls is not None
    objects: list[dict[str, Any]] = [
        cm,
        secrets.dsn_secret(nova, "api", api_dsn),
        secrets.dsn_secret(nova, "cell", cell_dsn),
        secrets.transport_url_secret(nova, transport),
        secrets.compute_config_secret(
            nova,
            fragment=novaconf.render_compute_fragment(inputs),
            transport_url=transport,
            password=v["service_password"],
            metadata_secret=v["metadata_secret"],
            ca_crt=v["ca_crt"] if tls else None,
        ),
        *workload.deployments(nova, work).values(),
        *service.services(nova).values(),
        pdb.pdb(nova),
        *http_route.http_routes(nova).values(),
        *network_policy.network_policies(
            nova, operator_namespace="nova-operator-system", broker_port=port
        ).values(),
        jobs.db_sync_job(nova, work.config_map),
        jobs.phase_job(nova, "db-expand", work.config_map),
        jobs.phase_job(nova, "db-migrate", work.config_map),
        jobs.phase_job(nova, "db-contract", work.config_map),
        jobs.db_archive_cronjob(nova, work.config_map),
        *mariadb.mariadb_objects(nova),
    ]
    if (scaler := hpa.hpa(nova)) is not None:
        objects.append(scaler)
    if nova.spec.remote_compute is not None:
        remote = novaconf.RemoteComputeInputs(keystone_endpoint=nova.spec.remote_compute.keystone_endpoint)
        objects.append(
            secrets.compute_config_secret(
                nova,
                fragment=novaconf.render_compute_fragment(inputs, remote=remote),
                transport_url=v["remote_transport_url"],
                password=v["service_password"],
                metadata_secret=v["metadata_secret"],
                ca_crt=v["ca_crt"],
                remote=True,
            )
        )
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in objects}


@pytest.fixture
def render_all() -> Callable[[Nova], dict[str, Any]]:
    return render_everything


@pytest.fixture
def secret_values() -> dict[str, str]:
    return dict(SECRET_VALUES)


CATALOG_TOOLS = Path(__file__).resolve().parents[3] / "tools" / "catalogs"


@pytest.fixture(scope="session")
def venvs() -> dict[str, Path]:
    """release -> the nova venv of that release (made by tools/catalogs/ensure_venvs.sh)."""
    made = subprocess.run(
        ["bash", str(CATALOG_TOOLS / "ensure_venvs.sh")], capture_output=True, text=True, check=False
    )
    if made.returncode != 0:
        pytest.fail(f"tools/catalogs/ensure_venvs.sh failed:\n{made.stderr[-3000:]}")
    import importlib.util

    spec = importlib.util.spec_from_file_location("catalogs_generate", CATALOG_TOOLS / "generate.py")
    assert spec is not None
    assert spec.loader is not None
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    return {release: generate.venv_dir(release) for release, _ in generate.releases()}
