"""The compute API client against the fake Keystone + Nova: paths, microversions, status handling."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from simcluster import FakeOpenStack

from nova_operator.openstack import (
    AggregateExists,
    ComputeAPIError,
    ComputeClient,
    Credentials,
    DeleteOutcome,
)
from nova_operator.openstack.client import keystone_v3_url

PASSWORD = "s3cret-pw"


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenStack]:
    f = FakeOpenStack()
    await f.start()
    f.add_user("nova", PASSWORD)
    try:
        yield f
    finally:
        await f.stop()


def creds(fake: FakeOpenStack, password: str = PASSWORD) -> Credentials:
    return Credentials(
        auth_url=fake.keystone_url + "/",
        username="nova",
        password=password,
        project_name="service",
        user_domain_name="Default",
        project_domain_name="Default",
    )


@pytest.fixture
async def client(fake: FakeOpenStack) -> ComputeClient:
    return await ComputeClient.connect(creds(fake), fake.nova_url)


def test_keystone_url_gets_v3_once() -> None:
    assert keystone_v3_url("http://ks:5000") == "http://ks:5000/v3"
    assert keystone_v3_url("http://ks:5000/") == "http://ks:5000/v3"
    assert keystone_v3_url("http://ks:5000/v3/") == "http://ks:5000/v3"


async def test_one_token_for_every_call_of_a_client(fake: FakeOpenStack, client: ComputeClient) -> None:
    fake.add_compute("n1")
    await client.list_services()
    await client.list_aggregates()
    await client.count_servers("n1")
    tokens = fake.calls("POST", "/v3/auth/tokens")
    assert len(tokens) == 1
    assert tokens[0].status == 201
    body = tokens[0].body["auth"]
    assert body["identity"]["methods"] == ["password"]
    assert body["scope"]["project"] == {"name": "service", "domain": {"name": "Default"}}


async def test_wrong_password_is_an_api_error_without_the_password(fake: FakeOpenStack) -> None:
    with pytest.raises(ComputeAPIError) as err:
        await ComputeClient.connect(creds(fake, "wrong"), fake.nova_url)
    assert err.value.status == 401
    assert "wrong" not in str(err.value)


async def test_keystone_unreachable_is_an_api_error(fake: FakeOpenStack) -> None:
    await fake.go_offline("keystone")
    with pytest.raises(ComputeAPIError) as err:
        await ComputeClient.connect(creds(fake), fake.nova_url)
    assert err.value.status == 0


async def test_services_at_2_69_indexed_by_host(fake: FakeOpenStack, client: ComputeClient) -> None:
    svc = fake.add_compute("n1", status="disabled")
    fake.add_compute("n2")
    services = await client.list_services()
    assert set(services) == {"n1", "n2"}
    assert services["n1"].id == svc.uuid
    assert services["n1"].disabled_reason == ""  # JSON null
    assert services["n2"].status == "enabled"
    assert services["n2"].state == "up"
    (call,) = fake.calls("GET", "/v2.1/os-services")
    assert call.microversion == "2.69"
    assert call.query == {"binary": "nova-compute"}


async def test_a_down_cell_fails_the_whole_service_list(fake: FakeOpenStack, client: ComputeClient) -> None:
    fake.add_compute("n1")
    fake.add_compute("n2")
    fake.set_cell_down({"n2"})
    with pytest.raises(ComputeAPIError, match="UNKNOWN"):
        await client.list_services()


async def test_every_binarys_services_in_one_unfiltered_list_a_down_cells_without_id(
    fake: FakeOpenStack, client: ComputeClient
) -> None:
    scheduler = fake.add_service("nova-scheduler-7d9f8c6b5d-x2x4z", "nova-scheduler", state="down")
    fake.add_service("nova-conductor-6b8d9f7c4-zt5kq", "nova-conductor")
    fake.add_service("nova-6b8d9f7c4-zt5kq", "nova-osapi_compute")  # Nova lists no API service
    fake.add_compute("n1")
    fake.add_service("cell2-conductor", "nova-conductor")
    fake.set_cell_down({"cell2-conductor"})
    services = {(s.binary, s.host): s for s in await client.list_all_services()}
    assert set(services) == {
        ("nova-scheduler", "nova-scheduler-7d9f8c6b5d-x2x4z"),
        ("nova-conductor", "nova-conductor-6b8d9f7c4-zt5kq"),
        ("nova-compute", "n1"),
        ("nova-conductor", "cell2-conductor"),
    }
    down = services[("nova-scheduler", "nova-scheduler-7d9f8c6b5d-x2x4z")]
    assert (down.id, down.state) == (scheduler.uuid, "down")
    unknown = services[("nova-conductor", "cell2-conductor")]
    assert (unknown.id, unknown.status, unknown.state) == ("", "UNKNOWN", "")
    (call,) = fake.calls("GET", "/v2.1/os-services")
    assert (call.microversion, call.query) == ("2.69", {})


async def test_a_non_compute_service_is_deleted_by_uuid_at_2_53(
    fake: FakeOpenStack, client: ComputeClient
) -> None:
    svc = fake.add_service("nova-scheduler-7d9f8c6b5d-x2x4z", "nova-scheduler", state="down")
    assert await client.delete_service(svc.uuid) is DeleteOutcome.DELETED
    (call,) = fake.calls("DELETE", "/v2.1/os-services/")
    assert (call.path, call.microversion) == (f"/v2.1/os-services/{svc.uuid}", "2.53")
    assert fake.services_of("nova-scheduler") == []


async def test_disable_sends_status_and_reason_at_2_53(fake: FakeOpenStack, client: ComputeClient) -> None:
    svc = fake.add_compute("n1")
    await client.disable_service(svc.uuid, "c5c3.io: leaving NovaCompute ns/pool")
    (call,) = fake.calls("PUT", "/v2.1/os-services/")
    assert call.microversion == "2.53"
    assert call.body == {"status": "disabled", "disabled_reason": "c5c3.io: leaving NovaCompute ns/pool"}
    assert fake.service_by_host("n1").status == "disabled"  # type: ignore[union-attr]


async def test_delete_service_outcomes(fake: FakeOpenStack, client: ComputeClient) -> None:
    busy = fake.add_compute("busy", servers=1)
    idle = fake.add_compute("idle")
    assert await client.delete_service(busy.uuid) is DeleteOutcome.CONFLICT
    assert await client.delete_service(idle.uuid) is DeleteOutcome.DELETED
    assert await client.delete_service(idle.uuid) is DeleteOutcome.GONE


async def test_mapped_hosts_pages_past_short_pages_until_empty(
    fake: FakeOpenStack, client: ComputeClient
) -> None:
    for i in range(7):
        fake.add_compute(f"h{i}", mapped=i != 3)  # one unmapped host: some page comes back short
    assert await client.mapped_hosts(page_size=2) == {"h0", "h1", "h2", "h4", "h5", "h6"}
    calls = fake.calls("GET", "/v2.1/os-hypervisors/detail")
    assert {c.microversion for c in calls} == {"2.88"}
    assert len(calls) >= 4  # at least three pages of up to 2, then the empty one
    assert "marker" not in calls[0].query
    assert all("marker" in c.query for c in calls[1:])
    assert all(c.query["limit"] == "2" for c in calls)


async def test_mapped_hosts_gives_up_after_100_pages(fake: FakeOpenStack, client: ComputeClient) -> None:
    for i in range(101):
        fake.add_compute(f"h{i}")
    with pytest.raises(ComputeAPIError, match="100 pages"):
        await client.mapped_hosts(page_size=1)


async def test_count_servers_uses_the_admin_host_filter(fake: FakeOpenStack, client: ComputeClient) -> None:
    fake.add_compute("n1", servers=3)
    fake.add_compute("n2")
    assert await client.count_servers("n1") == 3
    assert await client.count_servers("n2") == 0
    assert fake.calls("GET", "/v2.1/servers")[0].query == {"all_tenants": "1", "host": "n1"}


async def test_aggregates_create_mark_list_delete(fake: FakeOpenStack, client: ComputeClient) -> None:
    zone = await client.create_aggregate("az1", "az1")
    plain = await client.create_aggregate("tenant_filter_tests", "")
    assert fake.calls("POST", "/v2.1/os-aggregates")[1].body == {"aggregate": {"name": "tenant_filter_tests"}}
    await client.set_aggregate_metadata(zone.id, {"c5c3.io:nova": "ns/nova"})
    listed = {a.name: a for a in await client.list_aggregates()}
    assert listed["az1"].availability_zone == "az1"
    assert listed["az1"].metadata["c5c3.io:nova"] == "ns/nova"
    assert listed["tenant_filter_tests"].availability_zone == ""  # JSON null
    with pytest.raises(AggregateExists):
        await client.create_aggregate("az1", "az1")
    assert await client.delete_aggregate(plain.id) is DeleteOutcome.DELETED
    assert await client.delete_aggregate(plain.id) is DeleteOutcome.GONE


async def test_http_errors_carry_method_path_code_and_a_fixed_phrase(
    fake: FakeOpenStack, client: ComputeClient
) -> None:
    fake.set_fault("error", api="nova")
    with pytest.raises(ComputeAPIError) as err:
        await client.list_aggregates()
    assert err.value.status == 500
    assert str(err.value) == "GET /v2.1/os-aggregates: HTTP 500 Internal Server Error"


async def test_nova_unreachable_is_status_0(fake: FakeOpenStack, client: ComputeClient) -> None:
    await fake.go_offline("nova")
    with pytest.raises(ComputeAPIError) as err:
        await client.list_services()
    assert err.value.status == 0


async def test_forbidden_without_admin(fake: FakeOpenStack) -> None:
    fake.add_user("member", "pw", roles=("member",))
    c = await ComputeClient.connect(
        Credentials(fake.keystone_url, "member", "pw", "service", "Default", "Default"), fake.nova_url
    )
    with pytest.raises(ComputeAPIError) as err:
        await c.list_services()
    assert err.value.status == 403


async def test_neither_password_nor_token_reaches_a_log_even_at_debug(
    fake: FakeOpenStack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.add_compute("n1")
    c = await ComputeClient.connect(creds(fake), fake.nova_url)
    await c.list_services()
    await c.disable_service(fake.service_by_host("n1").uuid, "reason")  # type: ignore[union-attr]
    tokens = list(fake.tokens)
    assert tokens
    assert PASSWORD not in caplog.text
    assert all(t not in caplog.text for t in tokens)
    assert PASSWORD not in repr(creds(fake))
