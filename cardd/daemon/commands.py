"""The API's command table: each command's name, the role it needs, and what it does.

A *table* command becomes one input record of :mod:`devices.tracker.inputs`: the client's
``args`` are the record's fields in the records' one JSON form (decoded by
:func:`~devices.tracker.inputs.from_json`, so a wrong arg is an error naming the field), and
``who`` and ``role`` come from the caller's credentials, never from the client. A *device*
command is a request to a device (technician). A *simulation* command exists only under
``cardd --simulate``: it moves the simulated cards, as a dealer's hands would.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cardd.api.errors import REASONS_MAX, CommandFailed, one_line
from cardd.api.peer import Caller, Role
from cardd.api.protocol import ErrorCode
from cardd.journal.records import is_header_text
from core.names import NameRefused, normal_name
from devices.errors import OverrideRefused, RuleViolation, TableError
from devices.tracker import inputs
from devices.tracker.inputs import InputDecodeError

Kind = Literal["table", "device", "journal", "simulation"]
#: fields a client may never set: the daemon fills them from the peer's credentials
CREDENTIAL_FIELDS = ("who", "role")


@dataclass(frozen=True, slots=True)
class CommandSpec:
    name: str
    role: Role
    kind: Kind
    #: the input record a table command applies (None for device and simulation commands)
    record: type | None = None
    #: other roles that may run it too (never a table command: those act in ``role``)
    also: frozenset[Role] = frozenset()

    @property
    def roles(self) -> frozenset[Role]:
        """Every role that may run it: a caller needs any one of them."""
        return self.also | {self.role}


def _table(role: Role, record: type) -> CommandSpec:
    """A table command: its name is the record's one command name (devices.tracker.inputs.COMMAND_NAMES)."""
    return CommandSpec(inputs.command_name(record), role, "table", record)


TABLE_COMMANDS: tuple[CommandSpec, ...] = (
    # dealer console
    *(_table(Role.DEALER, record) for record in (
        inputs.OpenRound, inputs.PlaceBet, inputs.ReduceBet, inputs.PlacePairsBet, inputs.NoMoreBets, inputs.Insure,
        inputs.EvenMoney, inputs.CloseInsurance, inputs.Act, inputs.EnterCard, inputs.DealerChange, inputs.TakeSeat,
        inputs.LeaveSeat, inputs.AskForBox, inputs.DrawnInErrorDecision, inputs.ShuffleStarted, inputs.HandShuffled,
        inputs.ShoeRemainder)),
    # supervisor overrides
    *(_table(Role.SUPERVISOR, record) for record in (
        inputs.Resume, inputs.Redeal, inputs.PlacementError, inputs.CardsToBoxWithoutWager, inputs.VoidShoe,
        inputs.ClearAlarm)),
)

DEVICE_COMMANDS: tuple[CommandSpec, ...] = tuple(
    CommandSpec(name, Role.TECHNICIAN, "device")
    for name in ("selftest", "counters", "clear_fault", "start_shuffle", "firmware_update", "enroll", "retry_trust"))

#: the journal's own checks (any supervisor may ask; the daemon reads its file, so no one else must),
#: and its archive: an export decides which records may later be pruned, so it is the supervisor's
#: (who answers for the record) and the technician's (who keeps the machine's disk and its
#: backups), never the dealer's (whose own rounds it holds)
JOURNAL_COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec("verify_journal", Role.SUPERVISOR, "journal"),
    CommandSpec("export_journal", Role.SUPERVISOR, "journal", also=frozenset({Role.TECHNICIAN})),
)

#: under --simulate only: the dealer's hands on the simulated cards (never on a real table)
SIMULATION_COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec("sim_load_shoe", Role.DEALER, "simulation"),
    CommandSpec("sim_deal", Role.DEALER, "simulation"),
    # the demo's and tests' faults: a device fault now (a jam), fault switches (face-up card, unplug)
    CommandSpec("sim_fault", Role.DEALER, "simulation"),
    CommandSpec("sim_switches", Role.DEALER, "simulation"),
    # the complete shoe's undealt stub back to the shuffler, counted per card (for shoe_remainder)
    CommandSpec("sim_unload_shoe", Role.DEALER, "simulation"),
)


def command_table(simulated: bool) -> dict[str, CommandSpec]:
    specs = TABLE_COMMANDS + DEVICE_COMMANDS + JOURNAL_COMMANDS + (SIMULATION_COMMANDS if simulated else ())
    return {spec.name: spec for spec in specs}


def build_record(spec: CommandSpec, args: dict[str, Any], caller: Caller) -> Any:
    """The input record of a table command: the client's args plus who and role from ``caller``.
    CommandFailed (code bad-args) names the field that is wrong, missing or not allowed."""
    assert spec.record is not None
    names = {f.name for f in dataclasses.fields(spec.record)}
    forged = [key for key in CREDENTIAL_FIELDS if key in args]
    if forged:
        raise CommandFailed(f"{spec.name}: {', '.join(forged)} come(s) from your credentials, not from args",
                            code=ErrorCode.BAD_ARGS)
    data: dict[str, Any] = {**args, "v": inputs.FORMAT_VERSION, "type": spec.record.__name__}
    if "who" in names:
        data["who"] = caller.user
    if "role" in names:
        data["role"] = acting_role(spec, caller).value
    try:
        record = inputs.from_json(data, named=spec.name)  # "place_bet.amount: ...", never the record's class
    except InputDecodeError as exc:
        raise CommandFailed(str(exc), code=ErrorCode.BAD_ARGS) from None
    return _named(spec.name, record, "")


def refusal_line(name: str, exc: Exception) -> str:
    """The one line a refused command's caller reads (its ERROR) and its COMMAND_REFUSED
    record keeps (``refused``): the command as people send it, then what is wrong in the table's
    words and, where there is one, the way forward (``place_bet refused: no round is open: open
    one with open_round first``). A rule's text without its code (the round's ACTION_REFUSED
    record keeps the code), an override's reason without the override's own name."""
    if isinstance(exc, RuleViolation):
        why = exc.message
    elif isinstance(exc, OverrideRefused):
        why = exc.why
    else:
        why = str(exc)
    if isinstance(exc, CommandFailed) and why.startswith((f"{name}:", f"{name} ", f"{name}.")):
        return one_line(why)  # the daemon's own (a device or simulation command's), named already
    if isinstance(exc, TableError) and len(exc.reasons) > 1:
        return reasons_line(f"{name} refused: ", exc.reasons)
    return one_line(f"{name} refused: {why}")


def reasons_line(head: str, reasons: Sequence[str]) -> str:
    """``head`` and the reasons, "; " between them, in one line of at most REASONS_MAX: cut before a
    reason that does not fit, never inside one (each ends with its way forward), saying how many
    are left out."""
    texts = [" ".join(reason.split()) for reason in reasons]
    for shown in range(len(texts), 0, -1):
        left = len(texts) - shown
        line = head + "; ".join(texts[:shown]) + (f"; and {left} more reason(s), named once these are dealt with"
                                                  if left else "")
        if len(line) <= REASONS_MAX:
            return line
    return one_line(head + texts[0], REASONS_MAX)  # one reason alone too long: cut as any line


def _named(name: str, value: Any, where: str) -> Any:
    """``value`` (a record, a tuple of them, a field) with every name a client gave in its one
    spelling (core.names: the one policy for names, docs/api.md "Names"); CommandFailed (bad-args)
    naming the field of one that is no name. The credentials' ``who`` is the user name the system
    gave: kept as it is, refused only if the journal could not store it (a record the journal
    refuses would fail its whole group commit, every card and command after it, not this command)."""
    if isinstance(value, str):
        try:
            return normal_name(value)
        except NameRefused as exc:
            raise CommandFailed(f"{name}{where}: {value[:40]!r}{'...' if len(value) > 40 else ''} is not a name: "
                                f"{exc}", code=ErrorCode.BAD_ARGS) from None
    if isinstance(value, tuple):
        return tuple(_named(name, item, f"{where}[{i}]") for i, item in enumerate(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        named: dict[str, Any] = {}
        for field in dataclasses.fields(value):
            given = getattr(value, field.name)
            if field.name in CREDENTIAL_FIELDS and not where:
                if isinstance(given, str) and (not given or not is_header_text(given)):
                    raise CommandFailed(f"{name}: your user name {given[:40]!r} cannot be journaled as who",
                                        code=ErrorCode.BAD_ARGS)
            elif field.init and (isinstance(given, (str, tuple)) or dataclasses.is_dataclass(given)):
                spelled = _named(name, given, f"{where}.{field.name}")  # ".player", ".co_players[1].player"
                if spelled != given:
                    named[field.name] = spelled
        return dataclasses.replace(value, **named) if named else value  # a record unchanged is kept as it came
    return value


def acting_role(spec: CommandSpec, caller: Caller) -> Role:
    """The role the caller acts in: the command's own (the server checked the caller holds it)."""
    if spec.role not in caller.roles:
        raise CommandFailed(f"{spec.name} needs the {spec.role.value} role", code=ErrorCode.REFUSED)
    return spec.role
