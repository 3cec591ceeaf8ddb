"""Scenario files: one TOML file a scenario, declared once here as a typed schema (msgspec, like the
daemon's configuration), refused with the file, the line and what was expected. Every key, with
an example file: docs/bench.md, "The schema"."""
from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path
from collections.abc import Iterable
from typing import Any, Literal

import msgspec

from cardd.api.protocol import ERROR_CODES
from cardd.config import rule_names, rules_file
from cardd.daemon.backend import journal_reasons
from cardd.daemon.commands import command_table
from cardd.package_data import package_folder
from core.cards import Card, CardCodeError
from core.errors import CarddError
from core.parse_errors import last_line, toml_problem
from core.schema_errors import ProblemKind, SchemaProblem, dotted, schema_problem
from devices.events import Reason
from devices.game.rules import RulesError, load_rules
from simulators.faults import FaultSpecError, Faults

#: the scenario library, a folder per seed casino (casino-000/clean-round.toml ...): the package's data
LIBRARY = package_folder("cardd", "bench/scenarios")
#: the device roles a scenario sets up (``[devices.<role>]``, a ``faults`` step's ``device``)
ROLES = ("shuffler", "shoe")
#: the commands a scenario may send: the daemon's table (the bench's daemon is no ``--simulate`` one)
COMMANDS = command_table(simulated=False)
#: the reasons an open alarm carries: the device models' and the tracker's events
ALARM_REASONS = frozenset(r.value for r in Reason)
#: every reason a record of the daemon's journal can carry (what `events` and `no_events` name)
JOURNALED = journal_reasons()


class ScenarioError(CarddError, ValueError):
    """A scenario file that cannot be used: ``FILE:LINE: what was expected``."""


class _Strict(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """Unknown keys are errors: a typo must not silently do nothing."""


class DeviceSetup(_Strict, frozen=True):
    faults: str = ""
    stack: list[str] | None = None


class Devices(_Strict, frozen=True):
    shuffler: DeviceSetup = DeviceSetup()
    shoe: DeviceSetup = DeviceSetup()


class Shuffle(_Strict, frozen=True, tag_field="do", tag="shuffle"):
    #: the state the shoe must reach: "verified", or "refused" for a misloaded shoe
    until: Literal["verified", "refused"] = "verified"


class Load(_Strict, frozen=True, tag_field="do", tag="load"):
    #: deal the burn card(s) the rules ask for after loading
    burn: bool = True
    #: the shoe state that shows the load taken: "burning" (or "in_play" with no burn), or a refused
    #: shoe still "refused" (loaded anyway: dealing blocked)
    until: Literal["loaded", "refused"] = "loaded"
    #: where the cut card goes (after this card); default: the rules' penetration
    cut_at: int | None = None


class Command(_Strict, frozen=True, tag_field="do", tag="command"):
    name: str
    args: dict[str, Any] = {}
    #: the ERROR code the daemon must answer with (None: the command must succeed)
    refused: str | None = None


class Deal(_Strict, frozen=True, tag_field="do", tag="deal"):
    cards: int = 1
    wait: bool = True


class Play(_Strict, frozen=True, tag_field="do", tag="play"):
    strategy: Literal["stand", "basic"] = "stand"


class Rounds(_Strict, frozen=True, tag_field="do", tag="rounds"):
    """Rounds of one box (player p1, the table minimum unless ``bet``) until the shoe is complete."""
    strategy: Literal["stand", "basic"] = "stand"
    bet: int | None = None
    max_rounds: int = 200


class Remainder(_Strict, frozen=True, tag_field="do", tag="remainder"):
    """The undealt cards counted back (``shoe_remainder``), from the order the bench stacked;
    ``drop``: cards lost on the way back (the reconciliation must fail)."""
    drop: list[str] = []


class SetFaults(_Strict, frozen=True, tag_field="do", tag="faults"):
    device: Literal["shuffler", "shoe"]
    set: str


class Wait(_Strict, frozen=True, tag_field="do", tag="wait"):
    path: str
    equals: Any = None
    #: instead of equals: a regular expression the value (as text) must match from its start
    matches: str | None = None
    timeout: float = 10.0

    def met(self, value: Any) -> bool:
        if self.matches is not None:
            return value is not None and re.match(self.matches, str(value)) is not None
        return bool(value == self.equals)

    def wanted(self) -> str:
        return f"{self.path} matching {self.matches!r}" if self.matches is not None else f"{self.path} = {self.equals!r}"


class Expect(_Strict, frozen=True, tag_field="do", tag="expect"):
    state: dict[str, Any] = {}
    events: list[str] = []
    no_events: list[str] = []
    alarms: list[str] | None = None
    settlement: dict[str, int] = {}


Step = Shuffle | Load | Command | Deal | Play | Rounds | Remainder | SetFaults | Wait | Expect


class Scenario(_Strict, frozen=True, kw_only=True):
    description: str
    rules: str = "casino-000"
    devices: Devices = Devices()
    step: list[Step]

    def rules_path(self, scenario_file: Path) -> Path:
        """A seed casino's rules by name (cardd/rules/<name>.toml), or a path relative to the scenario
        (``cardd --simulate --rules`` finds them the same way, relative to its current directory)."""
        return rules_file(self.rules, scenario_file.parent)

    def fault_switches(self) -> set[str]:
        """Every fault switch the scenario turns on, at start or in a step."""
        specs = [self.devices.shuffler.faults, self.devices.shoe.faults]
        specs += [s.set for s in self.step if isinstance(s, SetFaults)]
        return {name for spec in specs for name in Faults.parse(spec).active()} - {"seed"}

    def expected_reasons(self) -> set[str]:
        return {reason for s in self.step if isinstance(s, Expect) for reason in (*s.events, *(s.alarms or ()))}


def load_scenario(path: Path) -> Scenario:
    """The scenario in ``path``; :class:`ScenarioError` names the file, the line and what was expected."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot be read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:  # TOML is UTF-8: say where, as the configuration does
        line_of_byte = path.read_bytes()[:exc.start].count(b"\n") + 1
        raise ScenarioError(f"{path}:{line_of_byte}: not UTF-8 text (byte {exc.start})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        syntax = toml_problem(exc, text)
        line = last_line(text) if syntax.at_end else syntax.line or 1
        at = "the end of the file" if syntax.at_end else f"column {syntax.column}" if syntax.column else None
        said = f"not valid TOML: {syntax.what}" if syntax.what else "not valid TOML"
        raise ScenarioError(f"{path}:{line}: {said}" + (f" ({at})" if at else "")) from None
    try:
        scenario = msgspec.convert(data, Scenario)
    except msgspec.ValidationError as exc:
        raise ScenarioError(_schema_refusal(path, text, schema_problem(exc, toml=True, schema=Scenario, data=data))) \
            from None
    rules = scenario.rules_path(path)
    if not rules.exists():
        raise ScenarioError(f"{path}:{_line_of(text, '.rules') or 1}: rules {scenario.rules!r}: expected a rules "
                            f"file by a seed casino's name ({', '.join(rule_names())}) or a path relative to "
                            f"the scenario ({rules} does not exist)")
    try:  # a broken rules file is the scenario's error too, before any daemon starts
        load_rules(rules)
    except RulesError as exc:
        raise ScenarioError(f"{path}:{_line_of(text, '.rules') or 1}: rules {scenario.rules!r}: {exc}") from None
    _check_cards(path, text, scenario)
    _check_names(path, text, scenario)
    # each fault spec where it is written: the devices' own, then each faults step's
    specs: list[tuple[str, str, str]] = [
        (".devices.shuffler.faults", scenario.devices.shuffler.faults, "shuffler"),
        (".devices.shoe.faults", scenario.devices.shoe.faults, "shoe")]
    specs += [(f".step[{i}].set", step.set, step.device) for i, step in enumerate(scenario.step)
              if isinstance(step, SetFaults)]
    for spec_path, spec, device in specs:
        try:
            Faults.parse(spec).check_for(device)
        except FaultSpecError as exc:
            raise ScenarioError(f"{path}:{_line_of(text, spec_path) or 1}: {exc}") from None
    return scenario


def _check_cards(path: Path, text: str, scenario: Scenario) -> None:
    """Every card a scenario names is a card, before anything runs (a typo would otherwise stop the run
    with the card parser's error once the devices and the daemon are up)."""
    if scenario.devices.shoe.stack is not None:
        raise ScenarioError(f"{path}:{_line_of(text, '.devices.shoe.stack') or 1}: devices.shoe.stack: expected the "
                            f"stack under [devices.shuffler] (the shoe deals what is loaded into it)")
    named = [(".devices.shuffler.stack", "devices.shuffler.stack", scenario.devices.shuffler.stack or [])]
    named += [(f".step[{i}].drop", f"step {i + 1} (remainder) drop", s.drop)
              for i, s in enumerate(scenario.step) if isinstance(s, Remainder)]
    for json_path, what, cards in named:
        for text_card in cards:
            try:
                Card.parse(text_card)
            except CardCodeError as exc:
                raise ScenarioError(f"{path}:{_line_of(text, json_path) or 1}: {what}: {exc}") from None


def _check_names(path: Path, text: str, scenario: Scenario) -> None:
    """Command names, ERROR codes and reason codes are the daemon's, before a daemon starts (a typo
    would otherwise fail the run at that step, or an expectation of an event that never exists pass)."""
    for i, step in enumerate(scenario.step):
        if isinstance(step, Command) and step.name not in COMMANDS:
            raise ScenarioError(f"{path}:{_line_of(text, f'.step[{i}].name') or 1}: step {i + 1} (command): unknown "
                                f"command {step.name!r}{_did_you_mean(step.name, COMMANDS)}: expected one of "
                                f"{', '.join(sorted(COMMANDS))}")
        if isinstance(step, Command) and step.refused is not None and step.refused not in ERROR_CODES:
            raise ScenarioError(f"{path}:{_line_of(text, f'.step[{i}].refused') or 1}: step {i + 1} (command) refused: "
                                f"unknown ERROR code {step.refused!r}{_did_you_mean(step.refused, ERROR_CODES)}: "
                                f"expected one of {', '.join(sorted(ERROR_CODES))} (docs/api.md, ERROR)")
        if isinstance(step, Expect):
            for key, codes, known in (("events", step.events, JOURNALED),
                                      ("no_events", step.no_events, JOURNALED),
                                      ("alarms", step.alarms or [], ALARM_REASONS)):
                wanted = ("an alarm's reason (devices/events.py Reason)" if key == "alarms" else
                          "a journaled reason (devices/events.py Reason, or one of the daemon's own records)")
                for code in codes:
                    if code not in known:
                        raise ScenarioError(
                            f"{path}:{_line_of(text, f'.step[{i}].{key}') or 1}: step {i + 1} (expect) {key}: unknown "
                            f"reason code {code!r}{_did_you_mean(code, known)}: expected {wanted}")


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _schema_refusal(path: Path, text: str, problem: SchemaProblem) -> str:
    """``FILE:LINE: where: what``, the line the key's (an unknown key's own, else its table's)."""
    steps = problem.path or ()
    named = (*steps, problem.field) if problem.kind is ProblemKind.UNKNOWN_FIELD and problem.field else steps
    line = (_line_of(text, f".{dotted(named)}") or _line_of(text, f".{dotted(steps)}")) if named else None
    return f"{path}:{line or 1}: {problem.sentence()}"


def _line_of(text: str, json_path: str) -> int | None:
    """The line a msgspec error path (``.step[2].cards``) points at: the step's ``[[step]]`` header, the
    key inside it where it is written there, else the top-level key."""
    lines = text.splitlines()
    step = re.match(r"\.step\[(\d+)\](?:\.(\w+))?", json_path)
    if step:
        headers = [i for i, line in enumerate(lines) if line.strip() == "[[step]]"]
        index = int(step.group(1))
        if index >= len(headers):
            return None
        start = headers[index]
        end = headers[index + 1] if index + 1 < len(headers) else len(lines)
        key = step.group(2)
        for i in range(start, end):
            if key and re.match(rf"\s*{key}\s*=", lines[i]):
                return i + 1
        return start + 1
    device = re.match(r"\.devices\.(\w+)(?:\.(\w+))?", json_path)
    if device:  # the key inside its [devices.<role>] table, else that table's header
        headers = [i for i, line in enumerate(lines) if re.match(r"\s*\[", line)]
        for start in headers:
            if re.match(rf"\s*\[\s*devices\.{device.group(1)}\s*\]", lines[start]):
                end = next((h for h in headers if h > start), len(lines))
                for i in range(start, end):
                    if device.group(2) and re.match(rf"\s*{device.group(2)}\s*=", lines[i]):
                        return i + 1
                return start + 1
    key = re.match(r"\.(\w+)", json_path)
    if key:
        for i, line in enumerate(lines):
            if re.match(rf"\s*\[?{key.group(1)}\b", line):
                return i + 1
    return None


def scenario_files(paths: list[Path]) -> list[Path]:
    """Files, and the *.toml files under folders (sorted); a path that does not exist is a name in the
    library (:data:`LIBRARY`: ``casino-000``, its folder, or ``casino-000/clean-round``, one scenario),
    so an installed cardbench runs the library from any directory; neither is an error."""
    out: list[Path] = []
    for path in paths:
        if not path.exists():
            path = library_scenario(path)
        if path.is_dir():
            out.extend(sorted(path.rglob("*.toml")))
        else:
            out.append(path)
    return out


def library_scenario(name: Path) -> Path:
    """The library's folder or scenario file ``name`` names (``casino-000``, ``casino-000/clean-round``,
    ``.toml`` optional); ScenarioError naming what the library has when it has none of that name."""
    named = LIBRARY / name
    for candidate in (named, named.with_name(named.name + ".toml")):
        if not name.is_absolute() and ".." not in name.parts and candidate.exists():
            return candidate
    casinos = sorted(folder.name for folder in LIBRARY.iterdir() if folder.is_dir()) if LIBRARY.is_dir() else []
    raise ScenarioError(f"{name}: no such file or folder, nor a scenario of the library (a casino: "
                        f"{', '.join(casinos)}; or one of its scenarios, e.g. casino-000/clean-round)")
