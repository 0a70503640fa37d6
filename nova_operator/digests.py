"""Content hashes: the immutable config ConfigMap's name suffix, credential digests, Job pod-spec hashes."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["config_hash", "credential_digest", "keyed_digest", "pod_spec_hash", "sha256_hex"]


def sha256_hex(value: str | bytes) -> str:
    data = value.encode("utf-8") if isinstance(value, str) else value
    return hashlib.sha256(data).hexdigest()


def config_hash(data: Mapping[str, str]) -> str:
    """First 8 hex characters of SHA-256 over the ConfigMap data (spec nova-crd §8.1).

    Keys sorted ascending, each entry hashed as ``"<byte-len(key)>:<key>=<byte-len(value)>:<value>\\n"``,
    so no two different maps share a preimage.
    """
    digest = hashlib.sha256()
    for key in sorted(data):
        k, v = key.encode("utf-8"), data[key].encode("utf-8")
        digest.update(b"%d:%s=%d:%s\n" % (len(k), k, len(v), v))
    return digest.hexdigest()[:8]


def keyed_digest(value: str | bytes, key: bytes) -> str:
    """HMAC-SHA-256 hex of ``value`` with a Nova's ``{name}-digest-key``: what an annotation over
    content that holds credentials records (it changes with the content, but reading it gives
    no way to test guesses of the content offline)."""
    if not key:
        raise ValueError("a keyed digest needs the digest key")
    data = value.encode("utf-8") if isinstance(value, str) else value
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def credential_digest(value: str | None, key: bytes) -> str:
    """HMAC-SHA-256 hex of a credential for a pod-template annotation; empty for an absent value.

    Keyed with the Nova's own ``{name}-digest-key`` Secret: a rotation still changes the
    annotation (and rolls the pods), but someone who can read Deployments and not Secrets
    cannot test password guesses against it offline.
    """
    if not key:
        raise ValueError("a credential digest needs the digest key")
    return keyed_digest(value, key) if value else ""


def pod_spec_hash(pod_template: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a desired pod template (the Jobs' pod-spec-hash annotation)."""
    return sha256_hex(json.dumps(pod_template, sort_keys=True, separators=(",", ":")))
