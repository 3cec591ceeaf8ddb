"""The local API's messages, declared once: JSON objects, one per line, each tagged by `class`
(msgspec Structs in a tagged union: they validate, encode and generate docs/api-schema.json).
Requests are strict, clients ignore unknown fields: docs/api.md describes each class."""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

import msgspec

#: major.minor of this protocol; a client refuses a VERSION whose major differs from its own
PROTOCOL_VERSION = "1.1"

#: the most records one LOG query returns (larger queries page with from_seq)
LOG_LIMIT_MAX = 10_000

#: the journal keeps seqs and nanosecond times in SQLite's 64-bit INTEGER: a request beyond it is
#: bad-request naming the field, not an overflow inside the daemon
MAX_SEQ = 2**63 - 1
MAX_UNIX_TIME = MAX_SEQ // 10**9  # 2262-04-11, in whole seconds

Seq = Annotated[int, msgspec.Meta(ge=0, le=MAX_SEQ, description="journal sequence number")]
#: chosen by the client, echoed in the one reply to that request
RequestId = Annotated[str, msgspec.Meta(max_length=128, description="chosen by the client, echoed in the reply")]
#: Unix time in seconds (UTC), fractions allowed
UnixTime = Annotated[float, msgspec.Meta(ge=0, le=MAX_UNIX_TIME, description="Unix time, seconds (UTC)")]


class _Request(msgspec.Struct, tag_field="class", forbid_unknown_fields=True, kw_only=True):
    """What a client sends: unknown fields are refused."""


class _Reply(msgspec.Struct, tag_field="class", kw_only=True):
    """What the daemon sends."""


# --- client -> server -------------------------------------------------------------------------

class Watch(_Request, tag="WATCH"):
    """Start (or stop) receiving EVENTs. With `since_seq`, first every journaled event after
    it, then live ones, with no gap and none twice."""
    enable: bool = True
    since_seq: Seq | None = None
    id: RequestId | None = None


class StateQuery(_Request, tag="STATE"):
    """Ask for the table's state now (devices, shoe, round, hands, holds, alarms)."""
    id: RequestId | None = None


class LogQuery(_Request, tag="LOG"):
    """Ask the journal for records; every filter given must match (all are optional)."""
    id: RequestId | None = None
    since: UnixTime | None = None
    until: UnixTime | None = None
    from_seq: Seq | None = None
    to_seq: Seq | None = None
    reason: str | None = None
    severity: str | None = None
    round: Annotated[int, msgspec.Meta(ge=0)] | None = None
    who: Annotated[str, msgspec.Meta(max_length=256)] | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=LOG_LIMIT_MAX)] = 1000
    #: the last `limit` matching records (still oldest first) rather than the first
    newest: bool = False


class Command(_Request, tag="COMMAND"):
    """Ask the daemon to do something; the command names and their roles are the daemon's."""
    id: RequestId
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    args: dict[str, Any] = {}


class WhoAmI(_Request, tag="WHOAMI"):
    """Ask who the daemon sees on this connection, the roles that gives and the commands each
    of those roles allows. Answered to every caller, one who holds no role too (1.1)."""
    id: RequestId | None = None


ClientMessage = Union[Watch, StateQuery, LogQuery, Command, WhoAmI]


# --- the args of the commands that are not table inputs ------------------------------------------

class ExportJournalArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """`export_journal`: the daemon writes every record from the first at or after `since` to
    the last before `until` (one unbroken stretch of the chain; both optional) to a new file in
    its export directory, and journals an `export` record with the file's SHA-256. Only
    exported records are ever pruned."""
    since: UnixTime | None = None
    until: UnixTime | None = None
    format: Literal["jsonl", "csv"] = "jsonl"


class ExportJournalResult(msgspec.Struct, kw_only=True):
    """What `export_journal` did: `data.result` of the command record the ACK names."""
    file: str
    format: str
    first_seq: Seq
    last_seq: Seq
    count: int
    sha256: Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]
    #: the journal's own `export` record (reason JOURNAL_EXPORTED), the one that makes the range prunable
    record_seq: Seq


#: the largest firmware image the daemon takes (the bytes of its file: header, image, signature);
#: firmware_bridge.firmware.MAX_IMAGE_FILE_BYTES, not imported here (cardctl's start-up time)
FIRMWARE_IMAGE_MAX = 16 << 20
#: those bytes in base64 (4 characters for each 3 bytes)
FIRMWARE_BASE64_MAX = -(-FIRMWARE_IMAGE_MAX // 3) * 4
#: the request line a technician's connection may send: a firmware_update with the largest image
#: and room for the rest of the command (everyone else's lines stay within Limits.max_line)
TECHNICIAN_LINE_MAX = FIRMWARE_BASE64_MAX + 64 * 1024


class FirmwareUpdateArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """`firmware_update` (technician): flash a signed image into one of the table's devices
    through the daemon's own link to it. The image goes as its file's bytes in base64
    (`image_base64`: what cardctl sends, read as the technician who runs it) or as `image`,
    an absolute path the daemon reads itself (as its own user); exactly one of them. It is
    checked against the configured `[firmware] public_key` and the device's identity before a
    byte is sent. An older version than the running one goes only with `allow_downgrade_by`
    naming a supervisor (a login that holds the supervisor role here); the running version
    again only with `force`. Journaled before the transfer (who, the versions, who allowed a
    downgrade) and after it (the device's result, or the refusal)."""
    #: `shoe` or `shuffler` (or the device's URL as configured)
    device: str
    image_base64: Annotated[str, msgspec.Meta(max_length=FIRMWARE_BASE64_MAX)] | None = None
    image: str | None = None
    allow_downgrade_by: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None
    force: bool = False


class FirmwareUpdateResult(msgspec.Struct, kw_only=True):
    """What `firmware_update` journaled: `data.result` of its records, `stage` "started" before
    the transfer and "done" after it (the ACK names the "done" record)."""
    stage: Literal["started", "done"]
    device: str
    model: str
    serial: str
    from_version: str | None
    to_version: str
    #: why the image counts as a downgrade (null when it does not)
    downgrade: str | None
    downgrade_allowed_by: str | None
    image_bytes: int
    image_sha256: Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]
    #: the device's answer at COMMIT ("done" only)
    ok: bool | None = None
    detail: str | None = None


#: command name -> its args' type and its result's type, for the commands whose args are not an
#: input record of the deal tracker (those are devices/tracker/inputs.py's)
COMMAND_TYPES: dict[str, tuple[type[msgspec.Struct], type[msgspec.Struct]]] = {
    "export_journal": (ExportJournalArgs, ExportJournalResult),
    "firmware_update": (FirmwareUpdateArgs, FirmwareUpdateResult),
}


# --- server -> client -------------------------------------------------------------------------

class Version(_Reply, tag="VERSION"):
    """The first line on every connection."""
    release: str
    protocol: str = PROTOCOL_VERSION


class ApiEvent(_Reply, tag="EVENT"):
    """One journaled event, as a watcher sees it and as LOG returns it."""
    seq: Seq
    time: UnixTime
    kind: str
    source: str
    reason: str
    severity: str
    who: str | None = None
    message: str = ""
    data: dict[str, Any] = {}


class StateReply(_Reply, tag="STATE"):
    """The answer to a STATE query."""
    id: RequestId | None
    state: dict[str, Any]


class LogReply(_Reply, tag="LOG"):
    """The answer to a LOG query, oldest first; `more` when the limit cut it short."""
    id: RequestId | None
    records: list[ApiEvent]
    more: bool = False


class Ack(_Reply, tag="ACK"):
    """A request done: for a COMMAND, `seq` is the journal record it made; for WATCH, the
    last event published so far (null before the first)."""
    id: RequestId | None
    seq: Seq | None


class Error(_Reply, tag="ERROR"):
    """A request refused or failed, or a line that was not a request (then `id` is null).
    `message` is one line."""
    id: RequestId | None
    code: str
    message: str


class PeerGroup(msgspec.Struct, kw_only=True):
    """One of the caller's groups, as the kernel gave it at connect time."""
    gid: int
    #: the group's name on the daemon's machine, or null when it has none
    name: str | None
    #: the role it gives (the configuration's `[roles]`), or null
    role: str | None = None


class WhoAmIReply(_Reply, tag="WHOAMI"):
    """The answer to WHOAMI: the caller's credentials as the daemon read them (`SO_PEERCRED`,
    `SO_PEERGROUPS`), the roles they give, and, for each role held, the commands it allows (the
    daemon's own command table); `every_role` when the uid holds them all (root, the daemon's
    own). `role_groups`: the groups of this machine that give each role."""
    id: RequestId | None
    uid: int
    user: str
    gid: int
    pid: int
    groups: list[PeerGroup]
    roles: list[str]
    every_role: bool = False
    commands: dict[str, list[str]] = {}
    role_groups: dict[str, list[str]] = {}


class Disconnect(_Reply, tag="DISCONNECT"):
    """The daemon drops this connection (a watcher that fell behind): reconnect and WATCH
    with `since_seq` set to the last event received."""
    code: str
    message: str


ServerMessage = Union[Version, ApiEvent, StateReply, LogReply, Ack, Error, WhoAmIReply, Disconnect]

CLIENT_CLASSES: tuple[type[msgspec.Struct], ...] = (Watch, StateQuery, LogQuery, Command, WhoAmI)
SERVER_CLASSES: tuple[type[msgspec.Struct], ...] = (Version, ApiEvent, StateReply, LogReply, Ack, Error, WhoAmIReply,
                                                    Disconnect)


class ErrorCode:
    """The `code` of an ERROR or DISCONNECT (stable strings a client may test)."""
    BAD_JSON = "bad-json"            # the line is not JSON (or not UTF-8)
    BAD_REQUEST = "bad-request"      # JSON, but not a valid request (class, fields, types)
    TOO_LONG = "too-long"            # a line over the limit; the connection is closed
    FLOOD = "flood"                  # requests faster than the rate limit; closed
    BUSY = "busy"                    # too many connections; closed
    REFUSED = "refused"              # the caller lacks the role the request needs
    TOO_MANY_REFUSED = "too-many-refused"  # this user's commands were refused too often: none taken for a while
    UNKNOWN_COMMAND = "unknown-command"
    BAD_ARGS = "bad-args"            # a command's args: a field wrong, missing or not allowed (named)
    DEVICE_OFFLINE = "device-offline"  # a device command for a device whose link is down
    FAILED = "failed"                # the daemon could not do the command (the message says why)
    INTERNAL = "internal"            # a fault in the daemon; logged there
    LAGGING = "lagging"              # DISCONNECT: the client did not read fast enough


#: every code an ERROR or DISCONNECT may carry
ERROR_CODES = frozenset(value for name, value in vars(ErrorCode).items() if name.isupper())


def class_name(struct_type: type[msgspec.Struct]) -> str:
    """The `class` tag of a message type."""
    tag = struct_type.__struct_config__.tag
    assert isinstance(tag, str)
    return tag


request_decoder = msgspec.json.Decoder(ClientMessage)
reply_decoder = msgspec.json.Decoder(ServerMessage)
_encoder = msgspec.json.Encoder()


def encode_line(message: msgspec.Struct) -> bytes:
    """One message as one JSON line (the framing of the whole API)."""
    return _encoder.encode(message) + b"\n"
