"""A Nova of a scenario's own on the real-Nova tier: its own databases, its own vhost and bus user on
the broker, one replica per role, no console proxy, and a pool of its own on ``compute-2`` (the node
labelled for it). The release upgrade and the load scenario each make one, and remove it at the end
(the databases stay: nothing else names them)."""

from __future__ import annotations

import pathlib
import secrets
from dataclasses import dataclass

import yaml
from simcluster import SimHandle
from simcluster.client.kube import KubeError

from tests.realnova.realcluster import (
    GROUP,
    JSON,
    NAMESPACE,
    end_stopping,
    is_ready,
    not_ready_summary,
    pods,
    pool_on_fake_driver,
    wait_for,
)

NOVAS = f"{GROUP}/namespaces/{NAMESPACE}/novas"
POOLS = f"{GROUP}/namespaces/{NAMESPACE}/novacomputes"
# The Deployments of the roles it runs, by the suffix of their names (the API's has none).
ROLES = ("", "-metadata", "-scheduler", "-conductor")


def secret(name: str, data: dict[str, str]) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "stringData": data,
    }


def wait_ready(handle: SimHandle, plural: str, name: str, within: float, what: str) -> None:
    wait_for(
        lambda: is_ready(handle, plural, name) or None,
        within=within,
        what=what,
        handle=handle,
        detail=lambda: not_ready_summary(handle, plural, name),
    )


@dataclass(frozen=True)
class OwnNova:
    """``name`` names the Nova and its vhost; with ``-`` as ``_`` its bus user and its databases."""

    name: str
    pool: str

    @property
    def prefix(self) -> str:
        return self.name.replace("-", "_")

    @property
    def vhost(self) -> str:
        return self.name

    def nova(self, release: str) -> JSON:
        role = {"deployment": {"replicas": 1, "terminationGracePeriodSeconds": 30}}
        return {
            "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
            "kind": "Nova",
            "metadata": {"name": self.name, "namespace": NAMESPACE},
            "spec": {
                "openStackRelease": release,
                "image": {"repository": "ghcr.io/c5c3/nova", "tag": release},
                "apiDatabase": {
                    "clusterRef": {"name": "mariadb"},
                    "database": f"{self.prefix}_api",
                    "secretRef": {"name": f"{self.name}-api-db"},
                },
                "database": {
                    "clusterRef": {"name": "mariadb"},
                    "database": self.prefix,
                    "secretRef": {"name": f"{self.name}-cell-db"},
                },
                "cache": {"clusterRef": {"name": "memcached"}},
                "messaging": {"secretRef": {"name": f"{self.name}-bus"}},
                "keystoneEndpoint": "http://keystone-api.openstack.svc:5000/v3",
                "serviceUser": {"secretRef": {"name": "nova-service-user"}},
                "metadata": {
                    "sharedSecretRef": {"name": "nova-metadata-proxy"},
                    "deployment": {"replicas": 1},
                },
                "api": {"deployment": {"replicas": 1}},
                "scheduler": role,
                "conductor": role,
                "consoleProxy": {"enabled": False},
            },
        }

    def pool_body(self, workdir: pathlib.Path) -> JSON:
        pool = yaml.safe_load(pool_on_fake_driver(workdir).read_text())
        pool["metadata"]["name"] = self.pool
        pool["spec"]["novaRef"]["name"] = self.name
        pool["spec"]["nodeSelector"] = {"example.org/compute-pool": "upgrade"}  # compute-2's label
        # A scenario of a roll, not of a stop: a 2026.1 nova-compute would sleep out its release's
        # manager_shutdown_timeout (160 s) within the 200 s grace the pool gets by default, and
        # 2025.2's catalog has no such option to shorten it. 30 s keeps a roll's pace.
        pool["spec"]["terminationGracePeriodSeconds"] = 30
        return dict(pool)

    def provision(self, handle: SimHandle) -> None:
        """The vhost, its user and the Nova's three Secrets (fresh passwords)."""
        assert handle.real is not None
        broker = handle.real.backends.rabbitmq
        bus_password = secrets.token_urlsafe(18)
        if self.vhost not in broker.ctl("list_vhosts", "--no-table-headers").split():
            broker.ctl("add_vhost", self.vhost)
        broker.ensure_user(self.prefix, bus_password)
        broker.ctl("set_permissions", "-p", self.vhost, self.prefix, ".*", ".*", ".*")
        url = f"rabbit://{self.prefix}:{bus_password}@rabbitmq.{NAMESPACE}.svc:5672/{self.vhost}"
        for doc in (
            secret(f"{self.name}-api-db", {"username": f"{self.prefix}_api", "password": _password()}),
            secret(f"{self.name}-cell-db", {"username": self.prefix, "password": _password()}),
            secret(f"{self.name}-bus", {"transport_url": url}),
        ):
            handle.cluster.kube.apply(doc, NAMESPACE)

    def create(self, handle: SimHandle, release: str, workdir: pathlib.Path) -> None:
        handle.cluster.kube.apply(self.nova(release), NAMESPACE)
        handle.cluster.kube.apply(self.pool_body(workdir), NAMESPACE)

    def patch_release(self, handle: SimHandle, release: str) -> None:
        handle.cluster.kube.patch(
            f"{NOVAS}/{self.name}", {"spec": {"openStackRelease": release, "image": {"tag": release}}}
        )

    def images(self, handle: SimHandle) -> dict[str, str]:
        """Each role's image, by role ("api" for the compute API)."""
        out = {}
        for role in ROLES:
            dep = handle.cluster.kube.get(
                f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{self.name}{role}"
            )
            out[role or "api"] = dep["spec"]["template"]["spec"]["containers"][0]["image"]
        return out

    def tear_down(self, handle: SimHandle) -> None:
        """The pool first, to the end of its finalizer (it releases its node through the Nova's
        API), then the Nova, each with its pods (stopped at once: ``delete_to_the_end``); then the
        bus user and the vhost."""
        assert handle.real is not None
        delete_to_the_end(handle, f"{POOLS}/{self.pool}", self.pool)
        delete_to_the_end(handle, f"{NOVAS}/{self.name}", self.name)
        handle.real.backends.rabbitmq.delete_user(self.prefix)
        handle.real.backends.rabbitmq.ctl("delete_vhost", self.vhost)


def delete_to_the_end(handle: SimHandle, path: str, instance: str, within: float = 240) -> None:
    """The object at ``path`` deleted, to the end of its finalizers, and every pod of ``instance``
    gone. Those pods are not under test at a scenario's end: each one stopping is ended
    (``end_stopping``) rather than left to sleep out its role's stop (30 s, or 160 s of a 2026.1
    nova-compute) before the next scenario may start. The object's finalizers still run to their
    end as before."""
    kube = handle.cluster.kube
    try:
        kube.delete(path)
    except KubeError as exc:
        if exc.status != 404:
            raise

    def gone() -> bool:
        for pod in pods(handle, selector=f"app.kubernetes.io/instance={instance}"):
            end_stopping(handle, pod)
        return _gone(handle, path, instance)

    wait_for(lambda: gone() or None, within=within, what=f"{instance} and its pods gone", handle=handle)


def _password() -> str:
    return secrets.token_urlsafe(18)


def _gone(handle: SimHandle, path: str, instance: str) -> bool:
    """The object at ``path`` deleted (its finalizers done) and no pod of ``instance`` left."""
    try:
        handle.cluster.kube.get(path)
    except KubeError as exc:
        if exc.status != 404:
            raise
        return not pods(handle, selector=f"app.kubernetes.io/instance={instance}")
    return False
