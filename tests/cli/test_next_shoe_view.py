"""What waits for the next shoe, as STATE says it (built from a real table) and as cardctl's status
and watch views show it: a shuffle reported while a round of a shoe refused mid-round is still on
the table waits, held, until a supervisor decides the round."""
from __future__ import annotations

import io
from collections import deque

from rich.console import Console

from cardd.cli.table import render_status
from cardd.cli.watch import view
from cardd.daemon.state import table_state
from devices.events import Role
from devices.tracker.inputs import DeviceMessage, Redeal
from firmware_bridge.messages import ShoeLoaded

from tests.table.table_rig import RULE_FILES, TableRig

HELD = ("round 1 of the refused shoe is still on the table: a supervisor re-deals it with redeal or voids the shoe "
        "with void_shoe before the next shoe")
#: as cardctl shows it
HELD_IN_CARDCTL_WORDS = HELD.replace("with redeal", "with cardctl round redeal").replace("void_shoe", "cardctl shoe void")


def shown(renderable_or_state, status: bool) -> str:
    out = Console(file=io.StringIO(), width=400, color_system=None, soft_wrap=True)
    if status:
        render_status(out, "cardd test", renderable_or_state)
    else:
        out.print(view("cardd test", renderable_or_state, deque()))
    return out.file.getvalue()  # type: ignore[attr-defined]


def test_a_held_next_shoe_is_in_state_status_and_watch_and_goes_with_the_supervisors_decision() -> None:
    rig = TableRig.from_file(RULE_FILES[0])
    links = {"shuffler": True, "shoe-reader": True}
    assert "next shoe" not in shown(table_state(rig.table, links, 1), status=True)
    rig.bets(1)
    rig.deal("TH 5D 7C")
    rig.table.apply(DeviceMessage("shoe-reader", ShoeLoaded(0)))  # reloaded mid-round: refused
    rig.shuffle_ok()  # the next shoe's three reports: they wait
    state = table_state(rig.table, links, 2)
    assert (state["shoe"]["next_shoe_waiting"], state["shoe"]["next_shoe_held"]) == (3, HELD)
    assert f"next shoe held (3 device reports of it wait): {HELD_IN_CARDCTL_WORDS}" in shown(state, status=True).splitlines()
    assert "NEXT SHOE HELD" in shown(state, status=False)
    rig.table.apply(Redeal("sup-1", Role.SUPERVISOR))
    state = table_state(rig.table, links, 3)
    assert (state["shoe"]["state"], state["shoe"]["next_shoe_waiting"], state["shoe"]["next_shoe_held"]) == (
        "verified", 0, None)
    assert "next shoe" not in shown(state, status=True) and "NEXT SHOE" not in shown(state, status=False)


def test_a_shuffle_waiting_for_the_shoe_in_play_to_end_is_shown_plainly() -> None:
    rig = TableRig.from_file(RULE_FILES[0])
    rig.shuffle_ok()  # the next shoe shuffled while this one is dealt: normal, it waits for this shoe's end
    state = table_state(rig.table, {"shuffler": True, "shoe-reader": True}, 1)
    assert (state["shoe"]["next_shoe_waiting"], state["shoe"]["next_shoe_held"]) == (3, None)
    assert "next shoe: 3 device reports of it wait for this shoe's end" in shown(state, status=True).splitlines()
    assert "NEXT SHOE HELD" not in shown(state, status=False)
