"""The link's vocabulary: its configuration, counters, states and events (the machinery is
:mod:`firmware_bridge.link`, which re-exports all of these)."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from firmware_bridge.framing import DecoderStats
from firmware_bridge.framing2 import Decoder2Stats

SEQ_MOD = 256
NONCE_LEN = 4
#: the congestion window never shrinks below this (or the configured window, if smaller): with
#: fewer frames in flight a lost frame or ACK is followed by nothing that would trigger a NAK,
#: and only the retransmit timeout recovers it
MIN_CWND = 4


class LinkState(enum.Enum):
    DOWN = "down"  # not started
    RESETTING = "resetting"  # our RESET is out, waiting for its RESET_ACK
    UP = "up"
    FAILED = "failed"  # retry cap reached; only a reset (ours or the peer's) brings it back
    CLOSED = "closed"


class LinkEvent(enum.Enum):
    UP = "up"  # the peer answered our RESET
    PEER_RESET = "peer_reset"  # the peer started a fresh link (it rebooted or recovered): redo the handshake
    FAILED = "failed"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class LinkConfig:
    initial_rto: float = 0.1  # seconds, before the first RTT sample
    min_rto: float = 0.02  # above an event-loop hiccup, so a busy host does not resend for nothing
    max_rto: float = 1.0
    max_retries: int = 8  # timeouts in a row without progress before FAILED
    window: int = 16  # DATA frames in flight; < 128 so duplicates and gaps are told apart
    queue_limit: int = 4096  # payloads waiting for the window; more are refused

    def __post_init__(self) -> None:
        if not 1 <= self.window < SEQ_MOD // 2:
            raise ValueError(f"LinkConfig.window={self.window}: allowed 1..{SEQ_MOD // 2 - 1}")
        if not 0 < self.min_rto <= self.initial_rto <= self.max_rto:
            raise ValueError(
                f"LinkConfig rto values must satisfy 0 < min_rto <= initial_rto <= max_rto, "
                f"got {self.min_rto}, {self.initial_rto}, {self.max_rto}"
            )
        if self.max_retries < 1:
            raise ValueError(f"LinkConfig.max_retries={self.max_retries}: must be >= 1")


@dataclass(slots=True)
class LinkStats:
    frames_sent: int = 0
    frames_received: int = 0
    data_sent: int = 0  # DATA frames sent for the first time
    data_delivered: int = 0
    retransmits: int = 0
    timeouts: int = 0
    probes: int = 0  # the oldest frame resent alone because its ACK was late (tail loss probe)
    duplicates_dropped: int = 0
    out_of_order: int = 0  # DATA ahead of the expected seq (an earlier one was lost)
    naks_sent: int = 0
    naks_received: int = 0
    resets_sent: int = 0
    peer_resets: int = 0
    write_errors: int = 0
    rtt_last: float | None = None
    rtt_srtt: float | None = None
    rtt_var: float | None = None
    rtt_min: float | None = None
    rtt_max: float | None = None
    rto: float = 0.0
    cwnd: int = 0  # frames the sender lets into flight now (adapts to loss, at most config.window)
    framing: DecoderStats | Decoder2Stats = field(default_factory=DecoderStats)  # crc_errors, bytes_discarded, ...

    def snapshot(self) -> "LinkStats":
        return replace(self, framing=self.framing.snapshot())
