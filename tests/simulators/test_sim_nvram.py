"""simulators/nvram.py: what a simulated device keeps across a power cut, written at each change
and read back into a new device of the same role and serial (``cardd --simulate --state-dir``)."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.cards import Card
from firmware_bridge.messages import CardRead, DeviceState, ShoeLoaded
from simulators import nvram
from simulators.shoe import SimulatedShoe
from simulators.shuffler import SimulatedShuffler
from simulators.stack import full_shoe


def _shoe_dealt(path: Path, cards: list[Card | None], dealt: int) -> SimulatedShoe:
    """A shoe kept in ``path`` whose events go into its store as an endpoint's would, ``dealt`` cards out."""
    shoe = SimulatedShoe()
    nvram.keep(shoe, path)

    def emit(msg: object) -> None:
        shoe.events.add(msg)  # type: ignore[arg-type]
        shoe.on_change()

    shoe.attach(emit)

    async def run() -> None:
        shoe.load(cards, cut_at=40)
        shoe.deal(dealt)
        while shoe.index < dealt:
            await asyncio.sleep(0)
        shoe.close()

    asyncio.run(run())
    return shoe


def test_a_shoe_comes_back_with_its_stack_its_cut_card_and_its_unconfirmed_events(tmp_path: Path) -> None:
    path = tmp_path / "shoe.nvram.json"
    cards: list[Card | None] = list(full_shoe(1))
    cards[10] = None  # a foreign card: unreadable, kept as such
    before = _shoe_dealt(path, cards, 5)
    before.events.confirm(3)  # the host journaled up to event 3 (the load and two reads)
    nvram.save(before, path)

    after = SimulatedShoe()
    assert nvram.restore(after, path)
    assert after.index == 5 and after.cut_at == 40 and after.cards_held() == 47
    assert after.device_state is DeviceState.DEALING and after.status().cards_held == 47
    assert after.unload() == cards[5:]  # the same cards in the same order, the foreign one where it was
    assert (after.events.last_index, after.events.confirmed) == (6, 3)
    assert [after.events.get(i) for i in (4, 5, 6)] == [before.events.get(i) for i in (4, 5, 6)]
    fourth = after.events.get(4)
    assert isinstance(fourth, CardRead) and fourth.index == 3


def test_each_event_is_kept_before_it_is_sent_and_the_stub_taken_out_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "shoe.nvram.json"
    shoe = _shoe_dealt(path, list(full_shoe(1)), 2)  # saved at each event: nothing saved by hand
    kept = SimulatedShoe()
    nvram.restore(kept, path)
    assert (kept.index, kept.cards_held(), kept.events.last_index) == (2, 50, 3)
    assert isinstance(kept.events.get(1), ShoeLoaded)
    shoe.unload()  # by hand: written too
    empty = SimulatedShoe()
    nvram.restore(empty, path)
    assert empty.cards_held() == 0 and empty.device_state is DeviceState.EMPTY


def test_a_shuffler_comes_back_holding_its_shuffled_stack(tmp_path: Path) -> None:
    path = tmp_path / "shuffler.nvram.json"
    shuffler = SimulatedShuffler()
    nvram.keep(shuffler, path)
    shuffler._output = list(full_shoe(2))  # a finished shuffle (what _shuffle leaves)
    nvram.save(shuffler, path)
    again = SimulatedShuffler()
    assert nvram.restore(again, path)
    assert again.device_state is DeviceState.READY and again.unload() == list(full_shoe(2))


def test_a_damaged_file_or_another_devices_is_one_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "shoe.nvram.json"
    assert not nvram.restore(SimulatedShoe(), path)  # none yet: a device from the factory
    path.write_text("{not json")
    with pytest.raises(nvram.NvramError, match=f"^{path}: cannot be read back"):
        nvram.restore(SimulatedShoe(), path)
    nvram.save(SimulatedShoe(serial="SHOE0002"), path)
    with pytest.raises(nvram.NvramError, match="another device's memory \\(shoe SHOE0002\\)"):
        nvram.restore(SimulatedShoe(), path)
    nvram.save(SimulatedShoe(), path)
    path.write_text(path.read_text().replace('"stack":[]', '"stack":["ZZ"]'))
    with pytest.raises(nvram.NvramError, match=f"^{path}: stack: "):
        nvram.restore(SimulatedShoe(), path)


def test_a_memory_that_cannot_be_written_is_logged_and_the_device_goes_on(tmp_path: Path) -> None:
    shoe = SimulatedShoe()
    assert not nvram.keep(shoe, tmp_path / "gone" / "shoe.nvram.json")  # its directory is not there
    shoe.on_change()  # no exception into the device's loop (a card would stop there)
    with pytest.raises(FileNotFoundError):
        nvram.save(shoe, tmp_path / "gone" / "shoe.nvram.json")  # what the hook caught


def test_the_identity_key_is_kept_across_a_power_cut_and_a_factory_reset(tmp_path: Path) -> None:
    from firmware_bridge.handshake2 import raw_public_key

    path = tmp_path / "shuffler.nvram.json"
    before = SimulatedShuffler()
    nvram.save(before, path)
    assert path.stat().st_mode & 0o777 == 0o600  # a private key in it: its owner's alone
    after = SimulatedShuffler()
    assert raw_public_key(after.identity_key.public_key()) != raw_public_key(before.identity_key.public_key())
    assert nvram.restore(after, path)
    assert raw_public_key(after.identity_key.public_key()) == raw_public_key(before.identity_key.public_key())
    after.reset()
    assert raw_public_key(after.identity_key.public_key()) == raw_public_key(before.identity_key.public_key())


def test_a_memory_without_an_identity_key_keeps_the_devices_own(tmp_path: Path) -> None:
    import json

    path = tmp_path / "shuffler.nvram.json"
    nvram.save(SimulatedShuffler(), path)
    data = json.loads(path.read_text())
    del data["identity_key"]
    path.write_text(json.dumps(data))
    device = SimulatedShuffler()
    own = device.identity_key
    assert nvram.restore(device, path) and device.identity_key is own
    data["identity_key"] = "00ff"
    path.write_text(json.dumps(data))
    with pytest.raises(nvram.NvramError, match="identity_key is 2 bytes"):
        nvram.restore(SimulatedShuffler(), path)
