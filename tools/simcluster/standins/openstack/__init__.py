"""A fake Keystone v3 and Nova compute API on 127.0.0.1, with in-memory state and a call log.

It speaks the real paths, microversion headers and status codes of what the NovaCompute
controller calls (../shared/spec/novacompute-crd.md §12, §14):

Keystone (own port)  POST /v3/auth/tokens (password or application_credential) -> 201 +
                     X-Subject-Token + catalog with the compute endpoint; GET /v3.
Nova (own port)      GET  /v2.1/os-services[?binary=&host=]       ids are UUIDs from 2.53; from 2.69 a
                                                                  host in a down cell is listed with
                                                                  status UNKNOWN (omitted before 2.69);
                                                                  nova-osapi_compute and nova-metadata
                                                                  records are left out, as Nova does
                     PUT  /v2.1/os-services/{uuid}                 (2.53+) status/disabled_reason/forced_down
                     DELETE /v2.1/os-services/{uuid}               404 unknown; 409 with instances or
                                                                  migrations on the host
                     GET  /v2.1/os-hypervisors[/detail]            ?limit&marker (2.33+), links/next, UUID
                                                                  ids (2.53+), 2.88 fields; unmapped
                                                                  hosts are dropped after the limit
                     GET  /v2.1/servers[/detail]?all_tenants=1&host=  (host filter admin-only)
                     GET/POST /v2.1/os-aggregates, GET/PUT/DELETE /v2.1/os-aggregates/{id},
                     POST /v2.1/os-aggregates/{id}/action  add_host / remove_host / set_metadata
                     GET  /v2.1/ (version document)

Every request is logged (``calls()``) so a test can assert "exactly one disable, no enable, no
migration". ``set_fault`` makes either API answer 500 or drop connections for a while, and
``go_offline`` closes the listening socket (connection refused) until ``go_online``.
Thread-safe: the server runs in an event loop of its own (see ``simcluster.platform.launch``), tests
call these methods from theirs.

The rooms: ``cloud`` (the state and the test controls), ``api`` (microversions, error bodies, the
token check), ``keystone``, ``nova`` and ``aggregates`` (one class per API, each over the cloud),
``server`` (``FakeOpenStack``: the cloud served on two ports, the faults, ``/_sim/``).
"""

from simcluster.standins.openstack.cloud import Aggregate, Call, Hypervisor, Server, Service, User
from simcluster.standins.openstack.server import FakeOpenStack

__all__ = ["Aggregate", "Call", "FakeOpenStack", "Hypervisor", "Server", "Service", "User"]
