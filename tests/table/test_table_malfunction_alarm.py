"""A shuffler malfunction during a round: the round's hold ends with the supervisor's decision, the
malfunction's own alarm does not (REQUIREMENTS section 2: an error stays until a recheck clears it;
a malfunctioning shuffler forces a reshuffle), and its text says both."""
from __future__ import annotations

import pytest

from devices.events import Reason, Role
from devices.errors import OverrideRefused, TableError
from devices.tracker.inputs import ClearAlarm, DeviceMessage, OpenRound, Redeal, Resume
from firmware_bridge.messages import Fault, FaultCleared, FaultCode

from tests.table.table_rig import RULES_DIR, TableRig

pytestmark = pytest.mark.timeout(30)
RULES = RULES_DIR / "casino-000.toml"  # an automatic shuffler: its fault holds the round


@pytest.mark.parametrize("decision", ["resume", "redeal"])
def test_the_malfunction_alarm_says_it_stays_after_the_rounds_decision_and_it_does(decision: str) -> None:
    rig = TableRig.from_file(RULES)
    rig.bets(1)
    rig.deal("TH 9S 5D")
    rig.table.apply(DeviceMessage("shuffler", Fault(FaultCode.JAM, 17, "stack jam")))
    [event] = rig.find(Reason.SHUFFLER_MALFUNCTION)
    assert event.message == ("shuffler malfunction (jam) during round 1: round held; a supervisor re-deals it "
                             "(redeal) or continues it (resume), and clears this alarm with clear_alarm once the "
                             "shuffler is checked (the round's decision leaves it open)")
    assert event.data == {"fault": "JAM", "round": 1}  # the round too: `cardctl log --round 1` lists it
    rig.table.apply(DeviceMessage("shuffler", FaultCleared(FaultCode.JAM)))
    rig.table.apply(Resume("sup-1", Role.SUPERVISOR) if decision == "resume" else Redeal("sup-1", Role.SUPERVISOR))
    [alarm] = [a for a in rig.table.alarms.open.values() if a.reason == Reason.SHUFFLER_MALFUNCTION]
    assert alarm.message == event.message and "ROUND_HELD" not in rig.table.alarms.reasons()
    assert alarm.round == 1  # named with its round, yet not closed by the round's decision
    rig.table.apply(ClearAlarm(alarm.id, "sup-1", Role.SUPERVISOR))
    assert alarm.id not in rig.table.alarms.open


def test_a_device_in_fault_is_named_in_the_tables_words_with_what_ends_the_fault() -> None:
    rig = TableRig.from_file(RULES)
    rig.bets(1)
    rig.deal("TH 9S 5D")
    rig.table.apply(DeviceMessage("shuffler", Fault(FaultCode.JAM, 17, "stack jam")))
    in_fault = ("the shuffler is in fault (jam): wait for the device to clear it, or a technician clears it with "
                "clear_fault once it is fixed")
    with pytest.raises(OverrideRefused) as refused:
        rig.table.apply(Resume("sup-1", Role.SUPERVISOR))
    assert refused.value.why == f"{in_fault}: continue once every device is back, or void the round with redeal"
    rig.table.apply(Redeal("sup-1", Role.SUPERVISOR))
    with pytest.raises(TableError) as refused_round:
        rig.table.apply(OpenRound())
    assert str(refused_round.value) == f"{in_fault} (play waits for it)"
