"""The generated pages of ``docs/``: ``python -m nova_operator.install.docs write|verify docs``.

``make manifests`` writes them, ``make verify-manifests`` fails when one is stale (or missing),
like the manifests: the CRD reference (``crd_reference``), the troubleshooting page
(``troubleshooting``, from the reason table), the image contract
(``image_contract_page``) and the picture of what a Nova creates (``architecture``).
``docs/monitoring.md`` has its own command (``nova_operator.install.reference``).
"""

from __future__ import annotations

import pathlib
import sys
from collections.abc import Sequence

from nova_operator.install import architecture, crd_reference, image_contract_page, troubleshooting


def pages() -> dict[str, str]:
    """Relative path under docs/ -> content."""
    return {
        **crd_reference.pages(),
        "troubleshooting.md": troubleshooting.render(),
        "image-contract.md": image_contract_page.render(),
        "architecture.svg": architecture.render(),
    }


def stale(docs: pathlib.Path) -> list[str]:
    return [
        name
        for name, text in pages().items()
        if not (docs / name).exists() or (docs / name).read_text() != text
    ]


def write(docs: pathlib.Path) -> None:
    for name, text in pages().items():
        path = docs / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("write", "verify"):
        print("usage: python -m nova_operator.install.docs write|verify docs", file=sys.stderr)
        return 2
    docs = pathlib.Path(argv[1])
    if argv[0] == "write":
        write(docs)
        return 0
    if names := stale(docs):
        print(f"stale in {docs}: {', '.join(names)}: run make manifests", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
