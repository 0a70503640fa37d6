"""``make manifests`` / ``make verify-manifests``: config/ generated from the code.

- ``config/crd/``: the CRDs, from the pydantic models (``models.crd.render_crds``);
- ``config/rbac/``: ServiceAccount, ClusterRole and binding, from the resource table
  the code calls the API through (``kube.resources.render_rbac``);
- the install layout, from ``nova_operator.install``: ``config/{manager,operator-rbac,
  namespaced-rbac,default,namespaced,prometheus,network-policy}/`` and, with a second
  directory, the Helm chart (``charts/nova-operator/``; every file in it is generated).

``verify`` prints a unified diff per stale, missing or extra file and exits 1.
"""

from __future__ import annotations

import difflib
import pathlib
import sys
from collections.abc import Sequence

from nova_operator.install.chart import render_chart
from nova_operator.install.kustomize import render_config
from nova_operator.kube.resources import render_rbac
from nova_operator.models.crd import render_crds


def _rendered() -> dict[str, dict[str, str]]:
    """Each config sub-directory's files (``render_config`` renders all of its own at once)."""
    install = render_config()
    return {
        "crd": {**render_crds(), **install["crd"]},
        "rbac": render_rbac(),
        **{sub: files for sub, files in install.items() if sub != "crd"},
    }


def _generated(
    config_dir: pathlib.Path, chart_dir: pathlib.Path | None
) -> tuple[dict[pathlib.Path, str], set[pathlib.Path]]:
    """The files the generators write, and those they own now (their config sub-directories' YAML,
    everything in the chart): the owned ones not written are stale."""
    rendered = _rendered()
    files = {config_dir / sub / name: text for sub, out in rendered.items() for name, text in out.items()}
    owned = {path for sub in rendered for path in (config_dir / sub).glob("*.yaml")}
    if chart_dir is not None:
        files.update({chart_dir / name: text for name, text in render_chart().items()})
        if chart_dir.is_dir():
            owned |= {path for path in chart_dir.rglob("*") if path.is_file()}
    return files, owned


def write(config_dir: pathlib.Path, chart_dir: pathlib.Path | None = None) -> None:
    files, owned = _generated(config_dir, chart_dir)
    for stale in owned - files.keys():
        stale.unlink()
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def verify(config_dir: pathlib.Path, chart_dir: pathlib.Path | None = None) -> list[str]:
    files, owned = _generated(config_dir, chart_dir)
    diffs: list[str] = []
    for extra in sorted(owned - files.keys()):
        diffs.append(f"{extra}: not generated from the code\n")
    for path, text in files.items():
        current = path.read_text() if path.exists() else ""
        if current != text:
            diffs.append(
                "".join(
                    difflib.unified_diff(
                        current.splitlines(keepends=True),
                        text.splitlines(keepends=True),
                        fromfile=str(path),
                        tofile=f"{path} (generated)",
                    )
                )
                or f"{path}: differs\n"
            )
    return diffs


def main(argv: Sequence[str]) -> int:
    if len(argv) not in (2, 3) or argv[0] not in ("write", "verify"):
        print(
            "usage: python -m nova_operator.install.manifests {write|verify} <config-dir> [<chart-dir>]",
            file=sys.stderr,
        )
        return 2
    verb, config_dir = argv[0], pathlib.Path(argv[1])
    chart_dir = pathlib.Path(argv[2]) if len(argv) == 3 else None
    if verb == "write":
        write(config_dir, chart_dir)
        return 0
    diffs = verify(config_dir, chart_dir)
    sys.stdout.writelines(diffs)
    if diffs:
        print(f"{config_dir} {chart_dir or ''} is stale: run `make manifests`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
