"""Kubernetes resource quantities (``500m``, ``1Gi``, ``2e3``) as exact fractions."""

from __future__ import annotations

import math
import re
from fractions import Fraction

_SUFFIX = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(?:([eE][+-]?[0-9]+)|([a-zA-Z]*))$")


def parse(text: str | int | float) -> Fraction:
    """The value of a quantity; ``ValueError`` for anything the API server would refuse."""
    if isinstance(text, int | float):
        return Fraction(text)
    match = _QUANTITY.match(text.strip())
    if not match or match.group(3) not in (None, *_SUFFIX):
        raise ValueError(f"not a quantity: {text!r}")
    number = Fraction(match.group(1))
    if match.group(2):
        return number * Fraction(10) ** int(match.group(2)[1:])
    return number * _SUFFIX[match.group(3) or ""]


def ceil_div(value: Fraction, divisor: Fraction) -> int:
    """What ``resourceFieldRef`` shows: the value in units of the divisor, rounded up, as the kubelet
    shows it."""
    return math.ceil(value / divisor)
