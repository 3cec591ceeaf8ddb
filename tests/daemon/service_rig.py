"""The in-process rig of the daemon's TableService tests: the rules, a start record, and inputs
applied in one loop turn followed by their group commit."""
from __future__ import annotations

import asyncio
from pathlib import Path

from cardd.daemon.tracker_service import TableService
from cardd.journal import KIND_START, Entry
from devices.game.rules import load_rules
from devices.tracker.inputs import TableInput

RULES = load_rules(Path(__file__).resolve().parents[2] / "rules" / "casino-000.toml")


def start() -> Entry:
    return Entry(kind=KIND_START, reason="TEST_START", source="test", data={})


async def turn(service: TableService, *inputs: TableInput) -> None:
    """Inputs applied in one loop turn, then their group commit."""
    for inp in inputs:
        service.apply(inp)
    await asyncio.sleep(0)
