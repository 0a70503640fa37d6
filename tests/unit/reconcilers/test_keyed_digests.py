"""Issue 26 item 7: the annotations over content that holds credentials are keyed digests.

``applied-digest`` on the derived Secrets was the plain SHA-256 of the Secret as sent (a
database password from a 15-word list was found from it), and the pool DaemonSet's
``compute-config-hash`` the plain SHA-256 of the compute contract. Both are now HMAC-SHA-256
with the Nova's ``{name}-digest-key``: they still change whenever the content does, so a
rotation still rewrites the Secret and rolls the pods, but they cannot test guesses offline.

The derived Secrets' digest is tested on the real API server
(``tests/integration/nova/test_transport_url_secret.py``); here the pool's hash.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

from nova_operator import conditions
from nova_operator.reconcilers.compute.pool_config import reconcile_pool_config
from nova_operator.renderers import compute_pool
from tests.unit.reconcilers.compute.fakes import FakeCompute, make_pass
from tests.unit.reconcilers.compute.fakes import FakeKube as ComputeKube

# -- the pool's compute-config-hash -------------------------------------------------------------

CONTRACT = {"nova-compute.conf": b"[DEFAULT]\n", "transport_url": b"rabbit://n:pw@b:5672/", "password": b"pw"}


def _pool(contract: dict[str, bytes], key: bytes | None) -> tuple[Any, Any]:
    objects = {
        ("secrets", "nova-compute-config"): {
            "metadata": {"name": "nova-compute-config"},
            "data": {k: base64.b64encode(v).decode() for k, v in contract.items()},
        }
    }
    if key is not None:
        objects[("secrets", "nova-digest-key")] = {
            "metadata": {"name": "nova-digest-key"},
            "data": {"key": base64.b64encode(key).decode()},
        }
    p, _events = make_pass([], compute=FakeCompute(), kube=ComputeKube(objects=objects))
    p.contract_secret = "nova-compute-config"
    return p, p.kube


async def test_the_pool_hash_is_keyed_with_the_novas_digest_key_and_follows_the_contract() -> None:
    p, _ = _pool(CONTRACT, b"k" * 64)
    assert (await reconcile_pool_config(p)).requeue_after is None
    preimage = b"".join(k.encode() + b"=" + v + b"\n" for k, v in sorted(CONTRACT.items()))
    assert p.contract_hash != hashlib.sha256(preimage).hexdigest()
    assert p.contract_hash == hmac.new(b"k" * 64, preimage, hashlib.sha256).hexdigest()
    ds = compute_pool.daemonset(
        p.pool,
        compute_pool.PoolInputs(
            image="i",
            config_map=p.config_map,
            contract_secret=p.contract_secret,
            contract_hash=p.contract_hash,
        ),
    )
    annotations = ds["spec"]["template"]["metadata"]["annotations"]
    assert annotations[compute_pool.COMPUTE_CONFIG_HASH_ANNOTATION] == p.contract_hash
    rotated, _ = _pool({**CONTRACT, "password": b"rotated"}, b"k" * 64)
    await reconcile_pool_config(rotated)
    assert rotated.contract_hash != p.contract_hash


async def test_a_pool_waits_for_the_digest_key() -> None:
    p, kube = _pool(CONTRACT, None)
    assert (await reconcile_pool_config(p)).requeue_after == p.settings.intervals.wait
    cond = p.condition(conditions.CONFIG_READY)
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "WaitingForDigestKey")
    assert "nova-digest-key" in cond["message"]
    assert p.contract_hash == ""
    assert kube.created == []
