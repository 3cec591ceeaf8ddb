"""A simulated device's side of protocol 2.0 (docs/protocol.md §7, §8), for an endpoint asked to
speak it: its framing, its answer to HELLO2 and its check of PROOF2, and the attacks its fault
switches stand for (docs/simulators.md, "Protocol 2.0").

Not the default: an endpoint speaks 1.1 unless made with ``protocol2=Protocol2(...)``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import structlog
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from firmware_bridge.errors import DeviceNotTrusted, HandshakeError
from firmware_bridge.framing import FrameKind
from firmware_bridge.framing2 import TAG_LEN, TAGGABLE, TAGGED, Framing2, SessionKeys
from firmware_bridge.handshake2 import HELLO2_TYPE, PROOF2_TYPE, PROTOCOL_2, DeviceHandshake, HostProven

from simulators.device import SimulatedDevice
from simulators.faults import Faults

log = structlog.get_logger(__name__)

#: the handshake's payload types: the endpoint hands these to :class:`DeviceSide`, not to the device
HANDSHAKE_TYPES = frozenset({HELLO2_TYPE, PROOF2_TYPE})
#: tagged frames of a session kept to be sent again in the next one (``replayed_capture``)
CAPTURE_LIMIT = 64


@dataclass(frozen=True, slots=True)
class Protocol2:
    """How the device speaks 2.0: the host key it was enrolled with (None: not yet enrolled;
    another host is proven but gets no firmware or technician command)."""

    enrolled_host_key: bytes | None = None


class SimulatedFraming2(Framing2):
    """The device's 2.0 framing, with the frame-level attacks of its fault switches: every tagged
    frame's tag damaged (``forged_tag``), and the tagged frames of one session kept to be sent
    again in the next (``replayed_capture``)."""

    def __init__(self, faults: Callable[[], Faults]) -> None:
        super().__init__()
        self._faults = faults
        self.capture: list[bytes] = []

    def frame_bytes(self, kind: FrameKind, seq: int, ack: int, payload: bytes) -> bytes:
        raw = super().frame_bytes(kind, seq, ack, payload)
        if self.keys is None or kind not in TAGGABLE or not raw[0] & TAGGED:
            return raw
        if len(self.capture) < CAPTURE_LIMIT:
            self.capture.append(raw)
        if self._faults().forged_tag:
            return raw[:-TAG_LEN] + bytes(b ^ 0x5A for b in raw[-TAG_LEN:])
        return raw


class DeviceSide:
    """One device's handshakes: a new :class:`DeviceHandshake` per HELLO2, its outcome kept."""

    def __init__(self, device: SimulatedDevice, options: Protocol2) -> None:
        self.device = device
        self.options = options
        self._handshake: DeviceHandshake | None = None
        self.proven: HostProven | None = None  # the host of this link, once its PROOF2 verified
        self.refusals = 0  # PROOF2s refused: a rogue host

    @property
    def host_enrolled(self) -> bool:
        """This link's host proved the key the device was enrolled with (``rogue_host``: the
        device was enrolled with another host, so this one is not)."""
        return self.proven is not None and self.proven.host_enrolled and not self.device.faults.rogue_host

    def forget(self) -> None:
        """The link was reset: the session is over."""
        self._handshake = None
        self.proven = None

    def on_hello(self, payload: bytes) -> bytes:
        """The IDENT2 to send, as the device's fault switches make it."""
        faults = self.device.faults
        identity = self.device.identity_key
        serial = self.device.serial
        if faults.unknown_key:  # a device no one enrolled: another serial and a key of its own
            identity, serial = Ed25519PrivateKey.generate(), f"{serial}-NEW"
        elif faults.cloned_serial:  # the enrolled serial, another device's key
            identity = Ed25519PrivateKey.generate()
        self.forget()
        self._handshake = DeviceHandshake(identity, self.device.ROLE.name.lower(), self.device.MODEL, serial,
                                          self.device.firmware_version, self.device.boot_id,
                                          self.options.enrolled_host_key)
        version = (1, 1) if faults.downgrade_offer else PROTOCOL_2
        return self._handshake.on_hello(payload, version=version)

    @property
    def pending_keys(self) -> SessionKeys | None:
        return None if self._handshake is None else self._handshake.pending_keys

    def on_proof(self, payload: bytes) -> HostProven | None:
        """The host proven (None: refused, logged and counted)."""
        if self._handshake is None:
            log.warning("sim_proof_without_hello", device=self.device.serial)
            return None
        try:
            self.proven = self._handshake.on_proof(payload)
        except DeviceNotTrusted as exc:
            keys = self._handshake.pending_keys
            if not self.device.faults.accept_any_proof or keys is None:
                self.refusals += 1
                log.warning("sim_host_refused", device=self.device.serial, error=str(exc))
                return None
            self.proven = HostProven(keys, b"", host_enrolled=False)  # the check skipped: a session all the same
        except HandshakeError as exc:
            self.refusals += 1
            log.warning("sim_host_refused", device=self.device.serial, error=str(exc))
            return None
        return self.proven
