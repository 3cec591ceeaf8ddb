"""The hub of live changes (cardd/floor/stream.py): ids, the ring, resuming, waiting."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

from cardd.floor.stream import Hub
from tests.support.aio import run


def ids(hub: Hub, last_id: int) -> list[int]:
    changes = hub.since(last_id)
    assert changes is not None, f"{last_id} needs a snapshot"
    return [c.id for c in changes]


def test_ids_increase_by_one_from_the_first():
    hub = Hub(first_id=100)
    assert hub.last_id == 99
    assert [hub.publish("table", {"n": n}) for n in range(3)] == [100, 101, 102]
    assert hub.last_id == 102


def test_a_new_hub_starts_above_every_id_an_earlier_one_gave():
    earlier = Hub()
    last = max(earlier.publish("alarm", {}) for _ in range(1000))
    time.sleep(0.002)  # 1,000 changes in 2 ms or more: under the million a second the ids allow
    later = Hub()
    assert later.publish("alarm", {}) > last
    assert later.since(last) is None, "an id of an earlier run is unknown, not a place in this one"


def test_since_gives_exactly_the_changes_after_an_id():
    hub = Hub(first_id=1)
    for n in range(5):
        hub.publish("records", {"n": n})
    assert ids(hub, 2) == [3, 4, 5]
    assert [c.data for c in hub.since(3) or []] == [{"n": 3}, {"n": 4}]
    assert hub.since(5) == []
    assert ids(hub, 0) == [1, 2, 3, 4, 5], "0: before the first change, all of them"


@pytest.mark.parametrize("last_id", [None, 6, 10**12, -1])
def test_since_an_unknown_id_needs_a_snapshot(last_id):
    hub = Hub(first_id=1)
    for _ in range(5):
        hub.publish("table", {})
    assert hub.since(last_id) is None


def test_since_an_id_the_ring_has_dropped_needs_a_snapshot():
    hub = Hub(capacity=3, first_id=1)
    for _ in range(6):
        hub.publish("table", {})
    assert ids(hub, 3) == [4, 5, 6], "the ring holds 4..6: 3 is the oldest resumable id"
    assert hub.since(2) is None, "change 3 is gone: a client at 2 would miss it"


def test_a_kind_not_known_is_refused():
    with pytest.raises(ValueError, match="the kinds are table, alarm, records"):
        Hub().publish("tables", {})


def test_wait_returns_at_once_when_changes_are_already_there():
    hub = Hub(first_id=1)
    hub.publish("table", {"a": 1})
    assert [c.id for c in run(hub.wait(0, timeout=60))] == [1]


def test_wait_wakes_on_a_change_published_from_another_thread():
    hub = Hub(first_id=1)

    async def scenario():
        waiting = asyncio.create_task(hub.wait(hub.last_id, timeout=60))
        while hub.waiting == 0:
            await asyncio.sleep(0)
        threading.Thread(target=hub.publish, args=("alarm", {"id": 7})).start()
        changes = await waiting
        return changes

    changes = run(scenario())
    assert [(c.id, c.kind, c.data) for c in changes] == [(1, "alarm", {"id": 7})]
    assert hub.waiting == 0


def test_wait_gives_nothing_after_its_timeout():
    hub = Hub(first_id=1)
    assert run(hub.wait(hub.last_id, timeout=0.01)) == []
    assert hub.waiting == 0


def test_a_cancelled_waiter_is_forgotten():
    hub = Hub(first_id=1)

    async def scenario():
        waiters = [asyncio.create_task(hub.wait(hub.last_id, timeout=60)) for _ in range(3)]
        while hub.waiting < 3:
            await asyncio.sleep(0)
        for task in waiters:
            task.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)

    run(scenario())
    assert hub.waiting == 0
    hub.publish("table", {})  # nothing left to wake
