"""The fake Keystone and compute API a test's operator calls instead of the Nova's own Service.

``running()`` starts one with the service user the test inputs name; an operator parametrized with
``STALE_SERVICES`` (``pytest.mark.parametrize("operator", [STALE_SERVICES], indirect=True)``) looks
at service records on the running one's compute API.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from simcluster import FakeOpenStack

from tests.integration.nova.inputs import SECRETS_DATA

_RUNNING: dict[str, str] = {}


def nova_url(_name: str, _namespace: str) -> str:
    """The operator's ``nova_api_url``: the compute API of the fake ``running()`` started last."""
    return _RUNNING["nova"]


STALE_SERVICES: dict[str, Any] = {"stale_services": True, "nova_api_url": nova_url}


@contextlib.asynccontextmanager
async def running(password: str = SECRETS_DATA["service-user"]["password"]) -> AsyncIterator[FakeOpenStack]:
    f = FakeOpenStack()
    await f.start()
    f.add_user("nova", password)
    _RUNNING["nova"] = f.nova_url
    try:
        yield f
    finally:
        await f.stop()
