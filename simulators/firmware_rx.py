"""The device side of a firmware transfer: collect chunks, check each CRC-32, and install only an
image whose SHA-256 and Ed25519 signature verify (the check itself is the bridge's
:func:`firmware_bridge.firmware.verify_on_device`, so host and device agree on the format).

A lower version than the running one is refused at BEGIN (the rule is the bridge's
:func:`~firmware_bridge.firmware.downgrade_reason`) unless the host sent FirmwareAllowDowngrade
naming the technician just before; that permission is good for one BEGIN.
"""
from __future__ import annotations

import zlib

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from firmware_bridge.errors import FirmwareError
from firmware_bridge.firmware import FirmwareHeader, downgrade_reason, verify_on_device
from firmware_bridge.messages import (
    FirmwareAbort,
    FirmwareAllowDowngrade,
    FirmwareBegin,
    FirmwareChunk,
    FirmwareCommit,
    FirmwareResult,
    FirmwareStage,
    Message,
)

FIRMWARE_MESSAGES = (FirmwareBegin, FirmwareChunk, FirmwareCommit, FirmwareAbort, FirmwareAllowDowngrade)

#: largest image the simulated device has room for
MAX_IMAGE = 4 * 1024 * 1024


class FirmwareReceiver:
    def __init__(self, public_key: bytes | Ed25519PublicKey | None) -> None:
        self.public_key = public_key
        self._begin: FirmwareBegin | None = None
        self._data = bytearray()
        self.downgrade_allowed_by: str | None = None  # for the next BEGIN only

    def handle(self, msg: Message, *, model: str, running_version: str) -> tuple[FirmwareResult, str | None]:
        """The answer to one firmware message, and the new version when an image is installed."""
        if isinstance(msg, FirmwareAllowDowngrade):
            self.downgrade_allowed_by = msg.technician
            return FirmwareResult(FirmwareStage.ALLOW_DOWNGRADE, True, 0,
                                  f"the next transfer may downgrade: allowed by {msg.technician}"), None
        if isinstance(msg, FirmwareBegin):
            allowed_by, self.downgrade_allowed_by = self.downgrade_allowed_by, None
            return self._on_begin(msg, running_version, allowed_by), None
        if isinstance(msg, FirmwareAbort):
            self._begin, self._data, self.downgrade_allowed_by = None, bytearray(), None
            return FirmwareResult(FirmwareStage.ABORT, True, 0, f"aborted: {msg.reason}"), None
        if self._begin is None:
            stage = FirmwareStage.CHUNK if isinstance(msg, FirmwareChunk) else FirmwareStage.COMMIT
            return FirmwareResult(stage, False, 0, "no transfer in progress: send FirmwareBegin first"), None
        if isinstance(msg, FirmwareChunk):
            return self._on_chunk(msg), None
        assert isinstance(msg, FirmwareCommit)
        return self._on_commit(model)

    def _on_begin(self, msg: FirmwareBegin, running_version: str, allowed_by: str | None) -> FirmwareResult:
        if self.public_key is None:
            return FirmwareResult(FirmwareStage.BEGIN, False, 0, "no firmware public key configured: updates refused")
        if not 0 < msg.total_size <= MAX_IMAGE:
            return FirmwareResult(FirmwareStage.BEGIN, False, 0, f"image size {msg.total_size} not in 1..{MAX_IMAGE}")
        try:  # the header is not verified yet: COMMIT checks its signature, so a lie ends there
            header, _ = FirmwareHeader.parse(msg.header)
        except FirmwareError as exc:
            return FirmwareResult(FirmwareStage.BEGIN, False, 0, f"bad image header: {exc}")
        downgrade = downgrade_reason(running_version, header.version)
        if downgrade is not None and allowed_by is None:
            return FirmwareResult(FirmwareStage.BEGIN, False, 0, f"{downgrade}: refused without FirmwareAllowDowngrade")
        self._begin, self._data = msg, bytearray()
        return FirmwareResult(FirmwareStage.BEGIN, True, 0, "ready")

    def _on_chunk(self, msg: FirmwareChunk) -> FirmwareResult:
        assert self._begin is not None
        if msg.offset != len(self._data):
            return FirmwareResult(FirmwareStage.CHUNK, False, len(self._data),
                                  f"chunk at offset {msg.offset}, expected {len(self._data)}")
        if zlib.crc32(msg.data) != msg.crc32:
            return FirmwareResult(FirmwareStage.CHUNK, False, msg.offset,
                                  f"chunk CRC-32 0x{zlib.crc32(msg.data):08x} != 0x{msg.crc32:08x}")
        if len(self._data) + len(msg.data) > self._begin.total_size:
            return FirmwareResult(FirmwareStage.CHUNK, False, msg.offset, "chunk runs past the announced size")
        self._data += msg.data
        return FirmwareResult(FirmwareStage.CHUNK, True, len(self._data), "ok")

    def _on_commit(self, model: str) -> tuple[FirmwareResult, str | None]:
        begin, data, key = self._begin, bytes(self._data), self.public_key
        assert begin is not None and key is not None, "BEGIN was accepted, so a key is configured"
        self._begin, self._data = None, bytearray()
        if len(data) != begin.total_size:
            return FirmwareResult(FirmwareStage.COMMIT, False, len(data),
                                  f"received {len(data)} of {begin.total_size} bytes"), None
        try:
            version = verify_on_device(begin.header, data, begin.sha256, begin.signature, key, model=model)
        except Exception as exc:  # any refusal is reported to the host, never a crash
            return FirmwareResult(FirmwareStage.COMMIT, False, len(data), f"refused: {exc}"), None
        return FirmwareResult(FirmwareStage.COMMIT, True, len(data), f"installing {version}, rebooting"), version
