"""The operator's /metrics: samples of one metric and quantiles of a histogram (as PromQL's
``histogram_quantile`` estimates them: linear within the bucket that holds the rank)."""

from __future__ import annotations

import math
import re
import urllib.request
from collections.abc import Mapping

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

Histogram = dict[float, float]  # upper bound (le) -> cumulative count


def scrape(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return str(resp.read().decode())


def samples(text: str, metric: str, /, **labels: str) -> list[tuple[dict[str, str], float]]:
    out = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if not m or m.group(1) != metric:
            continue
        got = dict(_LABEL.findall(m.group(3) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            out.append((got, float(m.group(4))))
    return out


def total(text: str, metric: str, /, **labels: str) -> float:
    return sum(v for _, v in samples(text, metric, **labels))


def histogram(text: str, metric: str, /, **labels: str) -> Histogram:
    """Cumulative bucket counts of ``metric`` (summed over series matching ``labels``)."""
    out: Histogram = {}
    for got, value in samples(text, f"{metric}_bucket", **labels):
        le = math.inf if got["le"] == "+Inf" else float(got["le"])
        out[le] = out.get(le, 0.0) + value
    return dict(sorted(out.items()))


def minus(after: Histogram, before: Mapping[float, float]) -> Histogram:
    return {le: count - before.get(le, 0.0) for le, count in after.items()}


def quantile(h: Histogram, q: float) -> float | None:
    """The ``q`` quantile; None without observations. Above the last finite bound: that bound."""
    if not h:
        return None
    n = h.get(math.inf, max(h.values()))
    if n <= 0:
        return None
    rank, lower, below = q * n, 0.0, 0.0
    for le, count in h.items():
        if count >= rank:
            if math.isinf(le):
                return lower
            span = count - below
            return lower + (le - lower) * ((rank - below) / span if span else 1.0)
        lower, below = le, count
    return lower
