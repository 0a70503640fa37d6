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


def test_start_up_loads_the_kubernetes_client_but_not_keystoneauth_until_a_pool_calls_nova() -> None:
    loaded = _loaded_at_startup()
    assert "kubernetes_asyncio.client" in loaded  # the design's client, imported as it is
    # keystoneauth1 and requests (about 9 MiB) serve only the NovaCompute steps' compute API calls
    assert not {m for m in loaded if m.split(".")[0] in {"keystoneauth1", "requests"}}
