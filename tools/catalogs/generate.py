"""Generate the extraConfig option catalogs and the policy-rule catalogs, per supported release.

    bash tools/catalogs/ensure_venvs.sh          # the nova venvs (cached outside the repo)
    python tools/catalogs/generate.py            # writes nova_operator/data/catalog-<release>.json
                                                 # and nova_operator/data/policy-<release>.json
    python tools/catalogs/generate.py --check    # exit 1 when a committed catalog is stale
    python tools/catalogs/generate.py --freeze   # pin the venvs: write constraints-<release>.txt

Each catalog is read from the real ``nova`` package of that release (see
``tools/catalogs/releases.txt``) by ``extract_opts.py`` (options) and ``extract_policies.py``
(the policy rules nova registers), run with the venv's own Python.
The catalogs are data: never edit them by hand, regenerate them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DATA = REPO / "nova_operator" / "data"
DEFAULT_CACHE = Path("/var/cache/nova-operator/nova-venvs")


def releases() -> list[tuple[str, str]]:
    """(release, nova version) pairs from releases.txt, in file order."""
    pairs: list[tuple[str, str]] = []
    for line in (HERE / "releases.txt").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            release, nova_version = line.split()
            pairs.append((release, nova_version))
    return pairs


def venv_cache() -> Path:
    return Path(os.environ.get("NOVA_VENV_CACHE", str(DEFAULT_CACHE)))


def venv_dir(release: str) -> Path:
    return venv_cache() / release


def ensure_venvs(only: list[str] | None = None) -> None:
    """Create the missing nova venvs (a no-op when they are cached)."""
    subprocess.run(["bash", str(HERE / "ensure_venvs.sh"), *(only or [])], check=True)


def render_catalog(release: str, nova_version: str) -> str:
    venv = venv_dir(release)
    dump = _extract(release, nova_version, "extract_opts.py", str(venv / "nova-config-generator.conf"))
    catalog = {
        "generator": "tools/catalogs/generate.py (do not edit by hand)",
        "release": release,
        "nova_version": nova_version,
        "namespaces": dump["namespaces"],
        "sections": dump["sections"],
    }
    return json.dumps(catalog, indent=1, sort_keys=True) + "\n"


def _extract(release: str, nova_version: str, script: str, *args: str) -> dict[str, Any]:
    """What ``script`` (run by the release's venv) prints as JSON, checked to be of ``nova_version``."""
    venv = venv_dir(release)
    out = subprocess.run(
        [str(venv / "bin" / "python"), str(HERE / script), *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    dump: dict[str, Any] = json.loads(out)
    if dump["nova_version"] != nova_version:
        raise SystemExit(f"{venv} holds nova {dump['nova_version']}, releases.txt wants {nova_version}")
    return dump


def render_policies(release: str, nova_version: str) -> str:
    dump = _extract(release, nova_version, "extract_policies.py")
    policies = {
        "generator": "tools/catalogs/generate.py (do not edit by hand)",
        "release": release,
        "nova_version": nova_version,
        "rules": dump["rules"],
    }
    return json.dumps(policies, indent=1, sort_keys=True) + "\n"


def freeze(release: str) -> None:
    """Pin every package of the release's venv (``pip freeze``) into constraints-<release>.txt."""
    frozen = subprocess.run(
        [str(venv_dir(release) / "bin" / "python"), "-m", "pip", "freeze", "--disable-pip-version-check"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    lines = sorted(line for line in frozen.splitlines() if line and not line.startswith("#"))
    path = HERE / f"constraints-{release}.txt"
    # the header says where the pins come from (a release's upper-constraints): keep it
    old = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    header = [line for line in old if line.startswith("#")] or [
        f"# pip freeze of the {release} nova venv the committed catalog was generated from "
        "(generate.py --freeze)"
    ]
    path.write_text("\n".join([*header, *lines]) + "\n", encoding="utf-8")
    print(f"wrote tools/catalogs/constraints-{release}.txt ({len(lines)} pins)", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="fail when a committed catalog differs")
    parser.add_argument(
        "--freeze", action="store_true", help="write constraints-<release>.txt from the current venvs"
    )
    parser.add_argument("release", nargs="*", help="only these releases (default: all)")
    args = parser.parse_args(argv)
    wanted = [r for r in releases() if not args.release or r[0] in args.release]
    ensure_venvs([r for r, _ in wanted])
    stale: list[str] = []
    if args.freeze:
        for release, _ in wanted:
            freeze(release)
        return 0
    for release, nova_version in wanted:
        for text, path in (
            (render_catalog(release, nova_version), DATA / f"catalog-{release}.json"),
            (render_policies(release, nova_version), DATA / f"policy-{release}.json"),
        ):
            if args.check:
                if not path.exists() or path.read_text(encoding="utf-8") != text:
                    stale.append(str(path.relative_to(REPO)))
                continue
            DATA.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(REPO)} (nova {nova_version})", file=sys.stderr)
    if stale:
        print("stale catalogs (run tools/catalogs/generate.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
