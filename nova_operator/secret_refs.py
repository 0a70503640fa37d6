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
reason ``SecretRefNotLabelled``, and the Secret is not read further. A Secret the CR names that does
not exist yet is refused the same way (``absent``) until it exists with the label. The Secrets the
pods mount by name (the database TLS Secrets, the bus's CA bundle) are never mounted themselves: the
kubelet would hand the pods whatever they hold later, label or not. The pods mount the Nova's copies
(``reconcilers.nova.checked_copies``), written only from sources that carry the label, so a label
removed later keeps them at the last labelled content.
Secrets the operator writes itself (derived Secrets, the digest key) and the one a
RabbitmqCluster's status names are not CR references and are not checked.

What is read is bounded by size too (issue 36: 20 Novas naming 400 Secrets of 1 MiB took the
operator over its memory limit). A Secret whose data is over ``SECRET_DATA_LIMIT`` (256 KiB,
decoded) is never cached with its data and never used: the step that reads it reports
``SecretTooLarge`` on its condition, naming the Secret, its size and the limit (no content). The
Secrets cached with their data in one namespace are bounded by ``NAMESPACE_SECRET_DATA_LIMIT`` (4 MiB)
in all; one past that is read from the API server when a pass needs it, not kept. What is cached is
served as ``nova_operator_informer_held_bytes{resource="secrets"}``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "NAMESPACE_SECRET_DATA_LIMIT",
    "SECRET_DATA_LIMIT",
    "SECRET_REF_NOT_LABELLED",
    "SECRET_TOO_LARGE",
    "SecretRefPolicy",
    "parse_policy",
    "secret_data_size",
    "too_large",
]

SECRET_REF_NOT_LABELLED: Final = "SecretRefNotLabelled"
SECRET_TOO_LARGE: Final = "SecretTooLarge"
SECRET_DATA_LIMIT: Final = 256 * 1024
"""The most data (decoded bytes, every key) a Secret the operator reads may hold."""
NAMESPACE_SECRET_DATA_LIMIT: Final = 4 * 1024 * 1024
"""The most Secret data (decoded bytes) the operator's cache holds for one namespace."""


def secret_data_size(secret: Mapping[str, Any]) -> int:
    """The decoded size of a Secret's ``data`` and ``stringData`` (computed from the base64 length:
    nothing is decoded, no value is looked at beyond its length and padding)."""
    size = 0
    data = secret.get("data")
    if isinstance(data, Mapping):
        for value in data.values():
            if isinstance(value, str):
                size += len(value) * 3 // 4 - (len(value) - len(value.rstrip("=")))
    string_data = secret.get("stringData")
    if isinstance(string_data, Mapping):
        size += sum(len(value.encode("utf-8")) for value in string_data.values() if isinstance(value, str))
    return max(size, 0)


def too_large(namespace: str, name: str, size: int) -> str:
    """The condition message for a Secret over ``SECRET_DATA_LIMIT`` (its size, never its content)."""
    return (
        f"Secret {namespace}/{name} holds {size} bytes of data, over the limit of {SECRET_DATA_LIMIT} bytes "
        f"({SECRET_DATA_LIMIT // 1024} KiB) this operator reads of one Secret; it is not used. Keep only "
        "the keys the CR needs in it"
    )


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

    def absent(self, field: str, namespace: str, name: str) -> str:
        """The condition message for a CR naming Secret ``name`` that does not exist (yet)."""
        return (
            f"{field}: Secret {namespace}/{name} not found; this operator uses a Secret a CR names only "
            f"once it exists and carries the label {self} (--secret-ref-label)"
        )

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
