"""What the operator process imports at start-up (issue 15: memory): the client, not the rare paths."""

from __future__ import annotations

import json
import subprocess
import sys


def _loaded_at_startup() -> set[str]:
    code = (
        "import json, sys\n"
        "import nova_operator.cli, nova_operator.controllers\n"  # what `python -m nova_operator` loads
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return set(json.loads(out.stdout))


def test_start_up_loads_the_kubernetes_client_but_neither_keystoneauth_nor_requests() -> None:
    loaded = _loaded_at_startup()
    assert "kubernetes_asyncio.client" in loaded  # the design's client, imported as it is
    # The compute API calls go through aiohttp (nova_operator.openstack.http): keystoneauth1 and
    # requests (about 9 MiB) are not needed at all.
    assert not {m for m in loaded if m.split(".")[0] in {"keystoneauth1", "requests"}}
