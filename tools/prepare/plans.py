"""What ``make run`` and CI (``.ci/run``) build before they start, as lanes of stages.

Two lanes run side by side: the Python lane (Debian packages, then the venvs, then the nova image
trees: network, pip and a few C compiles) and the Go lane (the binaries compiled from Go modules:
CPU). Every stage is idempotent and returns at once when its cache is current, so a warm run costs
seconds. The caches are the scripts' own (``/var/cache/nova-envtest``, ``/var/cache/nova-operator``;
``ENVTEST_CACHE``, ``NOVA_VENV_CACHE``, ``REALNOVA_VENV_CACHE`` and ``NOVA_IMAGE_CACHE`` move them).
"""

from __future__ import annotations

import re
from pathlib import Path

from prepare.runner import Stage

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "config" / "samples" / "nova_minimal.yaml"
RELEASES = REPO / "tools" / "catalogs" / "releases.txt"
IMAGE_PYTHON = "/usr/bin/python3.11"  # Debian's, installed by the apt stage
CONTROL_PLANE = "kube-apiserver, etcd, kube-controller-manager, kube-scheduler"
Lanes = list[list[Stage]]


def sample_release() -> str:
    """The release of the minimal sample, the one ``make run`` serves (no YAML parser here)."""
    match = re.search(r"^\s*openStackRelease:\s*[\"']?([\w.]+)", SAMPLE.read_text(), re.MULTILINE)
    if match is None:
        raise SystemExit(f"no spec.openStackRelease in {SAMPLE}")
    return match.group(1)


def all_releases() -> list[str]:
    lines = (line.split() for line in RELEASES.read_text().splitlines())
    return [words[0] for words in lines if words and not words[0].startswith("#")]


def apt() -> Stage:
    return Stage(
        "apt",
        "Debian packages (MariaDB, RabbitMQ, memcached, ovsdb-server, python3.11-dev, ...)",
        ("bash", "tools/realnova/install.sh"),
    )


def project_venv() -> Stage:
    return Stage(
        "venv", ".venv (the project with its test and dev extras)", ("make", "--no-print-directory", "venv")
    )


def nova_venvs(releases: list[str] | None) -> Stage:
    """One release's nova venv, or (``None``) every supported release's."""
    names = releases or all_releases()
    title = f"nova venv{'s' if len(names) > 1 else ''} {', '.join(names)}"
    return Stage("nova-venvs", title, ("bash", "tools/catalogs/ensure_venvs.sh", *(releases or ())))


def service_venvs() -> Stage:
    return Stage("service-venvs", "Keystone, Placement and Glance venvs", ("bash", "tools/realnova/venvs.sh"))


def nova_images(releases: list[str] | None) -> Stage:
    names = releases or all_releases()
    title = f"nova image tree{'s' if len(names) > 1 else ''} {', '.join(names)}"
    return Stage("images", title, (IMAGE_PYTHON, "tools/realnova/images.py", *(releases or ())))


def nova_oci_image(release: str | None) -> Stage:
    """The release's nova image for real nodes (``tools/realnode/nova_image.py``, from its image tree),
    or (``None``) every supported release's: cold, mmdebstrap's Debian base takes minutes once per
    machine; warm, a few seconds."""
    names = [release] if release else all_releases()
    return Stage(
        "nova-oci-image",
        f"nova OCI image{'s' if len(names) > 1 else ''} {', '.join(names)} (real nodes)",
        (".venv/bin/python", "-m", "realnode.nova_image", *([release] if release else [])),
        env={"PYTHONPATH": "tools"},
    )


def control_plane(*, kwok: bool) -> Stage:
    """Prints the binaries' directory (``ENVTEST_BIN``)."""
    if kwok:
        return Stage(
            "control-plane", f"{CONTROL_PLANE}, kwok", ("bash", "tools/envtest/build.sh"), output=True
        )
    return Stage(
        "control-plane",
        CONTROL_PLANE,
        ("bash", "tools/envtest/build.sh"),
        env={"ENVTEST_NO_KWOK": "1"},
        output=True,
    )


def realnode_binaries() -> Stage:
    # its static pause binary links libc6-dev's libc.a (the apt stage)
    return Stage(
        "realnode",
        "kubelet, kube-proxy, pause, CoreDNS (real nodes)",
        ("bash", "tools/realnode/build.sh"),
        needs=("apt",),
    )


def operator_image() -> Stage:
    """The operator's image from the Dockerfile (``tools/opimage``: buildah and mmdebstrap, from the
    apt stage). Prints its reference and archive as JSON. Cold: the Debian base about 9 min once per
    machine, the dependencies 4 min; warm (an unchanged tree) about 11 s."""
    return Stage(
        "operator-image",
        "operator image (buildah, from the Dockerfile)",
        ("python3", "-m", "opimage"),
        env={"PYTHONPATH": "tools"},
        needs=("apt",),
        output=True,
    )


def deploytools() -> Stage:
    """helm, kustomize and kubectl; prints their directory (``DEPLOYTOOLS_BIN``) last."""
    return Stage(
        "deploytools", "helm, kustomize, kubectl", ("bash", "tools/deploytools/build.sh"), output=True
    )


def run_plan(*, standins: bool, kubeconfig: bool, make_venv: bool, chart: bool = True) -> Lanes:
    """``make run``: against ``$KUBECONFIG`` only the project's venv; with the stand-ins the control
    plane and kwok; else the real Nova on real nodes: the Debian packages, every supported release's
    venvs, image trees and nova OCI image (each one is in every node: an upgrade of the sample finds
    its image), the service venvs, the control plane without kwok and the real nodes' binaries;
    ``chart`` (unless ``LOCAL_OPERATOR=1``): helm (Go lane) and the operator's image, in a lane of its
    own once the Debian packages are in (its cold build is downloads and pip more than CPU)."""
    venv = [project_venv()] if make_venv else []
    if kubeconfig:
        return [venv]
    if standins:
        return [venv, [control_plane(kwok=True)]]
    # apt first: a Debian python3 needs python3.11-venv for .venv too.
    python = [apt(), *venv, nova_venvs(None), service_venvs(), nova_images(None), nova_oci_image(None)]
    go = [control_plane(kwok=False), realnode_binaries()]
    if chart:
        return [python, [*go, deploytools()], [operator_image()]]
    return [python, go]


def ci_plan() -> Lanes:
    """``.ci/run``, before ``make test``: what the tiers ``make test`` runs first need, every release.
    The real tier (with the real nodes' tier) runs first on real nodes: every release's nova image
    (an upgrade finds its image on the nodes), the control plane without kwok, the nodes' binaries,
    helm, kustomize and kubectl (the operator is installed by its chart) and the operator's image, the
    latter in a lane of its own once the Debian packages are in (its cold build is downloads and pip
    more than CPU). What only later tiers use is ``ci_later_plan``'s."""
    python = [
        apt(),
        project_venv(),
        nova_venvs(None),
        service_venvs(),
        nova_images(None),
        nova_oci_image(None),
    ]
    go = [control_plane(kwok=False), realnode_binaries(), deploytools()]
    return [python, go, [operator_image()]]


def ci_later_plan() -> Lanes:
    """``.ci/run``, beside ``make test`` (at the lowest CPU priority): what only the tiers after the
    real ones use, kwok (the simulated cluster of the e2e tier) and prometheus and promtool (the
    monitoring tests of the integration and e2e tiers). The real tier is mostly waiting on nova (about
    60 % of two cores idle), so they build in its idle time instead of before it; a test that needs
    one before it is built waits for it through its build script's lock (``find_binaries(kwok=True)``,
    ``platform.prometheus.bindir``)."""
    return [
        [
            Stage("kwok", "kwok", ("bash", "tools/envtest/build.sh")),
            Stage("prometheus", "prometheus, promtool", ("bash", "tools/prometheus/build.sh")),
        ]
    ]
