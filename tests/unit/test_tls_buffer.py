"""Every TLS connection's read buffer is small (issue 15, memory): one watch connection per Nova namespace."""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import ssl
from typing import cast

import pytest
from kubernetes_asyncio import client as k8s_client

from nova_operator.kube.client import TLS_READ_BUFFER, Kube
from nova_operator.metrics import Metrics


def _api() -> k8s_client.ApiClient:
    cfg = k8s_client.Configuration()
    cfg.host = "https://127.0.0.1:6443"
    return cast(k8s_client.ApiClient, type("Api", (), {"configuration": cfg})())


async def test_a_kube_client_gives_tls_connections_a_16_kib_read_buffer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(asyncio.sslproto.SSLProtocol, "max_size", 256 * 1024)  # asyncio's default
    Kube(_api(), metrics=Metrics())
    assert asyncio.sslproto.SSLProtocol.max_size == TLS_READ_BUFFER == 16 * 1024
    # the buffer asyncio allocates for a new TLS connection follows (the attribute is what asyncio reads)
    loop = asyncio.get_running_loop()
    context = ssl.create_default_context()
    protocol = asyncio.sslproto.SSLProtocol(loop, asyncio.Protocol(), context, None, server_hostname="x")
    assert len(protocol._ssl_buffer) == 16 * 1024
    protocol.connection_lost(None)  # as asyncio ends it: its transport counts as closed, no ResourceWarning


def test_a_smaller_buffer_chosen_by_an_embedding_program_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asyncio.sslproto.SSLProtocol, "max_size", 8 * 1024)
    Kube(_api(), metrics=Metrics())
    assert asyncio.sslproto.SSLProtocol.max_size == 8 * 1024
