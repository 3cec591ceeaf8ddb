"""The errors the link layer, firmware transfer and session raise.

Every protocol error shows the offending bytes in hex (truncated to :data:`HEX_SHOWN`
bytes), so a log line alone tells a technician what came down the wire. The stream
decoder never raises these to its caller: it counts them and hands them to a callback.
"""
from __future__ import annotations

from core.errors import HEX_SHOWN, CarddError, hex_preview

__all__ = ["HEX_SHOWN", "hex_preview"]  # re-exported: the protocol's errors show bytes this way


class ProtocolError(CarddError):
    """Base of everything that goes wrong on the device protocol."""


class FrameError(ProtocolError):
    """A delimited frame that could not be accepted. ``data`` is what was received (COBS-encoded)."""

    def __init__(self, reason: str, data: bytes) -> None:
        super().__init__(f"{reason}: {hex_preview(data)}")
        self.reason = reason
        self.data = bytes(data)


class CobsError(FrameError):
    """The bytes between two delimiters are not valid COBS."""


class FrameTooShort(FrameError):
    """Fewer bytes than a header and a CRC."""


class FrameTooLong(FrameError):
    """Longer than MAX_FRAME_LEN (or no delimiter within the receive bound)."""


class CrcMismatch(FrameError):
    """The CRC-16 at the end of the frame does not match its contents."""


class LengthMismatch(FrameError):
    """The length field disagrees with the bytes received."""


class UnknownFrameKind(FrameError):
    """The kind byte names no frame kind."""


class LinkError(ProtocolError):
    """A send that could not be completed."""


class LinkFailed(LinkError):
    """The retry cap was reached (or the link was closed) before the peer acknowledged."""


class LinkReset(LinkError):
    """The link was reset (by the peer or by us) before the frame was acknowledged."""


class FirmwareError(ProtocolError):
    """A firmware image or transfer that must not go ahead."""


class FirmwareFormatError(FirmwareError):
    """An image file that does not parse (bad magic, short, sizes that disagree)."""

    def __init__(self, reason: str, data: bytes = b"") -> None:
        super().__init__(f"{reason}: {hex_preview(data)}" if data else reason)
        self.reason = reason
        self.data = bytes(data)


class FirmwareSignatureError(FirmwareError):
    """The Ed25519 signature does not verify against the configured public key."""


class FirmwareTargetMismatch(FirmwareError):
    """The image is built for another device model."""


class FirmwareArgumentError(FirmwareError, ValueError):
    """An argument of a firmware update that cannot be used (chunk size, timeout, technician)."""


class FirmwareDowngradeRefused(FirmwareError):
    """The image's version is lower than the device's (or cannot be compared with it), and no
    technician allowed a downgrade."""


class FirmwareSameVersion(FirmwareError):
    """The image's version is the one the device runs already, and no one asked to flash it again."""


class FirmwareTransferError(FirmwareError):
    """The device refused a step of the transfer, or a chunk arrived damaged."""


class SessionError(ProtocolError):
    """The session cannot do what was asked."""


class IncompatibleProtocol(SessionError):
    """The device speaks another protocol major version."""


class RequestTimeout(SessionError, TimeoutError):
    """No answer of the expected type within the timeout."""


class RequestRefused(SessionError):
    """The device answered a request with Refused."""


class SessionClosed(SessionError):
    """The session is closed, or the link went down while waiting."""


class MessagesOverflow(SessionError):
    """A ``messages()`` consumer fell so far behind that its bounded queue overflowed: the iterator
    ends with this error once it has yielded every message it still held."""


class EventIndexError(SessionError, ValueError):
    """An event index the host cannot confirm (beyond what it delivered)."""


class TagMismatch(FrameError):
    """A protocol 2.0 frame whose authentication tag does not verify under this session's key:
    damaged, forged, from another session, or sent the other way."""


class FrameReplayed(FrameError):
    """A protocol 2.0 frame with a good tag whose frame counter is not above the last one
    taken: a replay or a reordering."""


class UnauthenticatedFrame(FrameError):
    """A frame without a tag where this session takes only authenticated frames."""


class LegacyFrame(FrameError):
    """A protocol 1.x frame (a 1.x kind byte with a good CRC-16) on a 2.0 link: the peer
    offers the older protocol."""


class TagCounterExhausted(LinkError):
    """The session has sent 2**32 - 1 authenticated frames: it must be shaken hands anew."""


class HandshakeError(SessionError):
    """A protocol 2.0 handshake message that cannot be read, or that does not follow the one
    before it."""


class DeviceNotTrusted(SessionError):
    """A protocol 2.0 peer that failed to prove who it is. ``failure`` names what failed
    (:class:`firmware_bridge.handshake2.TrustFailure`)."""

    def __init__(self, failure: object, detail: str) -> None:
        super().__init__(f"{getattr(failure, 'value', failure)}: {detail}")
        self.failure = failure
        self.detail = detail
