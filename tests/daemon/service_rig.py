"""The in-process rig of the daemon's TableService tests: the rules, a start record, and inputs
applied in one loop turn followed by their group commit."""
from __future__ import annotations

import asyncio

from cardd.config import RULES_DIR
from cardd.daemon.tracker_service import TableService
from cardd.journal import KIND_START, Entry
from core.cards import shoe_composition
from devices.game.rules import load_rules
from devices.tracker.inputs import DeviceMessage, LinkUp, TableInput
from firmware_bridge.messages import DeckCheckResult, DeviceRole, Ident, ShuffleComplete, ShuffleProgress

RULES = load_rules(RULES_DIR / "casino-000.toml")


def start() -> Entry:
    return Entry(kind=KIND_START, reason="TEST_START", source="test", data={})


async def turn(service: TableService, *inputs: TableInput) -> None:
    """Inputs applied in one loop turn, then their group commit."""
    for inp in inputs:
        service.apply(inp)
    await asyncio.sleep(0)


async def linked_and_shuffled(service: TableService) -> None:
    """Both simulated devices linked and identified, then a shoe shuffled and its decks checked."""
    for role, name in ((DeviceRole.SHUFFLER, "shuffler"), (DeviceRole.SHOE, "shoe-reader")):
        await turn(service, LinkUp(name), DeviceMessage(name, Ident(role, "sim", f"{name}-1", "1.0.0", 1, 0, 7)))
    composition = shoe_composition(RULES.decks)
    await turn(service, DeviceMessage("shuffler", ShuffleProgress(0, 0)),
               DeviceMessage("shuffler", ShuffleComplete(sum(composition.values()), composition)),
               DeviceMessage("shuffler", DeckCheckResult(True, RULES.decks, (), (), 0)))
