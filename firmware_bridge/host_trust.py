"""What a host speaking protocol 2.0 trusts, and how it notices a device it must stop trusting.

:class:`HostTrust` is given to a :class:`~firmware_bridge.session.DeviceSession` (through its
:class:`~firmware_bridge.session.SessionConfig`): the host's identity key and its trust store
(the key enrolled for a role, model and serial). :class:`TagWatch` counts the frames whose tag
failed since the last one that passed: a damaged frame fails its tag too (a tagged frame
carries no CRC), so one bad tag is the link's business (it is resent); a run of them, with no
good frame between, is a forger or a replayed capture, and the device is refused
(docs/protocol.md §8.1).
"""
from __future__ import annotations

from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from firmware_bridge.errors import DeviceNotTrusted
from firmware_bridge.framing2 import Decoder2Stats
from firmware_bridge.handshake2 import EnrolledKey, Ident2, TrustFailure
from firmware_bridge.messages import DeviceRole, Ident

#: bad tags in a row that refuse a device: on a line that damages one frame in five, sixteen in
#: a row come about once in 10^11 frames; a forged or replayed stream reaches it at once
TAG_FAILURES_REFUSED = 16


@dataclass(frozen=True, slots=True)
class HostTrust:
    """The host's side of protocol 2.0: its identity key and the key enrolled for a unit
    (role, model, serial), or None. ``tag_failures_refused``: :data:`TAG_FAILURES_REFUSED`."""

    identity: Ed25519PrivateKey
    enrolled_key: EnrolledKey
    tag_failures_refused: int = TAG_FAILURES_REFUSED


def ident_of(ident2: Ident2) -> Ident:
    """The IDENT2's unit as the rest of the session knows a device (its protocol 2.0 in it);
    a role the host does not know is a HandshakeError's business, refused before this."""
    return Ident(DeviceRole[ident2.role.upper()], ident2.model, ident2.serial, ident2.firmware,
                 ident2.version[0], ident2.version[1], ident2.boot_id)


class TagWatch:
    """Bad tags (and replayed counters) since the last frame whose tag verified, over one
    session's links: a link reset in the middle of a forged stream does not start it over."""

    def __init__(self, stats: Decoder2Stats, limit: int) -> None:
        self._stats, self.limit = stats, limit
        self._bad_seen = self._good_seen = 0
        self.in_a_row = 0

    def check(self) -> DeviceNotTrusted | None:
        """After a chunk was read: the refusal when the run reached the limit, else None."""
        stats = self._stats
        bad, good = stats.tag_errors + stats.replayed, stats.tagged_frames
        if bad == self._bad_seen:
            if good != self._good_seen:
                self._good_seen, self.in_a_row = good, 0
            return None
        new_bad = bad - self._bad_seen
        self.in_a_row = new_bad if good != self._good_seen else self.in_a_row + new_bad
        self._bad_seen, self._good_seen = bad, good
        return self.refusal() if self.in_a_row >= self.limit else None

    def refusal(self) -> DeviceNotTrusted:
        stats = self._stats
        return DeviceNotTrusted(TrustFailure.BAD_TAG, f"{self.in_a_row} frames in a row failed their "
                                f"authentication tag ({stats.tag_errors} bad tags, {stats.replayed} replayed "
                                f"counters on this link): forged frames or a replayed capture")
