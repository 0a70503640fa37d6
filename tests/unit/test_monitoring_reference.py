"""docs/monitoring.md is generated and current, and its standard-names table is what /metrics serves."""

from __future__ import annotations

import pathlib
import re

from nova_operator.clock import FakeClock
from nova_operator.install import reference
from nova_operator.metrics import Metrics
from nova_operator.runtime.workqueue import WorkQueue

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "monitoring.md"


def test_the_committed_reference_is_current() -> None:
    assert DOC.read_text() == reference.render(), "run make manifests"
    assert reference.main(["verify", str(DOC)]) == 0


def test_verify_fails_on_a_stale_reference(tmp_path: pathlib.Path) -> None:
    stale = tmp_path / "monitoring.md"
    stale.write_text(reference.render().replace("counter", "gauge", 1))
    assert reference.main(["verify", str(stale)]) == 1
    assert reference.main(["write", str(stale)]) == 0
    assert reference.main(["verify", str(stale)]) == 0


def test_the_standard_names_table_matches_what_is_served() -> None:
    m = Metrics()
    m.register_controller("nova", 1)
    WorkQueue(name="nova", clock=FakeClock(), metrics=m)
    m.reconcile_time.labels("nova").observe(1)
    m.queue_latency.labels("nova").observe(1)
    m.queue_work.labels("nova").observe(1)
    m.leader.labels("lease").set(1)
    m.api_requests.labels("get", "pods", "200").inc()
    m.api_request_duration.labels("get", "pods").observe(1)
    text = m.render().decode()
    for name, kind, labels, _ in reference.STANDARD:
        assert f"# TYPE {name} {kind}" in text, name
        sample = name + ("_count" if kind == "histogram" else "")
        (line,) = [ln for ln in text.splitlines() if ln.startswith(sample + "{")][:1]
        served = set(re.findall(r'(\w+)="', line))
        assert served == {x.strip() for x in labels.split(",")}, (name, served)


def test_every_family_says_which_dashboards_read_it() -> None:
    assert set(reference.READ_BY) == {name for name, *_ in reference.STANDARD}
    rows = {
        line.split(" | ")[0].strip("| `"): line
        for line in DOC.read_text().splitlines()
        if line.startswith("| `")
    }
    assert rows["nova_operator_informer_watch_restarts_total"].endswith("| Watch restarts by reason |")
    assert "Queue latency and work duration (p99)" in rows["nova_operator_workqueue_queue_duration_seconds"]
    assert "controller-runtime" in rows["workqueue_depth"]
    assert "client-go" in rows["workqueue_depth"]
    # the kubebuilder resources dashboard's CPU and memory series are served
    served = {name for name, _, _ in reference._process_families()}
    assert {"process_cpu_seconds_total", "process_resident_memory_bytes"} <= served
    assert "controller-resources" in rows["process_resident_memory_bytes"]
