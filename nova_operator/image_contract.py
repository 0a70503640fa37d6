"""The image contract: what the operator's pods need from the nova image they run.

One table for three readers: the renderers take their paths and the user from it, the page
``docs/image-contract.md`` is generated from it (``nova_operator.install.image_contract_page``),
and whoever builds an image (an image pipeline, the real tier's nova images of
``tools/realnode/nova_image.py``, the catalog venvs of ``tools/catalogs/ensure_venvs.sh``) reads it
as JSON:

    python nova_operator/image_contract.py json            # the whole contract
    python nova_operator/image_contract.py pip-requirements  # the Python packages besides nova

Standard library only, and runnable as a file, so a build script needs no installed operator.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "AMQP_READY_SOURCE",
    "API_PASTE",
    "BINARIES",
    "GID",
    "NOVA_AMQP_READY",
    "NOVNC_WEB",
    "PATHS",
    "PYTHON_PACKAGES",
    "SHELL",
    "UID",
    "Binary",
    "ImagePath",
    "PythonPackage",
    "contract",
]

#: The user and group every non-privileged container runs as (and the pods' fsGroup).
UID: Final = 42424
GID: Final = 42424

#: The prefix the image's OpenStack virtualenv lives under; its ``bin`` comes first on PATH.
OPENSTACK_PREFIX: Final = "/var/lib/openstack"
API_PASTE: Final = f"{OPENSTACK_PREFIX}/etc/nova/api-paste.ini"
NOVNC_WEB: Final = "/usr/share/novnc"
NOVA_AMQP_READY: Final = f"{OPENSTACK_PREFIX}/bin/nova-amqp-ready"
SHELL: Final = "/bin/sh"

#: The reference implementation of ``nova-amqp-ready`` the operator ships (package data).
AMQP_READY_SOURCE: Final = Path(__file__).resolve().parent / "data" / "nova-amqp-ready"


@dataclass(frozen=True, slots=True)
class ImagePath:
    path: str
    kind: str  # "file" or "directory"
    used_by: str
    why: str


@dataclass(frozen=True, slots=True)
class Binary:
    name: str  # absolute when the pods call it by path, else looked up on PATH
    used_by: str
    why: str


@dataclass(frozen=True, slots=True)
class PythonPackage:
    name: str
    requirement: str  # what pip installs; "" = the release's own (tools/catalogs/releases.txt)
    why: str


PATHS: Final = (
    ImagePath(
        API_PASTE,
        "file",
        "api, metadata",
        "nova's paste pipeline; the first file of OS_NOVA_CONFIG_FILES (nova's own etc/nova/api-paste.ini)",
    ),
    ImagePath(
        NOVNC_WEB,
        "directory",
        "novncproxy",
        "noVNC's web client ([DEFAULT] web); must hold vnc_lite.html, the readiness probe's page",
    ),
    ImagePath(
        f"{OPENSTACK_PREFIX}/bin",
        "directory",
        "every container",
        "the virtualenv's programs, first on PATH (nova-*, uwsgi, python3)",
    ),
)

BINARIES: Final = (
    Binary("uwsgi", "api, metadata", "serves nova.wsgi.osapi_compute / nova.wsgi.metadata (uWSGI 2.0)"),
    Binary("nova-scheduler", "scheduler", "the scheduler service"),
    Binary("nova-conductor", "conductor", "the conductor service"),
    Binary("nova-novncproxy", "novncproxy", "the console proxy"),
    Binary("nova-compute", "NovaCompute pools", "the compute service"),
    Binary("nova-manage", "db-sync, db-expand, db-contract, db-archive, discover-hosts", "schema and cells"),
    Binary("nova-status", "db-expand", "`nova-status upgrade check` before an upgrade"),
    Binary(
        NOVA_AMQP_READY,
        "scheduler, conductor (readiness probe)",
        "exit 0 when a process of the container (its PID namespace) holds an ESTABLISHED TCP socket to "
        "port $NOVA_AMQP_PORT, else exit 1; the operator ships a reference implementation "
        "(nova_operator/data/nova-amqp-ready)",
    ),
    Binary(SHELL, "the Jobs and the CronJob", "a POSIX shell runs their scripts (`/bin/sh -eu -c`)"),
    Binary("date", "db-archive", "GNU date: `date -u -d '-N days'` and `date +%s`"),
    Binary("awk", "db-sync", "reads `nova-manage cell_v2 list_cells`"),
    Binary("sleep", "every Deployment (preStop), db-archive", "the preStop pause and the archive loop"),
    Binary("mkdir", "NovaCompute pools (create-instances-dir)", "`mkdir -p -m 0755 /var/lib/nova/instances`"),
    Binary(
        "python3",
        "NovaCompute pools (wait-for-chassis)",
        "runs the OVSDB JSON-RPC check (standard library only); readable and executable by uid 42424",
    ),
)

PYTHON_PACKAGES: Final = (
    PythonPackage("nova", "", "the release's nova, with its own dependencies"),
    PythonPackage("uWSGI", "uWSGI==2.0.31", "the API and metadata server; options rendered for uWSGI 2.0"),
    PythonPackage("PyMySQL", "PyMySQL", "the `mysql+pymysql://` database URLs (nova does not require it)"),
    PythonPackage("pymemcache", "pymemcache", "oslo.cache's `dogpile.cache.pymemcache` backend"),
    PythonPackage(
        "python-memcached", "python-memcached", "keystonemiddleware's token cache (memcache_servers)"
    ),
    PythonPackage(
        "python-binary-memcached",
        "python-binary-memcached",
        "keystonemiddleware's token cache over TLS (spec.cache.tls: memcache_tls_enabled)",
    ),
)


def contract() -> dict[str, object]:
    """The whole contract as plain data (what ``json`` prints)."""
    return {
        "uid": UID,
        "gid": GID,
        "paths": [asdict(p) for p in PATHS],
        "binaries": [asdict(b) for b in BINARIES],
        "python_packages": [asdict(p) for p in PYTHON_PACKAGES],
        "nova_amqp_ready_source": "nova_operator/data/nova-amqp-ready",
    }


def pip_requirements() -> list[str]:
    """The pip requirements an image installs beside its release's nova."""
    return [p.requirement for p in PYTHON_PACKAGES if p.requirement]


def main(argv: list[str]) -> int:
    if argv == ["json"]:
        print(json.dumps(contract(), indent=1))
        return 0
    if argv == ["pip-requirements"]:
        print("\n".join(pip_requirements()))
        return 0
    print("usage: image_contract.py json|pip-requirements", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
