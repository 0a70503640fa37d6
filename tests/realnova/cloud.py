"""Calls to the real Glance, Placement and nova-metadata for the real-Nova tier's scenarios, by plain
HTTP: every answer is ``(status, body)``, an error status included, so a test can assert a 403."""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.error
import urllib.request
from typing import Any

JSON = dict[str, Any]
PLACEMENT_VERSION = "placement 1.28"  # consumer generations in GET /allocations/{consumer}


def request(
    method: str,
    url: str,
    *,
    headers: dict[str, str] | None = None,
    body: Any = None,
    data: bytes | None = None,
) -> tuple[int, Any]:
    """``(status, decoded JSON or None)``; ``body`` is sent as JSON, ``data`` as it is."""
    sent = dict(headers or {})
    if body is not None:
        data = json.dumps(body).encode()
        sent.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(url, data, sent, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            status, text = int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read()
    try:
        return status, json.loads(text) if text else None
    except ValueError:
        return status, text.decode(errors="replace")


def upload_image(glance_url: str, token: str, name: str, content: bytes) -> str:
    """A public raw image holding ``content``; its id once Glance calls it active."""
    auth = {"X-Auth-Token": token}
    status, image = request(
        "POST",
        f"{glance_url}/v2/images",
        headers=auth,
        body={"name": name, "disk_format": "raw", "container_format": "bare", "visibility": "public"},
    )
    assert status == 201, (status, image)
    status, answer = request(
        "PUT",
        f"{glance_url}/v2/images/{image['id']}/file",
        headers={**auth, "Content-Type": "application/octet-stream"},
        data=content,
    )
    assert status == 204, (status, answer)
    status, image = request("GET", f"{glance_url}/v2/images/{image['id']}", headers=auth)
    assert status == 200, (status, image)
    assert image["status"] == "active", image
    assert image["size"] == len(content), image
    return str(image["id"])


def allocations(placement_url: str, token: str, consumer: str) -> dict[str, JSON]:
    """The consumer's allocations by resource provider uuid (``{}`` when it holds none)."""
    status, body = request(
        "GET",
        f"{placement_url}/allocations/{consumer}",
        headers={"X-Auth-Token": token, "OpenStack-API-Version": PLACEMENT_VERSION},
    )
    assert status == 200, (status, body)
    return dict(body["allocations"])


def provider_name(placement_url: str, token: str, uuid: str) -> str:
    status, body = request(
        "GET",
        f"{placement_url}/resource_providers/{uuid}",
        headers={"X-Auth-Token": token, "OpenStack-API-Version": PLACEMENT_VERSION},
    )
    assert status == 200, (status, body)
    return str(body["name"])


def metadata_signature(shared_secret: str, instance_id: str) -> str:
    """``X-Instance-ID-Signature`` as the Neutron metadata agent computes it."""
    return hmac.new(shared_secret.encode(), instance_id.encode(), hashlib.sha256).hexdigest()


def metadata_get(
    url: str, path: str, *, instance_id: str, tenant_id: str, signature: str, remote: str = "192.0.2.10"
) -> tuple[int, Any]:
    """``GET path`` with the headers the metadata agent adds to an instance's request."""
    headers = {
        "X-Instance-ID": instance_id,
        "X-Tenant-ID": tenant_id,
        "X-Instance-ID-Signature": signature,
        "X-Forwarded-For": remote,
    }
    return request("GET", f"{url}{path}", headers=headers)
