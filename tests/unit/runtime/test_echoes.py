"""The echo of a controller's own write wakes every key but the writer's; nothing else is filtered."""

from __future__ import annotations

from typing import Any

from nova_operator.runtime.echoes import OwnWrites
from nova_operator.runtime.handlers import enqueue_for_object, enqueue_for_owner, enqueue_mapped
from nova_operator.runtime.predicates import ignore_status_only
from nova_operator.runtime.request import Request

NOVA = Request("ns", "nova")
OTHER = Request("ns", "other")


def child(rv: str, uid: str = "c1", owner: str = "nova", **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "child",
            "namespace": "ns",
            "uid": uid,
            "resourceVersion": rv,
            "ownerReferences": [
                {
                    "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
                    "kind": "Nova",
                    "name": owner,
                    "controller": True,
                }
            ],
            **extra,
        }
    }


def owner_handler(writes: OwnWrites, keys: list[Request]) -> Any:
    return enqueue_for_owner(keys.append, group="nova.openstack.c5c3.io", kind="Nova", echoes=writes)


def test_the_add_and_the_update_a_write_returned_do_not_wake_the_writer() -> None:
    writes, keys = OwnWrites(), []
    h = owner_handler(writes, keys)
    writes.wrote(child("10"), NOVA)
    h.on_add(child("10"))
    writes.wrote(child("12"), NOVA)
    h.on_update(child("10"), child("12"))
    assert keys == []


def test_every_other_version_wakes_the_writer() -> None:
    writes, keys = OwnWrites(), []
    h = owner_handler(writes, keys)
    writes.wrote(child("10"), NOVA)
    h.on_update(child("10"), child("11"))  # somebody else's write after ours
    h.on_add(child("9"))  # an older version (a relist that had not seen our write)
    h.on_add(child("10", uid="c2"))  # another object that happens to share the version
    assert keys == [NOVA, NOVA, NOVA]


def test_a_resync_of_the_written_version_still_wakes_the_writer() -> None:
    writes, keys = OwnWrites(), []
    h = owner_handler(writes, keys)
    writes.wrote(child("10"), NOVA)
    h.on_update(child("10"), child("10"))
    assert keys == [NOVA]


def test_only_the_writers_key_is_left_out_of_an_echo() -> None:
    writes, keys = OwnWrites(), []
    both = enqueue_mapped(keys.append, lambda o: [NOVA, OTHER], echoes=writes)
    writes.wrote(child("10"), NOVA)
    both.on_add(child("10"))
    assert keys == [OTHER]


def test_a_deletion_always_wakes_and_forgets_the_write() -> None:
    writes, keys = OwnWrites(), []
    h = owner_handler(writes, keys)
    writes.wrote(child("10"), NOVA)
    h.on_delete(child("10"))
    assert keys == [NOVA]
    assert len(writes) == 0
    h.on_add(child("10"))  # recreated with a version we never wrote
    assert keys == [NOVA, NOVA]


def test_the_table_keeps_one_entry_per_object_the_latest_write() -> None:
    writes, keys = OwnWrites(), []
    h = owner_handler(writes, keys)
    writes.wrote(child("10"), NOVA)
    writes.wrote(child("12"), NOVA)
    assert len(writes) == 1
    h.on_update(child("9"), child("10"))  # the first write's echo, overtaken by the second write
    assert keys == [NOVA]


def test_an_object_without_uid_or_version_is_not_recorded() -> None:
    writes = OwnWrites()
    writes.wrote({"metadata": {"name": "x"}}, NOVA)
    writes.wrote({"metadata": {"uid": "u"}}, NOVA)
    assert len(writes) == 0


def test_an_annotation_patch_of_the_primary_is_filtered_only_for_itself() -> None:
    writes, keys = OwnWrites(), []
    h = enqueue_for_object(keys.append, ignore_status_only, echoes=writes)
    before = {"metadata": {"name": "nova", "namespace": "ns", "uid": "n", "resourceVersion": "5"}}
    after = {"metadata": {**before["metadata"], "resourceVersion": "6", "annotations": {"claim": "job"}}}
    writes.wrote(after, NOVA)
    h.on_update(before, after)
    assert keys == []
    edited = {"metadata": {**after["metadata"], "resourceVersion": "7", "annotations": {"user": "edit"}}}
    h.on_update(after, edited)
    assert keys == [NOVA]


def test_during_the_writers_pass_an_event_waits_for_the_pass_to_end() -> None:
    """The watch can deliver a write's echo before the pass has read the write's response."""
    busy: set[Request] = set()
    writes, keys = OwnWrites(busy=busy.__contains__), []
    h = owner_handler(writes, keys)
    busy.add(NOVA)
    h.on_add(child("10"))  # the echo, before the pass recorded its write
    writes.wrote(child("10"), NOVA)  # the response arrives
    assert keys == []
    assert writes.settle(NOVA) is False  # it was the pass's own write: no further pass
    busy.discard(NOVA)
    assert writes.settle(NOVA) is False  # settled once


def test_an_event_during_the_pass_that_is_not_its_write_asks_for_one_more_pass() -> None:
    busy: set[Request] = {NOVA}
    writes, keys = OwnWrites(busy=busy.__contains__), []
    h = owner_handler(writes, keys)
    h.on_add(child("10"))  # our write's echo
    h.on_update(child("10"), child("11"))  # then somebody else's change, during the same pass
    writes.wrote(child("10"), NOVA)
    assert keys == []
    assert writes.settle(NOVA) is True


def test_a_deferred_event_for_another_key_is_not_held() -> None:
    busy: set[Request] = {NOVA}
    writes, keys = OwnWrites(busy=busy.__contains__), []
    both = enqueue_mapped(keys.append, lambda o: [NOVA, OTHER], echoes=writes)
    both.on_add(child("10"))
    assert keys == [OTHER]  # OTHER is not in a pass: enqueued at once
    assert writes.settle(NOVA) is True  # nothing recorded: the writer gets its pass


def test_without_a_record_a_handler_behaves_as_before() -> None:
    keys: list[Request] = []
    h = enqueue_for_owner(keys.append, group="nova.openstack.c5c3.io", kind="Nova")
    h.on_add(child("10"))
    h.on_update(child("10"), child("11"))
    h.on_delete(child("11"))
    assert keys == [NOVA, NOVA, NOVA]


def test_a_deleted_writers_entries_are_forgotten() -> None:
    # Issue 26 item 13: entries of objects whose deletion is never seen outlived their writer.
    from nova_operator.kube.resources import NOVAS
    from nova_operator.metrics import Metrics
    from nova_operator.runtime.controller import Controller
    from nova_operator.runtime.informer import Informer

    class Idle:
        async def reconcile(self, request: Request) -> Any:
            return None

    novas = Informer(None, NOVAS)  # type: ignore[arg-type]  # fed by hand, never run
    ctl = Controller("test", Idle(), metrics=Metrics())
    ctl.watch_primary(novas)
    for i in range(200):  # 200 Nova lifecycles, four derived Secrets each
        nova = {"metadata": {"name": f"nova-{i}", "namespace": "ns", "uid": f"n{i}", "resourceVersion": "1"}}
        novas._apply("ADDED", nova)
        for j in range(4):
            ctl.own_writes.wrote(child("5", uid=f"s{i}-{j}", owner=f"nova-{i}"), Request("ns", f"nova-{i}"))
        novas._apply("DELETED", nova)
    assert len(ctl.own_writes) == 0
    other = Request("ns", "alive")
    ctl.own_writes.wrote(child("5", uid="kept"), other)
    novas._apply("DELETED", {"metadata": {"name": "gone", "namespace": "ns", "resourceVersion": "2"}})
    assert len(ctl.own_writes) == 1  # another key's deletion leaves it alone
