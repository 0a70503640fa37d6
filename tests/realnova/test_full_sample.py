"""``config/samples/nova_full.yaml`` through the real Nova, with its Secrets.

What the sample names outside the cluster is provided as a site would: a brownfield MariaDB at
``db.example.org:3307`` speaking TLS whose users must present a client certificate (``REQUIRE
X509``), a brownfield RabbitMQ at ``rabbitmq.example.org:5671`` with TLS, memcached at the pod names
of a headless Service, the ClusterSecretStore the sample names (Ready, as External Secrets would
report it), the Gateway ``gateways/public-gateway``, and the nodes its API pods select. The sample's
Secrets are applied as they are, but for the CA bundles and the client certificate, which a site
fills with real ones (the test PKI's). Then the sample is Ready: every role runs, over TLS, with
the uWSGI options it sets (``httpKeepAliveTimeout: 30``, which once crash-looped the API).
"""

from __future__ import annotations

import base64
import json
import pathlib
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from simcluster import SimHandle
from simcluster.client.kube import KubeError
from simcluster.platform.controlplane import REPO, free_port
from simcluster.realtier.services.mariadb import MariaDBServer
from simcluster.realtier.services.pki import PKI, make_pki
from simcluster.realtier.services.rabbitmq import RabbitMQServer

from tests.realnova.realcluster import (
    GROUP,
    JSON,
    NAMESPACE,
    SAMPLES,
    OpenStackClient,
    compute_url,
    end_stopping,
    is_ready,
    not_ready_summary,
    pods,
    sample_secret,
    wait_for,
)
from tests.realnova.steady import SteadyClient

pytestmark = pytest.mark.realnova
FULL = "nova-full"
STORE_CRDS = REPO / "tests" / "integration" / "nova" / "crds" / "external-secrets-stores.yaml"
EXTERNAL = ("db.example.org", "rabbitmq.example.org", "rabbitmq-external.example.org")


def _site_secrets(pki: PKI) -> list[dict[str, object]]:
    """The sample's CA bundles and client certificate, filled with the site's (the test PKI's)."""

    def secret(name: str, data: dict[str, pathlib.Path]) -> dict[str, object]:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "data": {k: base64.b64encode(p.read_bytes()).decode() for k, p in data.items()},
        }

    return [
        secret("db-ca", {"ca.crt": pki.ca.cert}),
        secret("rabbitmq-ca", {"ca.crt": pki.ca.cert}),
        secret("nova-db-client-cert", {"tls.crt": pki.client.cert, "tls.key": pki.client.key}),
    ]


@dataclass
class Site:
    """The full sample's cluster and the site's servers outside it."""

    handle: SimHandle
    db: MariaDBServer
    broker: RabbitMQServer


@pytest.fixture(scope="module")
def full(minimal: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The full sample and everything it names outside the cluster; Ready."""
    handle = minimal  # the same cluster; the minimal sample keeps running beside it
    real = handle.real
    assert real is not None
    kube = handle.cluster.kube
    work = pathlib.Path(tmp_path_factory.mktemp("full"))
    pki = make_pki(work / "pki", dns=EXTERNAL, ips=real.server_ips)
    db = MariaDBServer(work / "mariadb", address=real.host_address, port=free_port(), tls=pki.server_files())
    broker = RabbitMQServer(
        work / "rabbitmq",
        address=real.host_address,
        port=free_port(),
        dist_port=free_port(),
        epmd_port=free_port(),
        tls=pki.server_files(),
        tls_port=free_port(),
    )
    try:
        db.start()
        broker.start()
        # the site's databases and users, as the sample's Secrets name them
        for schema in ("nova_api", "nova", "nova_cell0"):
            db.create_database(schema, charset="utf8mb3", collation="utf8mb3_general_ci")
        users = {
            "nova-api-db-credentials": ("nova_api",),
            "nova-cell-db-credentials": ("nova", "nova_cell0"),
        }
        for secret, schemas in users.items():
            user = sample_secret(secret, "username")
            db.ensure_user(user, sample_secret(secret, "password"), require="X509")
            for schema in schemas:
                db.grant(["ALL PRIVILEGES"], schema, "*", user, grant_option=False)
        transport = sample_secret("rabbitmq-transport-url", "transport_url")
        bus_user, bus_password = transport.split("://", 1)[1].split("@", 1)[0].split(":", 1)
        broker.ensure_user(bus_user, bus_password)
        real.expose(NAMESPACE, "external-db", 3307, db.port)
        real.expose(NAMESPACE, "external-rabbitmq", 5671, broker.tls_port)
        real.alias("db.example.org", NAMESPACE, "external-db")
        real.alias("rabbitmq.example.org", NAMESPACE, "external-rabbitmq")
        for i in (0, 1):
            real.alias(f"memcached-{i}.memcached.{NAMESPACE}.svc", NAMESPACE, "memcached")
        # the ClusterSecretStore the sample names, Ready as External Secrets reports it
        handle.apply(STORE_CRDS)
        store = {
            "apiVersion": "external-secrets.io/v1",
            "kind": "ClusterSecretStore",
            "metadata": {"name": "openbao-cluster-store"},
            "spec": {"provider": {"fake": {"data": []}}},
        }
        kube.apply(store)
        kube.patch(
            "/apis/external-secrets.io/v1/clustersecretstores/openbao-cluster-store/status",
            {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Valid"}]}},
        )
        kube.apply(
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway",
                "metadata": {"name": "public-gateway", "namespace": "gateways"},
                "spec": {
                    "gatewayClassName": _gateway_class(),
                    "listeners": [
                        {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": _all()},
                        {"name": "https", "port": 8080, "protocol": "HTTP", "allowedRoutes": _all()},
                    ],
                },
            },
            "gateways",
        )
        for doc in _site_secrets(pki):
            kube.apply(doc, NAMESPACE)
        handle.apply(SAMPLES / "nova_full.yaml", namespace=NAMESPACE)
        wait_for(
            lambda: is_ready(handle, "novas", FULL) or None,
            within=420,
            what="the full sample Ready",
            handle=handle,
            detail=lambda: not_ready_summary(handle, "novas", FULL),
        )
        yield Site(handle, db, broker)
        # the Nova goes before the site's servers do, so no pod of it is left without them
        kube.delete(f"/apis/nova.openstack.c5c3.io/v1alpha1/namespaces/{NAMESPACE}/novas/{FULL}")
        wait_for(
            lambda: _cut_short(handle) or None,
            within=300,  # the conductor's grace period is 240 s
            what="the full sample's pods gone after its deletion",
            handle=handle,
        )
    finally:
        broker.stop()
        db.stop()


def _cut_short(handle: SimHandle) -> bool:
    """Whether the full sample's pods are gone; each one still stopping is ended (``end_stopping``).
    At 2026.1 the bus roles first sleep [DEFAULT] manager_shutdown_timeout (160 s, the sample leaves
    it): a wait that tests nothing here (docs/operations.md, "How long a pod takes to stop")."""
    left = pods(handle, selector=f"app.kubernetes.io/instance={FULL}")
    for pod in left:
        end_stopping(handle, pod)
    return not left


def _all() -> dict[str, object]:
    return {"namespaces": {"from": "All"}}


def _gateway_class() -> str:
    from simcluster.standins import GATEWAY_CLASS

    return GATEWAY_CLASS


def test_the_full_sample_runs_every_role_with_its_replicas(full: Site) -> None:
    kube = full.handle.cluster.kube
    for role, want in (("", 3), ("-metadata", 2), ("-scheduler", 2), ("-conductor", 2), ("-novncproxy", 2)):
        dep = kube.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{FULL}{role}")
        assert dep["status"].get("availableReplicas") == want, (role, dep["status"])
    api_pods = _pods(full, "api")
    assert {p["spec"]["nodeName"] for p in api_pods} <= {"control-0", "control-1"}  # its nodeSelector
    container = api_pods[0]["spec"]["containers"][0]
    argv = [*container.get("command", []), *container.get("args", [])]
    assert "--http-keepalive=30" in argv, argv  # httpKeepAliveTimeout: 30, in the form uWSGI 2.0 takes
    assert all(cs["restartCount"] == 0 for p in api_pods for cs in p["status"]["containerStatuses"])


def test_the_full_samples_service_list_has_a_row_per_scheduler_and_conductor_pod(full: Site) -> None:
    client = OpenStackClient(full.handle, compute_url(full.handle, FULL))
    services = client.services()
    for binary, role in (("nova-scheduler", "scheduler"), ("nova-conductor", "conductor")):
        names = {p["metadata"]["name"] for p in _pods(full, role)}
        rows = [s for s in services if s["binary"] == binary]
        assert {s["host"] for s in rows} == names, rows
        assert all(s["state"] == "up" for s in rows), rows


def test_the_full_sample_talks_to_the_sites_database_and_broker_over_tls(full: Site) -> None:
    """Both users must present the sample's client certificate (REQUIRE X509): any connection they
    hold is TLS with it; nova's connections to the broker arrive on its TLS listener only."""
    for secret in ("nova-api-db-credentials", "nova-cell-db-credentials"):
        assert full.db.connections_of(sample_secret(secret, "username")) > 0, secret
    listing = full.broker.ctl("list_connections", "--no-table-headers", "user", "port", "ssl")
    rows = [line.split() for line in listing.splitlines() if line.strip()]
    nova = [r for r in rows if r and r[0] == "nova"]
    assert nova, listing
    assert all(r[1] == str(full.broker.tls_port) and r[2] == "true" for r in nova), listing


def test_the_api_answers_from_every_pod_and_keeps_answering_through_a_scale_3_5_1(full: Site) -> None:
    """Issue 24, scenario 1: each API pod answers at its own address, then the Service does; the
    sample's autoscaling is dropped (the Deployment keeps its 3 replicas) and the API scaled 3 -> 5
    -> 1, the PodDisruptionBudget following the lower bound (``minAvailable: 1`` above one,
    ``maxUnavailable: 1`` at one), while a steady client of the Service counts its failed requests.
    This test runs last in the module: it leaves the sample on one API replica."""
    handle, kube = full.handle, full.handle.cluster.kube
    service = compute_url(handle, FULL)
    token = OpenStackClient(handle, service).token()
    auth = {"X-Auth-Token": token, "OpenStack-API-Version": "compute 2.95"}
    api_pods = _pods(full, "api")
    assert len(api_pods) == 3
    addresses = {str(p["metadata"]["name"]): str(p["status"]["podIP"]) for p in api_pods}
    assert len(set(addresses.values())) == 3, addresses
    for pod, ip in addresses.items():
        assert _flavors(_at(handle, ip), auth) == 200, pod
    assert _flavors(service, auth) == 200
    assert _budget(full) == {"minAvailable": 1}  # autoscaling.minReplicas: 3

    steady = SteadyClient(f"{service}/v2.1/flavors", headers=lambda: auth).start()
    seen: list[tuple[int, JSON]] = [(3, _budget(full))]
    logs: dict[str, list[str]] = {}
    t0 = time.monotonic()
    try:
        kube.patch(f"{GROUP}/namespaces/{NAMESPACE}/novas/{FULL}", {"spec": {"autoscaling": None}})
        wait_for(lambda: _hpa_gone(full) or None, within=60, what="the HPA deleted with spec.autoscaling")
        _settled(full, 3)
        seen.append((3, _budget(full)))
        for replicas in (5, 1):
            kube.patch(
                f"{GROUP}/namespaces/{NAMESPACE}/novas/{FULL}",
                {"spec": {"api": {"deployment": {"replicas": replicas}}}},
            )
            _settled(full, replicas)
            seen.append((replicas, _budget(full)))
            assert _other_roles(full) == OTHER_ROLES  # the API's count is the API's alone
            if replicas == 5:
                for pod in _pods(full, "api"):
                    assert _flavors(_at(handle, pod["status"]["podIP"]), auth) == 200, pod
                logs = _api_logs(full)  # before four of the pods go with their logs
        time.sleep(2)  # the client's requests after the last pod went
    finally:
        steady.stop()
    seconds = time.monotonic() - t0
    print(
        f"scenario 1: {steady.sent} requests over {seconds:.0f} s, {len(steady.failures)} failed "
        f"{steady.failures[:10]}; budgets {seen}"
    )
    assert seen == [
        (3, {"minAvailable": 1}),
        (3, {"minAvailable": 1}),
        (5, {"minAvailable": 1}),
        (1, {"maxUnavailable": 1}),
    ]
    assert steady.sent >= seconds * 2, steady.sent  # it did run steadily
    assert steady.failures == [], _served(logs, steady.failures)
    assert is_ready(handle, "novas", FULL)


def _at(handle: SimHandle, pod_ip: str) -> str:
    """The compute API of the pod at ``pod_ip``, as the host reaches it (``RealTier.reach_ip``)."""
    assert handle.real is not None
    host, port = handle.real.reach_ip(pod_ip, 8774)
    return f"http://{host}:{port}"


def _api_logs(full: Site) -> dict[str, list[str]]:
    """Each API pod's log lines (``RealTier.container_log``)."""
    real = full.handle.real
    assert real is not None
    selector = f"app.kubernetes.io/instance={FULL},app.kubernetes.io/component=api"
    out: dict[str, list[str]] = {}
    for pod in pods(full.handle, selector=selector):
        out[pod["metadata"]["name"]] = real.container_log(pod, "api").splitlines()
    return out


def _served(logs: dict[str, list[str]], failures: list[str]) -> str:
    """The API's log lines of the failed requests (by request id) and the errors it logged."""
    ids = {w for f in failures for w in f.split() if w.startswith("req-")}
    lines = [
        f"{pod}: {line[:600]}"
        for pod, pod_lines in logs.items()
        for line in pod_lines
        if any(i in line for i in ids) or '"ERROR"' in line or "Traceback" in line
    ]
    return f"{failures}\n" + "\n".join(lines[:80])


OTHER_ROLES = {"-metadata": 2, "-scheduler": 2, "-conductor": 2, "-novncproxy": 2}


def _other_roles(full: Site) -> dict[str, int]:
    kube = full.handle.cluster.kube
    return {
        role: kube.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{FULL}{role}")["status"].get(
            "availableReplicas", 0
        )
        for role in OTHER_ROLES
    }


def _flavors(base: str, headers: dict[str, str]) -> int:
    """The status of an authenticated ``GET /v2.1/flavors`` (token check, policy, the API database)."""
    request = urllib.request.Request(f"{base}/v2.1/flavors", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            assert "flavors" in json.loads(resp.read())
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _budget(full: Site) -> JSON:
    """The API PodDisruptionBudget's bound (whichever of the two fields it sets)."""
    spec = full.handle.cluster.kube.get(
        f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets/{FULL}"
    )["spec"]
    return {k: spec[k] for k in ("minAvailable", "maxUnavailable") if k in spec}


def _hpa_gone(full: Site) -> bool:
    try:
        full.handle.cluster.kube.get(
            f"/apis/autoscaling/v2/namespaces/{NAMESPACE}/horizontalpodautoscalers/{FULL}"
        )
    except KubeError as exc:
        if exc.status == 404:
            return True
        raise
    return False


def _settled(full: Site, replicas: int) -> None:
    """The API Deployment at ``replicas``, all available, no other API pod left (terminating ones
    included), and the PodDisruptionBudget rendered for them (the Nova's generation observed)."""
    kube = full.handle.cluster.kube
    nova = f"{GROUP}/namespaces/{NAMESPACE}/novas/{FULL}"
    deployment = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{FULL}"
    selector = f"app.kubernetes.io/instance={FULL},app.kubernetes.io/component=api"

    def done() -> bool:
        dep = kube.get(deployment)
        status = dep["status"]
        generation = kube.get(nova)["metadata"]["generation"]
        ready = _conditions_of(kube.get(nova)).get("DeploymentReady", {})
        return (
            dep["spec"]["replicas"] == replicas
            and status.get("observedGeneration") == dep["metadata"]["generation"]
            and status.get("replicas") == status.get("availableReplicas") == replicas
            and len(pods(full.handle, selector=selector)) == replicas
            and ready.get("observedGeneration") == generation
        )

    wait_for(done, within=240, what=f"the API at {replicas} replicas", handle=full.handle)


def _conditions_of(obj: JSON) -> dict[str, JSON]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def _pods(full: Site, role: str) -> list[JSON]:
    selector = f"app.kubernetes.io/instance={FULL},app.kubernetes.io/component={role}"
    return [p for p in pods(full.handle, selector=selector) if not p["metadata"].get("deletionTimestamp")]
