"""The one identity tracker (same unit, rebooted, replaced) and the one staleness detector
(an injected clock; each transition reported once)."""
from __future__ import annotations

from dataclasses import replace

from firmware_bridge.identity import IdentityTracker, Verdict
from firmware_bridge.messages import DeviceRole, Ident
from firmware_bridge.staleness import Staleness

from tests.support.recorders import FakeClock

SHOE = Ident(DeviceRole.SHOE, "OS-1", "SHOE0001", "1.0.0", 1, 0, 0x1001)


def test_the_first_ident_is_first_then_the_same_boot_is_the_same_unit():
    tracker = IdentityTracker()
    first = tracker.observe(SHOE)
    assert first.verdict is Verdict.FIRST and first.replaced is None and first.rebooted is None
    again = tracker.observe(replace(SHOE, firmware_version="1.1.0"))  # a new firmware, same boot: same unit
    assert again.verdict is Verdict.SAME and again.previous == SHOE and tracker.ident is not None and tracker.ident.firmware_version == "1.1.0"


def test_a_new_boot_id_is_a_reboot_naming_both_ids():
    tracker = IdentityTracker(SHOE)
    seen = tracker.observe(replace(SHOE, boot_id=0x2002))
    assert seen.verdict is Verdict.REBOOTED and seen.rebooted == "boot id 0x00001001 -> 0x00002002"
    assert seen.replaced is None


def test_another_unit_is_replaced_even_with_the_same_boot_id_and_judging_remembers_nothing():
    tracker = IdentityTracker(SHOE)
    other = replace(SHOE, serial="SHOE0002")
    assert tracker.judge(other).verdict is Verdict.REPLACED and tracker.ident == SHOE  # judge() only looks
    seen = tracker.observe(replace(other, role=DeviceRole.SHUFFLER, boot_id=0x3003))
    assert seen.verdict is Verdict.REPLACED  # replaced wins over rebooted, and both are told
    assert seen.replaced == "shoe OS-1 SHOE0001 -> shuffler OS-1 SHOE0002"
    assert seen.rebooted == "boot id 0x00001001 -> 0x00003003"


def test_never_heard_is_never_stale():
    clock = FakeClock(100.0)
    liveness = Staleness(clock, after_s=3.0)
    clock.now += 1000
    assert not liveness.is_stale() and not liveness.check() and liveness.silent_for() == 0.0


def test_stale_once_per_silence_and_fresh_once_when_heard_again():
    clock = FakeClock(100.0)
    liveness = Staleness(clock, after_s=3.0)
    liveness.restart()
    clock.now += 3.0
    assert not liveness.check()  # exactly after_s is not yet silent too long
    clock.now += 0.5
    assert liveness.check() and liveness.stale and liveness.silent_for() == 3.5
    clock.now += 10
    assert not liveness.check() and liveness.stale  # reported once
    assert liveness.heard() and not liveness.stale  # the end of the silence, once
    assert not liveness.heard()
    liveness.forget()
    clock.now += 10
    assert not liveness.check() and liveness.last_heard is None
