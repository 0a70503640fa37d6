"""``make bench-real``: the minimal sample's bring-up on the real-Nova tier, measured (not a test).

The minimal Nova and the sample pool are applied together, as a user applies the samples. Seconds
from that create to each stage (the Nova's MariaDB objects Ready, db-sync done, each Deployment
available, the Nova Ready; each change of the pool's conditions, the pool Ready), the issue's two
figures (the Nova Ready after its create, the pool Ready after the Nova's), and the RSS of every pod
(the kubelets' summary: the sum over its containers) against its memory limit. The cluster is the
real-Nova tier's (real nodes, ``simcluster.realtier.all_real``) with the sample's release; the
operator runs as a local process in the nodes' network (``RealTier.in_cluster``), with its log a
line per pass. Prints a table and writes JSON.
"""

from __future__ import annotations

import json
import pathlib
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

import yaml
from simcluster.client.kube import KubeError
from simcluster.platform.controlplane import REPO, free_port
from simcluster.platform.operator import operator_argv
from simcluster.realtier.all_real import launch_all_real
from simcluster.realtier.tier import FAKE_COMPUTE_DRIVER

from bench import hogs

SAMPLES = REPO / "config" / "samples"
NS, NOVA, POOL = "openstack", "nova", "rack7"
GROUP = "/apis/nova.openstack.c5c3.io/v1alpha1"
POOL_LABELS = {"example.org/compute-pool": POOL, "topology.kubernetes.io/zone": "az1"}
ROLES = ("", "-metadata", "-scheduler", "-conductor", "-novncproxy")
NOVA_CONDITIONS = (
    "DatabaseReady",
    "DeploymentReady",
    "NovaAPIReady",
    "HTTPRouteReady",
    "ConsoleHTTPRouteReady",
)
"""The Nova's conditions whose every reason on the way up is a stage (the last waits before Ready)."""


def _ready(obj: dict[str, Any] | None, ctype: str = "Ready") -> bool:
    conds = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == ctype and c["status"] == "True" for c in conds)


def pod_rss(kube: Any) -> dict[str, float]:
    """Pod uid -> MiB: the RSS of its containers, by the kubelets' summary (``stats/summary`` of each
    node, through the API server)."""
    totals: dict[str, float] = {}
    for node in kube.get("/api/v1/nodes")["items"]:
        summary = kube.get(f"/api/v1/nodes/{node['metadata']['name']}/proxy/stats/summary")
        for pod in summary.get("pods") or []:
            rss = sum(((c.get("memory") or {}).get("rssBytes") or 0) for c in pod.get("containers") or [])
            totals[pod["podRef"]["uid"]] = rss / 2**20
    return totals


def memory_limit(pod: dict[str, Any]) -> str:
    """The pod's containers' memory limits (``+``-joined), or ``none``."""
    limits = [
        str(((c.get("resources") or {}).get("limits") or {}).get("memory") or "none")
        for c in pod["spec"]["containers"]
    ]
    return "+".join(limits)


def run(out: pathlib.Path, timeout: float = 600.0, hog_count: int = 0) -> dict[str, Any]:
    t_launch = time.monotonic()
    release = str(yaml.safe_load((SAMPLES / "nova_minimal.yaml").read_text())["spec"]["openStackRelease"])
    handle = launch_all_real(
        None, releases=(release,), node_labels=dict.fromkeys(("compute-0", "compute-1"), POOL_LABELS)
    )
    figures: dict[str, Any] = {"cluster start (s)": round(time.monotonic() - t_launch, 1)}
    assert handle.real is not None
    figures["cluster start parts (s)"] = {k: round(v, 1) for k, v in handle.real.startup.items()}
    try:
        kube = handle.cluster.kube
        handle.install()
        handle.create_gateway(NS, "public-gateway")
        password = next(
            d["stringData"]["password"]
            for d in yaml.safe_load_all((SAMPLES / "secrets.yaml").read_text())
            if d["metadata"]["name"] == "nova-service-user"
        )
        handle.real.openstack.add_service_user("nova", password)
        pool = yaml.safe_load((SAMPLES / "novacompute.yaml").read_text())
        pool["spec"].setdefault("extraConfig", {}).setdefault("DEFAULT", {})["compute_driver"] = (
            FAKE_COMPUTE_DRIVER
        )
        pool_file = handle.workdir / "novacompute.yaml"
        pool_file.write_text(yaml.safe_dump(pool, sort_keys=False))
        t_dependencies = time.monotonic()
        handle.apply(
            SAMPLES / "secrets.yaml",
            REPO / "tools" / "simcluster" / "samples" / "dependencies.yaml",
            namespace=NS,
        )
        # debug: a line per pass ("reconciled", its result and seconds) in <workdir>/operator.log
        argv = operator_argv(handle, free_port(), "--log-level", "debug")
        figures["operator log"] = str(handle.workdir / "operator.log")
        t_operator = time.monotonic()
        handle.spawn("operator", handle.real.in_cluster(argv))
        # The create is measured against a running operator, as a user applies the samples to a
        # cluster where it is installed: its own start (imports, the Lease, the caches) is apart.
        _wait_for_controllers(handle.workdir / "operator.log", t_operator + timeout)
        figures["operator start (s)"] = round(time.monotonic() - t_operator, 1)
        # The Nova is created where its MariaDB and RabbitMQ serve, as a user installs them first:
        # their own start (the broker's user is four rabbitmqctl runs of the stand-in) is apart too.
        _wait_for_dependencies(kube, t_dependencies + timeout)
        figures["dependencies Ready (s)"] = round(time.monotonic() - t_dependencies, 1)
        figures["hogs"] = hog_count
        with hogs.running(hog_count):
            figures["load average at the create"] = round(hogs.load_average(), 1)
            t0 = time.monotonic()
            # Both at once, as a user applies the samples (and as make run does): the pool waits for
            # its Nova, and what it does meanwhile overlaps the Nova's bring-up.
            handle.apply(SAMPLES / "nova_minimal.yaml", pool_file, namespace=NS)
            stages, loads, messages = _watch(kube, handle.real.reach_ip, t0, t0 + timeout)
            figures["load average, mean over the bring-up"] = round(sum(loads) / len(loads), 1)
        figures["Nova Ready after its create (s)"] = stages["Nova Ready"]
        figures["pool Ready after the Nova's Ready (s)"] = round(
            stages["pool Ready"] - stages["Nova Ready"], 1
        )
        figures["stages, s after the create"] = stages
        figures["error messages, by stage"] = messages
        time.sleep(10)  # settle: RSS of the idle pods
        by_uid = pod_rss(kube)
        pod_list = kube.get(f"/api/v1/namespaces/{NS}/pods")["items"]
        running = [p for p in pod_list if p["status"].get("phase") == "Running"]
        figures["pod RSS (MiB)"] = {
            p["metadata"]["name"]: round(by_uid.get(p["metadata"]["uid"], 0.0), 1) for p in running
        }
        figures["pod memory limit"] = {p["metadata"]["name"]: memory_limit(p) for p in running}
        figures["pod RSS total (MiB)"] = round(sum(figures["pod RSS (MiB)"].values()), 1)
        figures["container restarts, by pod"] = restarts(pod_list)
        where = out.with_name(out.stem + "-logs")
        figures["pod logs"] = str(keep_logs(handle.real.container_log, pod_list, where))
    finally:
        handle.stop()
    out.write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def restarts(pods: list[dict[str, Any]]) -> dict[str, int]:
    """The pods whose containers restarted during the bring-up (a probe's kill shows here), by name."""
    found: dict[str, int] = {}
    for pod in pods:
        count = sum(
            int(c.get("restartCount", 0)) for c in (pod.get("status") or {}).get("containerStatuses") or []
        )
        if count:
            found[pod["metadata"]["name"]] = count
    return found


def keep_logs(
    read: Callable[[dict[str, Any], str], str], pods: list[dict[str, Any]], where: pathlib.Path
) -> pathlib.Path:
    """Every container's log of the namespace's pods, one file each in ``where`` (emptied first): what
    a stage's error message names (a timed-out compute call, say) is then read in the processes' own
    words after the cluster is gone. ``read`` is ``RealTier.container_log`` (the kubelet's, through
    the API server)."""
    where.mkdir(parents=True, exist_ok=True)
    for old in where.glob("*.log"):
        old.unlink()
    for pod in pods:
        for container in (pod.get("spec") or {}).get("containers") or []:
            try:
                text = read(pod, container["name"])
            except (KubeError, OSError) as exc:
                text = f"(no log: {exc})\n"
            (where / f"{pod['metadata']['name']}_{container['name']}.log").write_text(text)
    return where


def error_messages(snap: Snapshot) -> dict[str, str]:
    """The message of each error a look shows (a condition False with a reason ending ``Error``),
    by its stage's name: the stage says an error held the bring-up, the message says which."""
    found: dict[str, str] = {}
    for who, obj in (("Nova", snap.nova), ("pool", snap.pool)):
        for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
            if cond.get("status") == "False" and str(cond.get("reason", "")).endswith("Error"):
                found[f"{who} {cond['type']} False {cond['reason']}"] = str(cond.get("message", ""))
    return found


def seen(snap: Snapshot) -> list[str]:
    """The stages one snapshot of the namespace shows (each is kept at the first time it is seen)."""
    found: list[str] = []
    dbs = snap.databases
    if len(dbs) >= 3 and all(_ready(d) for d in dbs):
        found.append("MariaDB objects Ready")
    job = snap.jobs.get(f"{NOVA}-db-sync")
    if job is not None:
        found.append("db-sync Job created")
        if _ready(job, "Complete"):
            found.append("db-sync Job complete")
    if _ready(snap.nova, "DatabaseReady"):
        found.append("db-sync done")
    discovery = snap.jobs.get(f"{NOVA}-discover-hosts")  # the pool's, on the Nova's side
    if discovery is not None:
        # each Job of that name by its creation (one replaces another 30 s after it ended, §15)
        made = discovery["metadata"].get("creationTimestamp", "")
        found.append(f"discover-hosts Job created {made}")
        for state in ("Complete", "Failed"):
            if _ready(discovery, state):
                found.append(f"discover-hosts Job created {made}: {state.lower()}")
    for pod in snap.pods:
        owner = _pod_owner(pod)
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        if statuses and all("running" in (c.get("state") or {}) for c in statuses):
            found.append(f"{owner} pod running")
        if _ready(pod):
            found.append(f"{owner} pod Ready")
    for name in snap.answered:
        found.append(f"{name} pod answers HTTP")
    for role in ROLES:
        dep = snap.deployments.get(f"{NOVA}{role}")
        if dep is None:
            continue
        found.append(f"Deployment {NOVA}{role} created")
        if (dep.get("status") or {}).get("availableReplicas", 0) >= dep["spec"]["replicas"]:
            found.append(f"Deployment {NOVA}{role} available")
    for cond in ((snap.nova or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] in NOVA_CONDITIONS:
            found.append(f"Nova {cond['type']} {cond['status']} {cond['reason']}")
    if _ready(snap.nova):
        found.append("Nova Ready")
    for cond in ((snap.pool or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] in ("NovaReady", "DaemonSetReady", "ServicesReady", "AggregatesReady"):
            found.append(f"pool {cond['type']} {cond['status']} {cond['reason']}")
    if _ready(snap.pool):
        found.append("pool Ready")
    return found


@dataclass
class Snapshot:
    """What the bench reads of the namespace in one look."""

    nova: dict[str, Any] | None
    pool: dict[str, Any] | None
    databases: list[dict[str, Any]] = field(default_factory=list)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    deployments: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: list[dict[str, Any]] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)


def _pod_owner(pod: dict[str, Any]) -> str:
    """The Job or Deployment a pod belongs to (a Deployment's pod: its name less two suffixes)."""
    labels = pod["metadata"].get("labels") or {}
    job = labels.get("batch.kubernetes.io/job-name") or labels.get("job-name")
    if job:
        return str(job)
    kinds = {ref.get("kind") for ref in pod["metadata"].get("ownerReferences") or []}
    if "DaemonSet" in kinds:
        return str(pod["metadata"]["name"].rsplit("-", 1)[0])
    return str(pod["metadata"]["name"].rsplit("-", 2)[0])


Reach = Callable[[str, int], tuple[str, int]]
"""Where the host reaches an address and port of the cluster's pod network (``RealTier.reach_ip``)."""


def _answers(pod: dict[str, Any], reach: Reach) -> bool:
    """Whether the pod's first HTTP probe target answers at all (any status): the process serves."""
    ip = (pod.get("status") or {}).get("podIP")
    container = pod["spec"]["containers"][0]
    probe = container.get("readinessProbe") or {}
    get = probe.get("httpGet")
    if not ip or not get:
        return False
    port = get["port"]
    if isinstance(port, str):
        port = next(p["containerPort"] for p in container.get("ports") or [] if p.get("name") == port)
    host, at = reach(ip, int(port))
    try:
        with urllib.request.urlopen(f"http://{host}:{at}{get.get('path', '/')}", timeout=2.0):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


PATHS: Final = {
    "nova": f"{GROUP}/namespaces/{NS}/novas/{NOVA}",
    "pool": f"{GROUP}/namespaces/{NS}/novacomputes/{POOL}",
    "databases": f"/apis/k8s.mariadb.com/v1alpha1/namespaces/{NS}/databases",
    "jobs": f"/apis/batch/v1/namespaces/{NS}/jobs",
    "deployments": f"/apis/apps/v1/namespaces/{NS}/deployments",
    "pods": f"/api/v1/namespaces/{NS}/pods",
}


def _snapshot(kube: Any, reach: Reach, answered: set[str], pool: ThreadPoolExecutor) -> Snapshot:
    """One look, its reads side by side (on a loaded machine one after another took seconds, and a
    stage was seen that much late)."""
    got = dict(zip(PATHS, pool.map(lambda path: _get(kube, path), PATHS.values()), strict=True))

    def items(key: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = (got[key] or {}).get("items") or []
        return found

    snap = Snapshot(
        nova=got["nova"],
        pool=got["pool"],
        databases=items("databases"),
        jobs={j["metadata"]["name"]: j for j in items("jobs")},
        deployments={d["metadata"]["name"]: d for d in items("deployments")},
        pods=items("pods"),
    )
    asked = [p for p in snap.pods if _pod_owner(p) not in answered]
    for pod, answers in zip(asked, pool.map(lambda p: _answers(p, reach), asked), strict=True):
        if answers:
            answered.add(_pod_owner(pod))
    snap.answered = sorted(answered)
    return snap


DEPENDENCIES: Final = (
    (f"/apis/k8s.mariadb.com/v1alpha1/namespaces/{NS}/mariadbs/mariadb", "Ready"),
    (f"/apis/rabbitmq.com/v1beta1/namespaces/{NS}/rabbitmqclusters/rabbitmq", "ClusterAvailable"),
)
"""The sample's MariaDB and RabbitmqCluster, each with the condition that says it serves."""


def _wait_for_dependencies(kube: Any, deadline: float) -> None:
    while time.monotonic() < deadline:
        if all(_ready(_get(kube, path), ctype) for path, ctype in DEPENDENCIES):
            return
        time.sleep(0.5)
    raise SystemExit(f"the sample's dependencies are not Ready: {[p for p, _ in DEPENDENCIES]}")


def _wait_for_controllers(log: pathlib.Path, deadline: float) -> None:
    """Until the operator's log says its controllers started (it holds the Lease, its caches synced)."""
    while time.monotonic() < deadline:
        if log.exists() and '"starting controllers"' in log.read_text():
            return
        time.sleep(0.2)
    raise SystemExit(f"the operator did not start its controllers; see {log}")


def _watch(
    kube: Any, reach: Reach, t0: float, deadline: float
) -> tuple[dict[str, float], list[float], dict[str, str]]:
    """Seconds from ``t0`` to each stage, until the Nova and the pool are Ready; the load averages;
    the first message of each error stage (``error_messages``)."""
    stages: dict[str, float] = {}
    loads: list[float] = []
    messages: dict[str, str] = {}
    answered: set[str] = set()
    with ThreadPoolExecutor(8) as pool:
        while time.monotonic() < deadline:
            loads.append(hogs.load_average())
            looked = time.monotonic()  # a stage is dated when the look began (its reads went out then)
            snap = _snapshot(kube, reach, answered, pool)
            errors = error_messages(snap)
            for name in seen(snap):
                if name not in stages:
                    stages[name] = round(looked - t0, 1)
                    print(f"  {stages[name]:6.1f}s  {name}", flush=True)
                    if name in errors:
                        messages[name] = errors[name]
                        print(f"           {errors[name]}", flush=True)
            if "Nova Ready" in stages and "pool Ready" in stages:
                return stages, loads, messages
            time.sleep(max(0.0, looked + 0.5 - time.monotonic()))
    raise SystemExit(f"not Ready within {deadline - t0:.0f} s; stages so far: {stages}")


def _get(kube: Any, path: str) -> dict[str, Any] | None:
    try:
        obj: dict[str, Any] = kube.get(path)
        return obj
    except Exception:
        return None


def gaps(stages: dict[str, float]) -> list[tuple[str, float]]:
    """Where the time went: the seconds between two stages, for each pair both of which were seen."""
    pairs = [
        ("MariaDB objects Ready -> db-sync Job created", "MariaDB objects Ready", "db-sync Job created"),
        ("db-sync Job created -> its pod running", "db-sync Job created", f"{NOVA}-db-sync pod running"),
        ("db-sync pod running -> Job complete", f"{NOVA}-db-sync pod running", "db-sync Job complete"),
        ("db-sync Job complete -> DatabaseReady", "db-sync Job complete", "db-sync done"),
    ]
    for role in ROLES:
        name = f"{NOVA}{role}"
        pairs += [
            (f"{name}: created -> pod running", f"Deployment {name} created", f"{name} pod running"),
            (f"{name}: pod running -> answers HTTP", f"{name} pod running", f"{name} pod answers HTTP"),
            (f"{name}: answers HTTP -> pod Ready", f"{name} pod answers HTTP", f"{name} pod Ready"),
            (f"{name}: pod running -> pod Ready", f"{name} pod running", f"{name} pod Ready"),
            (f"{name}: pod Ready -> available", f"{name} pod Ready", f"Deployment {name} available"),
        ]
    last = max(
        (v for k, v in stages.items() if k.startswith("Deployment") and k.endswith("available")), default=None
    )
    found = [(label, round(stages[b] - stages[a], 1)) for label, a, b in pairs if a in stages and b in stages]
    if last is not None and "Nova Ready" in stages:
        found.append(("last Deployment available -> Nova Ready", round(stages["Nova Ready"] - last, 1)))
    return found


def report(figures: dict[str, Any]) -> str:
    lines = ["", "real-Nova bring-up (minimal sample)", f"  cluster start: {figures['cluster start (s)']} s"]
    for part, seconds in figures["cluster start parts (s)"].items():
        lines.append(f"    {part:<32} {seconds:6.1f} s")
    lines.append(f"  operator start (to its controllers running): {figures['operator start (s)']} s")
    lines.append(f"  MariaDB and RabbitMQ Ready after their apply: {figures['dependencies Ready (s)']} s")
    lines.append(
        f"  CPU hogs beside the bring-up: {figures['hogs']}; load average at the create "
        f"{figures['load average at the create']}, mean over the bring-up "
        f"{figures['load average, mean over the bring-up']}"
    )
    lines.append("  after the Nova's and the pool's create (applied together):")
    for stage, seconds in figures["stages, s after the create"].items():
        lines.append(f"    {stage:<56} {seconds:6.1f} s")
    lines.append("  where the time went:")
    for label, seconds in gaps(figures["stages, s after the create"]):
        lines.append(f"    {label:<56} {seconds:6.1f} s")
    lines.append(f"  Nova Ready after its create: {figures['Nova Ready after its create (s)']} s")
    lines.append(f"  (the operator's log, a line per pass: {figures['operator log']})")
    pool_after = figures["pool Ready after the Nova's Ready (s)"]
    lines.append(f"  pool Ready after the Nova's Ready: {pool_after} s")
    lines.append("  pod RSS (MiB), against its memory limit:")
    limits = figures.get("pod memory limit") or {}
    for pod, mib in sorted(figures["pod RSS (MiB)"].items()):
        lines.append(f"    {pod:<40} {mib:8.1f}   limit {limits.get(pod, '?')}")
    lines.append(f"    {'total':<40} {figures['pod RSS total (MiB)']:8.1f}")
    for stage, message in (figures.get("error messages, by stage") or {}).items():
        lines.append(f"  {stage}: {message}")
    restarted = figures.get("container restarts, by pod") or {}
    lines.append(f"  container restarts: {restarted or 'none'}")
    if "pod logs" in figures:
        lines.append(f"  every container's log: {figures['pod logs']}")
    return "\n".join(lines)
