"""``docs/image-contract.md``, generated from :mod:`nova_operator.image_contract`."""

from __future__ import annotations

from nova_operator import image_contract as ic


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _requirement(package: ic.PythonPackage) -> str:
    return f"`{package.requirement}`" if package.requirement else "the release's own"


def render() -> str:
    lines = [
        "# The image contract",
        "",
        "<!-- generated from nova_operator/image_contract.py by",
        "     nova_operator/install/image_contract_page.py; edit the module, then",
        "     `python -m nova_operator.install.docs write docs` -->",
        "",
        "What the pods the operator renders expect of the nova image (`spec.image`; the pools' image",
        "too). An image that lacks one of these runs pods that crash, never turn Ready or fail their",
        "Jobs. The same table is machine-readable: `python nova_operator/image_contract.py json`",
        "prints it (the simulated cluster builds its image from it, `tools/catalogs/ensure_venvs.sh`",
        "installs its Python packages), and the renderers take their paths from it.",
        "",
        "## User",
        "",
        f"Every container that is not privileged runs as uid **{ic.UID}**, gid **{ic.GID}**, with a",
        "read-only root filesystem, no capabilities and `no_new_privs`; the pods' `fsGroup` is",
        f"{ic.GID}. Everything below must be readable (programs: executable) by that user, the",
        "Python interpreter and its standard library included. Writable paths are mounts, never the",
        "image: `/tmp`, `/var/lib/nova` (emptyDir), and the configuration under `/etc/nova` (ConfigMaps).",
        "",
        "Nor can Python write byte code there: each module's `.pyc` in the image must be valid for the",
        "file as the image holds it, or every nova process compiles each module it imports again at",
        "every start (seconds of CPU per process). A build that sets every file's time to one value (a",
        "reproducible layer) makes pip's timestamp-checked `.pyc` files stale: compile the venv again",
        "with `python -m compileall --invalidation-mode checked-hash`, as the real tier's images do.",
        "",
        "## Paths",
        "",
        "| path | kind | used by | why |",
        "| --- | --- | --- | --- |",
        *(f"| `{p.path}` | {p.kind} | {p.used_by} | {_cell(p.why)} |" for p in ic.PATHS),
        "",
        "## Programs",
        "",
        "A name without a slash is looked up on `PATH`; an absolute name must be at that path.",
        "",
        "| program | used by | why |",
        "| --- | --- | --- |",
        *(f"| `{b.name}` | {b.used_by} | {_cell(b.why)} |" for b in ic.BINARIES),
        "",
        "## Python packages",
        "",
        "Installed in the image's Python environment, the one `uwsgi` and the `nova-*` programs run:",
        "",
        "| package | pip requirement | why |",
        "| --- | --- | --- |",
        *(f"| `{p.name}` | {_requirement(p)} | {_cell(p.why)} |" for p in ic.PYTHON_PACKAGES),
        "",
        "## `nova-amqp-ready`",
        "",
        "The readiness probe of the scheduler and the conductor (period 5 s, timeout 5 s, failure",
        f"threshold 1) runs `{ic.NOVA_AMQP_READY}` with no argument; the broker port is in the",
        "environment as `NOVA_AMQP_PORT`. It must exit 0 when a process of the container (the processes",
        "it can see in its PID namespace) holds an ESTABLISHED TCP socket to that port, IPv4 or IPv6,",
        "and non-zero otherwise. The operator ships a reference implementation,",
        "`nova_operator/data/nova-amqp-ready` (Python, standard library only; it reads `/proc/net/tcp`,",
        "`/proc/net/tcp6` and `/proc/<pid>/fd`): install it at that path, executable by the user above.",
        "",
    ]
    return "\n".join(lines)
