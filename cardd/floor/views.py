"""What the floor's HTTP API answers and takes: msgspec Structs, the one source of the API's
JSON, of its query checks and of docs/floor-openapi.json (cardd/floor/openapi.py)."""
from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

import msgspec

from cardd.floor.contract import DeviceUrl, Id, Penetration, RulesId, Time

Count = Annotated[int, msgspec.Meta(ge=0)]
Seconds = Annotated[float, msgspec.Meta(ge=0)]
#: floor alarm kinds (docs/floor-service.md "Floor alarms")
AlarmKind = Literal["table_offline", "table_alarm_open", "backlog_old", "clock_offset", "chain", "bad_message"]
AlarmState = Literal["open", "acknowledged", "cleared"]
#: the most records, alarms or report days one request gives
MAX_RECORDS = 500
MAX_ALARMS = 500
MAX_DAYS = 366
MAX_AUDIT = 500
AuditAction = Literal["login", "logout", "acknowledge"]


class _View(msgspec.Struct, forbid_unknown_fields=True):
    pass


class Error(_View):
    """Every refusal: one sentence."""
    error: str


class DeviceView(_View):
    role: str
    state: str
    connected: bool


class ShoeView(_View):
    state: str
    penetration: Penetration


class TableAlarmView(_View):
    """An alarm open at the table (its reason only, as the table publishes it) and its age."""
    reason: str
    since: Time | None
    age_s: Seconds | None


class TableView(_View):
    """One table as the floor last heard of it. ``devices``, ``shoe``, ``alarms``, ``backlog``
    are the table's last state (empty or null before one came); ``rounds_*`` count the rounds
    completed in the archive since the hour's and the day's start (UTC)."""
    site: Id
    table: Id
    online: bool
    session: Count
    last_seen: Time | None
    devices: list[DeviceView]
    shoe: ShoeView | None
    rounds_this_hour: Count
    rounds_today: Count
    alarms: list[TableAlarmView]
    backlog: Count | None
    backlog_age_s: Seconds | None
    clock_offset_s: float | None
    head_seq: Count | None
    open_floor_alarms: Count
    #: the pit the table is in (the configuration's [[pit]]), null when in none
    pit: str | None = None


class BrokerView(_View):
    """cardfloor's own link to the broker: whether it is up, the node it is at (or tried last),
    since when it has been up or down, and the last reason a connection failed or ended. While
    it is down the tables keep their records and send them when they can: nothing is lost, it
    is late."""
    connected: bool
    broker: str | None
    since: Time | None
    problem: str | None


class FloorView(_View):
    """Every table the floor knows, and how many floor alarms are open."""
    time: Time
    tables: list[TableView]
    open_floor_alarms: Count
    #: the rounds an hour a table is expected to deal (floor.target_rounds_per_hour)
    target_rounds_per_hour: int = 60
    #: the floor's link to the broker (null from an API served without the floor's receiver)
    broker: BrokerView | None = None


class AlarmView(_View):
    """A floor alarm: raised by cardfloor about a table, open until cleared, acknowledged by a
    person (``acknowledged_by``: the token's or the user's name)."""
    id: int
    site: Id
    table: Id
    kind: str
    key: str
    detail: str
    state: AlarmState
    raised_at: Time
    age_s: Seconds
    cleared_at: Time | None
    acknowledged_at: Time | None
    acknowledged_by: str | None
    note: str | None


class TableDetail(_View):
    """One table: its summary, what its status said, the seq ranges the archive misses, and its
    open floor alarms."""
    table: TableView
    release: str | None
    rules: RulesId | None
    device_urls: list[DeviceUrl]
    gaps: list[tuple[int, int]]
    alarms: list[AlarmView]


class RecordView(_View):
    """A record as archived: the event as the table sent it, and when the floor received it."""
    seq: int
    time: Time
    kind: str
    source: str
    reason: str
    severity: str
    who: str | None
    round: str | None
    message: str
    data: dict[str, Any]
    prev: str
    hash: str
    replay: bool
    received_at: Time


class RecordsView(_View):
    """Records newest first; ``next_before_seq`` asks for the ones before them (null: no more)."""
    site: Id
    table: Id
    records: list[RecordView]
    next_before_seq: int | None


class AlarmsView(_View):
    alarms: list[AlarmView]


class ReportRow(_View):
    """One table's hour or day: rounds completed, hands settled, shoes loaded, voids (rounds and
    shoes voided), alarms the table raised by reason, device faults, and minutes offline."""
    site: Id
    table: Id
    start: Time
    rounds: Count
    hands: Count
    shoes: Count
    voids: Count
    alarms: dict[str, int]
    device_faults: Count
    minutes_offline: Seconds


class ReportView(_View):
    """A report: ``period`` hour or day, from ``first`` to ``last`` (days, inclusive)."""
    period: Literal["hour", "day"]
    first: dt.date
    last: dt.date
    rows: list[ReportRow]


class AuditEntryView(_View):
    """One entry of the audit: a log-in (``outcome`` ok, refused or limited: ``who`` as typed),
    a log-out or an acknowledgement (``alarm_id``, its note in ``detail``), from ``address``."""
    id: int
    at: Time
    action: AuditAction
    outcome: Literal["ok", "refused", "limited"]
    who: str
    address: str | None
    alarm_id: int | None
    detail: str


class AuditView(_View):
    """The audit, the newest first; ``next_before_id`` asks for the entries before them (null: no more)."""
    entries: list[AuditEntryView]
    next_before_id: int | None


# ---- what requests carry --------------------------------------------------------------------

class LoginBody(_View):
    """POST /api/v1/login: a user of the users file and their password."""
    user: Annotated[str, msgspec.Meta(max_length=256)]
    password: Annotated[str, msgspec.Meta(max_length=1024)]


class SessionView(_View):
    """Who is logged in: their role and pits (a pit user sees only theirs), the token every
    state-changing request sends as ``X-CSRF-Token``, when the session ends, and the floor's
    time zone and pace target for the page."""
    user: str
    role: str
    pits: list[str]
    csrf: str
    expires: Time
    time_zone: str
    target_rounds_per_hour: int


class AckBody(_View):
    """POST /api/v1/alarms/{id}/ack: why (journaled with the acknowledgement)."""
    note: Annotated[str, msgspec.Meta(max_length=500)] = ""


class RecordsQuery(_View):
    before_seq: Annotated[int, msgspec.Meta(ge=1)] | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_RECORDS)] = 100


class AlarmsQuery(_View):
    state: Literal["open", "acknowledged", "cleared", "all"] = "open"
    site: Id | None = None
    table: Id | None = None
    kind: AlarmKind | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_ALARMS)] = MAX_ALARMS


class StreamQuery(_View):
    #: the kinds of change wanted, comma-separated (every kind when not given); ``broker`` is
    #: sent whatever this says
    kinds: Annotated[str, msgspec.Meta(max_length=256)] | None = None


class AuditQuery(_View):
    who: Annotated[str, msgspec.Meta(max_length=256)] | None = None
    action: AuditAction | None = None
    before_id: Annotated[int, msgspec.Meta(ge=1)] | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_AUDIT)] = 100
    format: Literal["json", "csv"] = "json"


class HourlyQuery(_View):
    day: dt.date
    site: Id | None = None
    table: Id | None = None
    format: Literal["json", "csv"] = "json"


class DailyQuery(_View, rename={"first": "from", "last": "to"}):
    first: dt.date
    last: dt.date
    site: Id | None = None
    table: Id | None = None
    format: Literal["json", "csv"] = "json"


class SnapshotView(_View):
    """The stream's first event when it cannot resume: the floor, and the floor alarms not cleared."""
    floor: FloorView
    alarms: list[AlarmView]


class TablePath(_View):
    site: Id
    table: Id
