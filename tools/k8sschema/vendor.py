"""Vendor Kubernetes types the CRDs embed as structural OpenAPI schemas (``nova_operator/data/``).

The source is the upstream OpenAPI of one pinned Kubernetes release, as the kubernetes-validate
package (a test dependency) ships it; the result is committed so ``make manifests`` and the
operator need nothing beyond their runtime dependencies. ``$ref`` is inlined, ``[T, "null"]``
becomes ``T``, and each description is cut to its first sentence (the CRD stays small enough
for a client-side ``kubectl apply``; ``kubectl explain pod.spec.affinity`` has the full text).

    python tools/k8sschema/vendor.py           # rewrite the vendored file
    python tools/k8sschema/vendor.py --check   # exit 1 when it differs from the upstream schema
"""

from __future__ import annotations

import json
import pathlib
import re
import sys
from typing import Any

import kubernetes_validate

KUBERNETES = "1.37.0"  # the release the envtest control plane is built from (tools/envtest/go.mod)
TYPES = {"affinity": "io.k8s.api.core.v1.Affinity"}
OUT = pathlib.Path(__file__).resolve().parents[2] / "nova_operator" / "data" / "k8s-types.json"
_KEEP = (
    "required",
    "format",
    "enum",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
)


def _definitions() -> dict[str, Any]:
    root = pathlib.Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    doc: dict[str, Any] = json.loads((root / f"v{KUBERNETES}-local" / "_definitions.json").read_text())
    return dict(doc["$defs"])


def first_sentence(text: str) -> str:
    """The first sentence (or two, when the first is a bare "Required.")."""
    text = " ".join(text.split())
    # a sentence ends before a capital letter: "(e.g. co-locate ...)" goes on
    ends = [m.end(1) for m in re.finditer(r"([.!?])(?=\s+[A-Z`])", text)] + [len(text)]
    cut = next(end for end in ends if len(text[:end]) > 20)
    return text[:cut]


def structural(node: dict[str, Any], defs: dict[str, Any], *, described: bool = True) -> dict[str, Any]:
    """One upstream JSON schema node as a structural OpenAPI v3 schema.

    Only properties keep a description (what `kubectl explain` prints); the description of a
    list's items or of a type itself would repeat the property's and only make the CRD bigger.
    """
    description = node.get("description")
    if "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[-1]]
        description = description or node.get("description")
    out: dict[str, Any] = {}
    types = node.get("type")
    types = [t for t in types if t != "null"] if isinstance(types, list) else [types]
    if types == [None] or len(types) != 1:
        raise ValueError(f"no single type in {node!r}")
    out["type"] = types[0]
    if description and described:
        out["description"] = first_sentence(description)
    if "properties" in node:
        out["properties"] = {k: structural(v, defs) for k, v in sorted(node["properties"].items())}
    if "items" in node:
        out["items"] = structural(node["items"], defs, described=False)
    if isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = structural(node["additionalProperties"], defs, described=False)
    for key in _KEEP:
        if key in node:
            out[key] = node[key]
    return out


def render() -> str:
    defs = _definitions()
    types = {
        name: structural({"$ref": f"#/$defs/{ref}"}, defs, described=False) for name, ref in TYPES.items()
    }
    doc = {"kubernetes": KUBERNETES, "types": types}
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if OUT.read_text() != text:
            print(f"{OUT} is stale: run python tools/k8sschema/vendor.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
