"""The shape every layer passes a Kubernetes object around in: the JSON the API server sent, decoded."""

from __future__ import annotations

from typing import Any

Object = dict[str, Any]
"""One object (or list, or patch) as JSON: what the client sends and returns, what caches hold."""
