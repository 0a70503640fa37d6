"""The controller runtime: a generic controller kit (client-go / controller-runtime in Python).

Data flow: ``Informer`` (list+watch of one kind) -> ``Transform`` (what its users read)
-> ``Cache`` (compressed JSON, indexes; every read a new dict)
-> handlers (map an event to ``Request`` keys, filtered by predicates) -> ``WorkQueue``
(dedup, never one key twice at once, rate-limited retries) -> ``Controller`` workers
-> ``Reconciler.reconcile(request) -> Result``. The ``Manager`` (``nova_operator.runtime.manager``)
starts informers, waits for their sync, then runs controllers behind leader election.

This package knows nothing about Nova and never imports kubernetes_asyncio.
"""

from nova_operator.runtime.cache import Cache
from nova_operator.runtime.controller import Controller
from nova_operator.runtime.informer import Informer
from nova_operator.runtime.predicates import Predicate
from nova_operator.runtime.reconciler import Reconciler
from nova_operator.runtime.request import Request, Result, TerminalError
from nova_operator.runtime.workqueue import ShutDown, WorkQueue

__all__ = [
    "Cache",
    "Controller",
    "Informer",
    "Predicate",
    "Reconciler",
    "Request",
    "Result",
    "ShutDown",
    "TerminalError",
    "WorkQueue",
]
