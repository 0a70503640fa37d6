"""The OpenStack release model: ``YYYY.N`` strings, transitions and the image lockstep check.

upgrade-and-cells.md §1.2-1.3. ``YYYY >= 2010``, ``N`` in {1, 2}; a ``-suffix`` (a patch
marker such as ``2026.1-p1``) is accepted by the parser and ignored by every comparison.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Final

_RELEASE: Final = re.compile(r"^(\d{4})\.([12])(?:-[0-9A-Za-z.]+)?$")


class ReleaseParseError(ValueError):
    """A release string is not ``YYYY.N`` (with an optional ``-suffix``)."""


@dataclass(frozen=True, order=True)
class Release:
    year: int
    minor: int

    def __str__(self) -> str:
        return f"{self.year}.{self.minor}"

    def next(self) -> Release:
        """The release that follows: 1 -> 2 in the same year, 2 -> 1 of the next year."""
        return Release(self.year, 2) if self.minor == 1 else Release(self.year + 1, 1)


def parse(value: str) -> Release:
    m = _RELEASE.match(value)
    if m is None or int(m.group(1)) < 2010:
        raise ReleaseParseError(f"{value!r} is not an OpenStack release of the form YYYY.N")
    return Release(int(m.group(1)), int(m.group(2)))


def base(value: str) -> str | None:
    """``2026.1`` for ``2026.1-p1``; None when the string does not parse."""
    try:
        return str(parse(value))
    except ReleaseParseError:
        return None


class Transition(enum.Enum):
    STEADY = "steady"  # fresh install, same release, or patch bump: the db-sync Job
    UPGRADE = "upgrade"  # one step forward
    UNPARSEABLE = "VersionParseError"
    DOWNGRADE = "DowngradeNotSupported"
    SKIP_LEVEL = "UpgradePathInvalid"


def needs_upgrade(installed: str, target: str) -> bool:
    """Both set, different, and either unparseable or more than a patch apart (§1.2)."""
    if not installed or not target or installed == target:
        return False
    a, b = base(installed), base(target)
    return a is None or b is None or a != b


def classify(installed: str, target: str) -> Transition:
    """The outcome of moving the schemas from ``installed`` to ``target`` (§1.2's table)."""
    if not needs_upgrade(installed, target):
        return Transition.STEADY
    try:
        frm, to = parse(installed), parse(target)
    except ReleaseParseError:
        return Transition.UNPARSEABLE
    if to < frm:
        return Transition.DOWNGRADE
    if to == frm.next():
        return Transition.UPGRADE
    return Transition.SKIP_LEVEL


def image_tag(image_ref: str) -> str | None:
    """The tag of ``repo[:port]/path:tag``; None for a digest pin or an untagged reference."""
    if "@" in image_ref:
        return None
    last = image_ref.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def lockstep_mismatch(*, image_tag_value: str | None, release: str) -> bool:
    """True when a tag that parses as a release names another year or minor than ``release`` (§1.3).

    A digest pin (no tag) or a tag that is not a release (``latest``) is not checked.
    """
    if image_tag_value is None:
        return False
    tag, rel = base(image_tag_value), base(release)
    return tag is not None and rel is not None and tag != rel
