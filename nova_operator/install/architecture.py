"""``docs/architecture.svg``: what a Nova creates and how it connects, drawn from the code's list of
a Nova's children (``naming.CHILD_SUFFIXES``, names from ``naming`` and the pool renderer).

Pure Python, no graphics library: fixed boxes in three columns of panels, one box per child,
text measured by a fixed width per character. ``install.docs`` writes and verifies it with the
other generated pages, so a child added to ``CHILD_SUFFIXES`` shows up in the picture (a kind no
panel takes fails the generation instead of going missing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

from nova_operator import naming
from nova_operator.naming import Component
from nova_operator.renderers import compute_pool

NOVA = "{nova}"
POOL = "{pool}"

# Which panel shows which kind of a Nova's children (every kind of CHILD_SUFFIXES must be here).
PANEL_OF_KIND: Mapping[str, str] = {
    "Service": "traffic",
    "HTTPRoute": "traffic",
    "NetworkPolicy": "traffic",
    "PodDisruptionBudget": "traffic",
    "HorizontalPodAutoscaler": "traffic",
    "Deployment": "control",
    "ConfigMap": "config",
    "Secret": "config",
    "Job": "jobs",
    "CronJob": "jobs",
    "Database": "mariadb",
    "User": "mariadb",
    "Grant": "mariadb",
}

PANEL_TITLES: Mapping[str, str] = {
    "traffic": "Traffic and availability",
    "control": "Control plane: one Deployment per role",
    "config": "Configuration and credentials",
    "mariadb": "MariaDB objects (managed mode)",
    "jobs": "Database Jobs and the archive CronJob",
    "pool": "A NovaCompute pool (a CR of its own)",
}

# (column, row) of each panel.
GRID: Mapping[str, tuple[int, int]] = {
    "traffic": (0, 0),
    "control": (1, 0),
    "config": (2, 0),
    "mariadb": (0, 1),
    "jobs": (1, 1),
    "pool": (2, 1),
}

_SUFFIX_OF_COMPONENT = {naming.deployment_name("", c): c for c in list(Component)[:5]}

# What a child is for, where a word helps (keyed by kind and suffix).
NOTES: Mapping[tuple[str, str], str] = {
    ("Service", ""): "compute API",
    ("Service", "-metadata"): "metadata API",
    ("Service", "-novncproxy"): "console proxy",
    ("HTTPRoute", ""): "spec.gateway",
    ("HTTPRoute", "-metadata"): "spec.metadata.gateway",
    ("HTTPRoute", "-console"): "spec.novncproxy.gateway",
    ("HorizontalPodAutoscaler", ""): "spec.autoscaling",
    ("PodDisruptionBudget", ""): "compute API",
    ("NetworkPolicy", ""): "the Nova's pods",
    ("NetworkPolicy", "-novncproxy"): "console proxy",
    ("ConfigMap", naming.CONFIG_HASH_PLACEHOLDER): "nova.conf, named by content",
    ("Secret", "-api-db-connection"): "API database DSN",
    ("Secret", "-db-connection"): "cell database DSN",
    ("Secret", "-transport-url"): "RabbitMQ URL",
    ("Secret", "-compute-config"): "the compute contract",
    ("Secret", "-remote-compute-config"): "contract for a remote cluster",
    ("Secret", "-oslo-credentials"): "service credentials",
    ("Secret", "-digest-key"): "key of the rollout digests",
    ("Secret", "-checked-api-db-tls"): "API database TLS (label-checked)",
    ("Secret", "-checked-cell-db-tls"): "cell database TLS (label-checked)",
    ("Secret", "-checked-messaging-ca"): "bus CA (label-checked)",
    ("Job", "-db-sync"): "schemas at install",
    ("Job", "-db-expand"): "upgrade phase 1",
    ("Job", "-db-migrate"): "upgrade phase 2",
    ("Job", "-db-contract"): "upgrade phase 3",
    ("Job", "-discover-hosts"): "maps the pools' hosts",
    ("CronJob", "-db-archive"): "archives deleted rows",
    ("Database", "-api"): "nova_api",
    ("Database", ""): "cell1",
    ("Database", naming.CELL0_PLACEHOLDER): "cell0",
}


@dataclass(frozen=True)
class Box:
    kind: str
    name: str
    note: str = ""

    @property
    def label(self) -> str:
        return f"{self.kind} · {self.note}" if self.note else self.kind


def _note(kind: str, suffix: str) -> str:
    if kind == "Deployment":
        return str(_SUFFIX_OF_COMPONENT[suffix])
    return NOTES.get((kind, suffix), "")


def nova_children() -> list[Box]:
    """Every child a Nova ``{nova}`` renders, as ``naming.CHILD_SUFFIXES`` lists them."""
    return [
        Box(kind, f"{NOVA}{suffix}", _note(kind, suffix))
        for kind, suffixes in naming.CHILD_SUFFIXES.items()
        for suffix in suffixes
    ]


def pool_objects() -> list[Box]:
    """A NovaCompute ``{pool}`` and what it renders on the compute nodes."""
    return [
        Box("NovaCompute", POOL, f"spec.novaRef: {NOVA}"),
        Box("ConfigMap", f"{compute_pool.config_base(POOL)}-<hash>", "compute-pool.conf"),
        Box("DaemonSet", compute_pool.daemonset_name(POOL), "nova-compute per node"),
    ]


def panels() -> dict[str, list[Box]]:
    out: dict[str, list[Box]] = {key: [] for key in GRID}
    for box in nova_children():
        if box.kind not in PANEL_OF_KIND:
            raise KeyError(f"architecture.PANEL_OF_KIND: no panel for a Nova's {box.kind}")
        out[PANEL_OF_KIND[box.kind]].append(box)
    out["pool"] = pool_objects()
    return out


# -- drawing -----------------------------------------------------------------------------------

MARGIN = 24
COL_W = 330
COL_GAP = 130
BOX_W = COL_W - 24
BOX_H = 40
BOX_GAP = 8
PANEL_HEAD = 34
PANEL_PAD = 12
ROW_GAP = 96
TOP = 150  # below the title and the Nova
CHAR_W = {11: 6.2, 13: 7.9, 15: 8.6}  # generous widths of the fonts used, for the checks below

SANS = "DejaVu Sans, Helvetica, Arial, sans-serif"
MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"
COLORS = {
    "traffic": "#e8f1fb",
    "control": "#e7f6ea",
    "config": "#fdf3e1",
    "mariadb": "#f3e9f7",
    "jobs": "#fbe9e9",
    "pool": "#e9f5f5",
}


def _text(
    x: float,
    y: float,
    text: str,
    size: int,
    *,
    mono: bool = False,
    bold: bool = False,
    anchor: str = "start",
    fill: str = "#1f2328",
) -> str:
    weight = ' font-weight="bold"' if bold else ""
    family = MONO if mono else SANS
    return (
        f'<text x="{x:.0f}" y="{y:.0f}" font-family="{family}" font-size="{size}"{weight}'
        f' text-anchor="{anchor}" fill="{fill}">{escape(text)}</text>'
    )


def _fits(text: str, size: int, width: float) -> None:
    if len(text) * CHAR_W[size] > width:
        raise ValueError(f"architecture: {text!r} does not fit its box")


def _box(x: float, y: float, box: Box, fill: str = "#ffffff") -> str:
    _fits(box.label, 11, BOX_W - 16)
    _fits(box.name, 13, BOX_W - 16)
    return (
        f'<g class="object" data-kind="{escape(box.kind)}">'
        f'<rect x="{x:.0f}" y="{y:.0f}" width="{BOX_W}" height="{BOX_H}" rx="5" fill="{fill}"'
        ' stroke="#8c959f"/>'
        + _text(x + 8, y + 15, box.label, 11, fill="#57606a")
        + _text(x + 8, y + 33, box.name, 13, mono=True, bold=True)
        + "</g>"
    )


@dataclass(frozen=True)
class _Frame:
    x: float
    y: float
    w: float
    h: float

    @property
    def mid_y(self) -> float:
        return self.y + self.h / 2


def _arrow(x1: float, y1: float, x2: float, y2: float, label: Sequence[str], *, lx: float, ly: float) -> str:
    line = (
        f'<line x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" stroke="#24292f"'
        ' stroke-width="1.6" marker-end="url(#arrow)"/>'
    )
    texts = "".join(_text(lx, ly + 14 * i, part, 11, anchor="middle") for i, part in enumerate(label))
    for part in label:
        _fits(part, 11, COL_GAP + 60)
    return line + texts


def render() -> str:
    content = panels()
    rows = max(r for _, r in GRID.values()) + 1
    row_h = [
        PANEL_HEAD
        + PANEL_PAD
        + max(len(content[k]) for k, (_, r) in GRID.items() if r == row) * (BOX_H + BOX_GAP)
        for row in range(rows)
    ]
    width = 2 * MARGIN + 3 * COL_W + 2 * COL_GAP
    height = TOP + sum(row_h) + (rows - 1) * ROW_GAP + 70
    frames: dict[str, _Frame] = {}
    body: list[str] = []
    for key, (col, row) in GRID.items():
        x = MARGIN + col * (COL_W + COL_GAP)
        y = TOP + sum(row_h[:row]) + row * ROW_GAP
        h = PANEL_HEAD + PANEL_PAD + len(content[key]) * (BOX_H + BOX_GAP)
        frames[key] = _Frame(x, y, COL_W, h)
        dash = ' stroke-dasharray="6 4"' if key == "pool" else ""
        body.append(
            f'<g class="panel" data-panel="{key}"><rect x="{x}" y="{y}" width="{COL_W}" height="{h}" rx="8"'
            f' fill="{COLORS[key]}" stroke="#8c959f"{dash}/>'
        )
        _fits(PANEL_TITLES[key], 13, COL_W - 20)
        body.append(_text(x + 12, y + 22, PANEL_TITLES[key], 13, bold=True))
        for i, box in enumerate(content[key]):
            body.append(_box(x + 12, y + PANEL_HEAD + i * (BOX_H + BOX_GAP), box))
        body.append("</g>")

    # The Nova itself, above the panels it owns.
    nova = Box("Nova", NOVA, "nova.openstack.c5c3.io/v1alpha1")
    nova_x = MARGIN + COL_W + COL_GAP + (COL_W - BOX_W) / 2
    body.append(_box(nova_x, 70, nova, fill="#fff8c5"))
    owned = "owns every object in the solid panels (owner references): deleting the Nova deletes them"
    body.append(_text(width / 2, 132, owned, 11, anchor="middle", fill="#57606a"))
    body.append(
        f'<line x1="{width / 2:.0f}" y1="110" x2="{width / 2:.0f}" y2="120"'
        ' stroke="#24292f" stroke-width="1.6"/>'
    )

    t, c, cfg, db, jobs, pool = (
        frames[k] for k in ("traffic", "control", "config", "mariadb", "jobs", "pool")
    )
    gap_mid = COL_GAP / 2
    arrows = [
        # Services and routes send traffic to the API, metadata and console pods.
        _arrow(
            t.x + t.w,
            t.mid_y,
            c.x - 4,
            t.mid_y,
            ["Services and routes", "reach api, metadata,", "novncproxy"],
            lx=t.x + t.w + gap_mid,
            ly=t.mid_y - 52,
        ),
        # The pods mount nova.conf and read the credentials.
        _arrow(
            cfg.x,
            cfg.mid_y,
            c.x + c.w + 4,
            cfg.mid_y,
            ["pods mount nova.conf,", "read the credentials"],
            lx=c.x + c.w + gap_mid,
            ly=cfg.mid_y - 38,
        ),
        # The Jobs run nova-manage with the same config.
        _arrow(
            cfg.x + 30,
            cfg.y + cfg.h,
            jobs.x + jobs.w + 4,
            jobs.y + 30,
            ["nova.conf", "and DSNs"],
            lx=cfg.x - 40,
            ly=cfg.y + cfg.h + 26,
        ),
        # db-sync, the upgrade phases and the archive work on the databases.
        _arrow(
            jobs.x,
            jobs.y + 60,
            db.x + db.w + 4,
            jobs.y + 60,
            ["db-sync, upgrade", "phases, archive:", "the schemas"],
            lx=db.x + db.w + gap_mid,
            ly=jobs.y + 12,
        ),
        # The roles talk SQL to the databases the MariaDB objects describe.
        _arrow(
            c.x + 30,
            c.y + c.h,
            db.x + db.w - 30,
            db.y - 4,
            ["roles use the", "databases (SQL)"],
            lx=c.x + 90,
            ly=c.y + c.h + 50,
        ),
        # The compute contract is what a pool reads.
        _arrow(
            cfg.x + cfg.w - 40,
            cfg.y + cfg.h,
            cfg.x + cfg.w - 40,
            pool.y - 4,
            [f"{NOVA}-compute-config:", "the compute contract"],
            lx=cfg.x + cfg.w - 40 - 78,
            ly=cfg.y + cfg.h + 30,
        ),
    ]
    body.extend(arrows)
    foot = [
        "Names as the operator gives them: {nova} is the Nova's name, {pool} the NovaCompute's,"
        " <hash> a digest of the content, <database> spec.database.database.",
        "Generated from the operator's list of a Nova's children (nova_operator/naming.py)"
        " by make manifests.",
    ]
    for i, line in enumerate(foot):
        body.append(_text(MARGIN, height - 36 + 16 * i, line, 11, fill="#57606a"))
    title = "What a Nova creates, and how a NovaCompute pool connects to it"
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height:.0f}"'
        f' viewBox="0 0 {width} {height:.0f}" role="img">\n'
        f"<title>{escape(title)}</title>\n"
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8"'
        ' orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#24292f"/></marker></defs>\n'
        f'<rect width="{width}" height="{height:.0f}" fill="#ffffff"/>\n'
        + _text(MARGIN, 40, title, 15, bold=True)
        + "\n"
    )
    return (
        "<!-- Generated by make manifests from nova_operator/install/architecture.py; do not edit. -->\n"
        + (head + "\n".join(body) + "\n</svg>\n")
    )
