"""Which Secrets a CR may make the operator read: the ``--secret-ref-label`` policy (issue 26 item 5).

The model: the right to create a Nova or a NovaCompute in a namespace implies the right to have
the operator read the Secrets of that namespace the CR names (as creating a Pod implies mounting
them): the operator copies them into derived Secrets, mounts them into pods whose image the CR
chooses, and posts the service-user password to the Keystone the CR names. By default any Secret
of the CR's namespace may be named (never one of another namespace: names are single path
segments and requests are namespaced).

A cluster that grants Nova authors less than Secret access narrows it with
``--secret-ref-label KEY`` (or ``KEY=VALUE``): then a Secret a CR names is used only while it
carries that label (with that value); a CR naming another one gets its step's condition False,
reason ``SecretRefNotLabelled``, and the Secret is not read further. Secrets the operator writes
itself (derived Secrets, the digest key) and the one a RabbitmqCluster's status names are not CR
references and are not checked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["SECRET_REF_NOT_LABELLED", "SecretRefPolicy", "parse_policy"]

SECRET_REF_NOT_LABELLED: Final = "SecretRefNotLabelled"

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*"
_KEY = re.compile(rf"^({_PREFIX}/)?{_NAME}$")
_VALUE = re.compile(rf"^({_NAME})?$")


@dataclass(frozen=True, slots=True)
class SecretRefPolicy:
    """A Secret a CR names must carry label ``key`` (with ``value`` when one is given)."""

    key: str
    value: str | None = None

    def __str__(self) -> str:
        return self.key if self.value is None else f"{self.key}={self.value}"

    def permits(self, secret: Mapping[str, Any]) -> bool:
        labels = (secret.get("metadata") or {}).get("labels") or {}
        if self.key not in labels:
            return False
        return self.value is None or labels[self.key] == self.value

    def refusal(self, field: str, namespace: str, name: str) -> str:
        """The condition message for a CR naming Secret ``name`` without the label (no value in it)."""
        return (
            f"{field}: Secret {namespace}/{name} does not carry the label {self}; this operator reads a "
            "Secret a CR names only when it carries that label (--secret-ref-label)"
        )


def parse_policy(text: str) -> SecretRefPolicy | None:
    """``KEY`` or ``KEY=VALUE`` (a Kubernetes label key and value); empty: no policy."""
    text = text.strip()
    if not text:
        return None
    key, sep, value = text.partition("=")
    if len(key.rpartition("/")[2]) > 63 or len(key.partition("/")[0]) > 253 or not _KEY.match(key):
        raise ValueError(f"--secret-ref-label {text!r}: {key!r} is not a label key")
    if sep and not _VALUE.match(value):
        raise ValueError(f"--secret-ref-label {text!r}: {value!r} is not a label value")
    return SecretRefPolicy(key, value if sep else None)
