"""A steady client of a real-tier API: one request after another on a fresh connection each (as a
client behind a Service sees a rollout or a scale), counting the answers that were not 2xx."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class SteadyClient:
    """``GET url`` every ``interval`` seconds in a thread, from ``start()`` until ``stop()``."""

    url: str
    headers: Callable[[], dict[str, str]] = dict
    interval: float = 0.2
    timeout: float = 10.0
    sent: int = 0
    failures: list[str] = field(default_factory=list)  # "t=<s> <what>" for each failed request
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _t0: float = 0.0

    def start(self) -> SteadyClient:
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="steady-client", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> SteadyClient:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout + 5)
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sent += 1
            what = self._once()
            if what:
                self.failures.append(f"t={time.monotonic() - self._t0:.1f} {what}")
            self._stop.wait(self.interval)

    def _once(self) -> str:
        request = urllib.request.Request(self.url, headers=self.headers())
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                resp.read()
                return "" if 200 <= resp.status < 300 else f"HTTP {resp.status}"
        except urllib.error.HTTPError as exc:  # the request id, to find the answer in the API's log
            request_id = exc.headers.get("x-openstack-request-id", "")
            return f"HTTP {exc.code} {request_id} {exc.read()[:300]!r}"
        except Exception as exc:  # refused, reset, timed out: every way a request can fail
            return f"{type(exc).__name__}: {exc}"
