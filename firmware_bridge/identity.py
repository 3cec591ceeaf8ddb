"""Which unit answers on a port, and whether it restarted: the one place that decides.

A swapped device must be reported as such, never passed off as a reboot of the one before; a
new boot id means the device lost its state. :class:`IdentityTracker` remembers the last IDENT
and judges each new one; the device connection keeps one per device across sessions and
unplugs, and the host's device models can keep their own (it needs nothing but IDENTs).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from firmware_bridge.messages import Ident


class Verdict(enum.StrEnum):
    FIRST = "first"  # nothing known before: the first IDENT
    SAME = "same"  # the same unit, still running the same boot
    REBOOTED = "rebooted"  # the same unit, restarted (a new boot id): its state is gone
    REPLACED = "replaced"  # another unit (role, model or serial); it may also carry a new boot id


@dataclass(frozen=True, slots=True)
class Observation:
    """What one IDENT means against the one before (``previous`` None: the first)."""

    previous: Ident | None
    ident: Ident

    @property
    def replaced(self) -> str | None:
        """What changed when another unit answers (None: the same one, or the first)."""
        p, i = self.previous, self.ident
        if p is None or (p.role, p.model, p.serial) == (i.role, i.model, i.serial):
            return None
        return f"{p.role.name.lower()} {p.model} {p.serial} -> {i.role.name.lower()} {i.model} {i.serial}"

    @property
    def rebooted(self) -> str | None:
        """The boot ids when the boot id changed (None: the same boot, or the first)."""
        p, i = self.previous, self.ident
        if p is None or p.boot_id == i.boot_id:
            return None
        return f"boot id {p.boot_id:#010x} -> {i.boot_id:#010x}"

    @property
    def verdict(self) -> Verdict:
        if self.previous is None:
            return Verdict.FIRST
        if self.replaced:
            return Verdict.REPLACED
        return Verdict.REBOOTED if self.rebooted else Verdict.SAME


class IdentityTracker:
    """The last IDENT heard from one device, and what each new one means."""

    def __init__(self, ident: Ident | None = None) -> None:
        self.ident = ident

    def judge(self, ident: Ident) -> Observation:
        """What ``ident`` would mean, without remembering it."""
        return Observation(self.ident, ident)

    def observe(self, ident: Ident) -> Observation:
        """Judge ``ident`` and remember it as the device's latest."""
        observation, self.ident = Observation(self.ident, ident), ident
        return observation
