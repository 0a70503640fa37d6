"""``make manifests`` / ``make verify-manifests``: config/ generated from the code.

- ``config/crd/``: the CRDs, from the pydantic models (``models.crd.render_crds``);
- ``config/rbac/``: ServiceAccount, ClusterRole and binding, from the resource table
  the code calls the API through (``kube.resources.render_rbac``).

``verify`` prints a unified diff per stale, missing or extra file and exits 1.
"""

from __future__ import annotations

import difflib
import pathlib
import sys
from collections.abc import Callable, Mapping, Sequence

from nova_operator.install.kustomize import render_config
from nova_operator.kube.resources import render_rbac
from nova_operator.models.crd import render_crds


def _crd() -> dict[str, str]:
    return {**render_crds(), **render_config()["crd"]}


def _install(sub: str) -> Callable[[], dict[str, str]]:
    return lambda: render_config()[sub]


GENERATED: Mapping[str, Callable[[], dict[str, str]]] = {
    "crd": _crd,
    "rbac": render_rbac,
    **{sub: _install(sub) for sub in render_config() if sub != "crd"},
}


def _generated(config_dir: pathlib.Path) -> dict[pathlib.Path, str]:
    return {
        config_dir / sub / name: text for sub, render in GENERATED.items() for name, text in render().items()
    }


def write(config_dir: pathlib.Path) -> None:
    files = _generated(config_dir)
    for sub in GENERATED:
        (config_dir / sub).mkdir(parents=True, exist_ok=True)
        for stale in (config_dir / sub).glob("*.yaml"):
            if stale not in files:
                stale.unlink()
    for path, text in files.items():
        path.write_text(text)


def verify(config_dir: pathlib.Path) -> list[str]:
    files = _generated(config_dir)
    diffs: list[str] = []
    for sub in GENERATED:
        for extra in sorted(set((config_dir / sub).glob("*.yaml")) - files.keys()):
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
    if len(argv) != 2 or argv[0] not in ("write", "verify"):
        print("usage: python -m nova_operator.manifests {write|verify} <config-dir>", file=sys.stderr)
        return 2
    verb, config_dir = argv[0], pathlib.Path(argv[1])
    if verb == "write":
        write(config_dir)
        return 0
    diffs = verify(config_dir)
    sys.stdout.writelines(diffs)
    if diffs:
        print(f"{config_dir} is stale: run `make manifests`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
