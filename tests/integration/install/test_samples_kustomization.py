"""Issue 40: ``kubectl apply -k config/samples`` applies every sample, as the real kustomize renders it."""

from __future__ import annotations

import pathlib
from typing import Any

import yaml
from simcluster.platform.installtools import docs, run

SAMPLES = pathlib.Path(__file__).resolve().parents[3] / "config" / "samples"


def _ids(objects: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return sorted((o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objects)


def test_the_samples_kustomization_renders_every_sample_unchanged() -> None:
    files = sorted(p for p in SAMPLES.glob("*.yaml") if p.name != "kustomization.yaml")
    assert [p.name for p in files] == [
        "nova_full.yaml",
        "nova_minimal.yaml",
        "novacompute.yaml",
        "secrets.yaml",
    ]
    listed = yaml.safe_load((SAMPLES / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == [p.name for p in files], "a sample file is missing from kustomization.yaml"
    rendered = docs(run("kustomize", "build", str(SAMPLES)))
    samples = [d for p in files for d in yaml.safe_load_all(p.read_text()) if d]
    assert _ids(rendered) == _ids(samples)
    by_id = {(o["kind"], o["metadata"]["name"]): o for o in rendered}
    for sample in samples:  # kustomize adds nothing and drops nothing (no prefix, labels or namespace)
        assert by_id[(sample["kind"], sample["metadata"]["name"])] == sample
    assert {o["kind"] for o in rendered} == {"Secret", "Nova", "NovaCompute"}
