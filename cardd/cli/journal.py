"""The journal: ``log`` (query, follow, export) through the API, and ``verify-journal``
(through the daemon, or straight on a journal file with ``--file``).

``log --export FILE`` with at most a time range is the archive export: the daemon writes the
file in its export directory and journals it (``export_journal``, docs/api.md), then cardctl
copies it to FILE and checks the copy's SHA-256 against the chain's export record. With
``--reason``, ``--severity`` or ``--round`` it is a plain copy of the matching records made
here, which the journal knows nothing of."""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import os
import re
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import click
from click.core import ParameterSource
from rich.console import Console

from cardd.api.client import ApiClient
from cardd.api.protocol import LOG_LIMIT_MAX
from cardd.cli.common import (EXIT_FAILURE, EXIT_INTEGRITY, EXIT_USAGE, CliError, check_output_directory, emit_json,
                              json_option, money)
from cardd.cli.console import console, emit
from cardd.cli.daemon_client import api_errors, daemon, run_command, to_builtins
from cardd.cli.log_times import BadTime, unix_seconds
from cardd.cli.shown import shown, visible
from cardd.journal import Journal, JournalCorrupt, JournalError
from cardd.journal.anchors import (Anchor, AnchorResult, AnchorsFileError, MixedTables, check_anchors, parse_table,
                                   read_anchors, select_table)
from cardd.message_text import fields_line, message_text
from devices.tracker.inputs import COMMAND_NAMES, RECORDS
from firmware_bridge.messages import decode

SEVERITIES = ("info", "warning", "alarm")
EXPORT_COLUMNS = ("seq", "time", "kind", "source", "reason", "severity", "who", "message", "data")
#: records per LOG page when exporting or grepping
PAGE = 1000
#: records ``log`` shows when -n/--lines is not given: about a screenful
LINES = 20
#: bytes per read when copying the daemon's export file
COPY_CHUNK = 1 << 20


def unix_time(text: str | None, now: datetime | None = None) -> float | None:
    """``--since``/``--until``'s text as Unix seconds (cardd.cli.log_times: "1 hour ago", "today",
    an ISO time...), read against the local clock now; BadParameter naming the text otherwise."""
    if text is None:
        return None
    try:
        return unix_seconds(text, datetime.now() if now is None else now)
    except BadTime as exc:
        raise click.BadParameter(str(exc)) from None


def grep_pattern(text: str | None) -> re.Pattern[str] | None:
    """``--grep``'s regular expression, case-insensitive unless it has a capital (journalctl's rule)."""
    if text is None:
        return None
    try:
        return re.compile(text, 0 if any(c.isupper() for c in text) else re.IGNORECASE)
    except re.error as exc:
        raise click.BadParameter(f"{text!r}: not a regular expression ({exc.msg} at position {exc.pos})") from None


def shown_message(event: dict[str, Any]) -> str:
    """The message column for a person. An ``input`` record has no message of its own: its input
    type and fields are shown, a device's message decoded (its record keeps the payload's bytes in
    hex under ``message``, for replay, which a person cannot read)."""
    data = event.get("data") or {}
    if event.get("kind") != "input" or not isinstance(data, dict):
        return str(event["message"])
    kind, payload = str(data.get("type", "input")), data.get("message")
    if kind == "DeviceMessage" and isinstance(payload, str):
        try:
            message = decode(bytes.fromhex(payload))
        except ValueError:  # MessageDecodeError too: show what was kept
            return f"input: DeviceMessage {payload} (not a message this cardctl decodes)"
        source = f" from the {data.get('device', 'device')}"
        return f"input: {message_text(message, source)}"
    record = RECORDS.get(kind)
    name = COMMAND_NAMES.get(record, kind) if record is not None else kind  # a link's or clock's input: no command
    # in the record's own order (box player amount), as the command takes them; the journal keeps them sorted
    order = [f.name for f in dataclasses.fields(record)] if record is not None else []
    keys = sorted(data, key=lambda k: order.index(k) if k in order else len(order))
    return fields_line(f"input: {name}", ((k, input_field(k, data[k])) for k in keys
                                          if k not in ("type", "v", "who", "role") and data[k] not in (None, "", [], {})))


def input_field(name: str, value: Any) -> Any:
    """A table input's field as people read it: money (``amount``, cents) in units as cardctl shows
    it; a co-player's answer as cardctl's --co-player takes it (``bob=joins``, ``carol=declines:2``)."""
    if name == "amount" and isinstance(value, int) and not isinstance(value, bool):
        return money(value)
    if name == "co_players" and isinstance(value, list):  # "; ": an amount may hold a comma (1,250.50)
        return "; ".join(co_player_answer(answer) if isinstance(answer, dict) else str(answer) for answer in value)
    return value


def co_player_answer(answer: dict[str, Any]) -> str:
    joins = answer.get("joins")
    detail = answer.get("amount") if joins else answer.get("stays_on")
    shown = money(detail) if joins and isinstance(detail, int) else detail
    return f"{answer.get('player')}={'joins' if joins else 'declines'}" + ("" if detail is None else f":{shown}")


def render_event(event: dict[str, Any], terminal: bool = True) -> str:
    """One record as ``log`` prints it, with and without ``--follow``: one line, its texts made
    visible (cardd.cli.shown). Off a terminal its fields are tab-separated (a field's own tab is
    ``\\x09``); on one they are padded into columns."""
    fields = [visible(field) for field in record_fields(event)]
    if not terminal:
        return "\t".join(fields)
    seq, when, severity, reason, message, who = fields
    return f"{seq:<7} {when} {severity:<7} {reason:<22} {message}" + (f" ({who})" if who else "")


def pages(client: ApiClient, grep: re.Pattern[str] | None = None, **filters: Any) -> Any:
    """Every matching record, page by page (each a list of event dicts), the oldest first."""
    from_seq = filters.pop("from_seq", None)
    while True:
        reply = client.log(from_seq=from_seq, limit=PAGE, **filters)
        records = [to_builtins(r) for r in reply.records]
        found = [r for r in records if grep is None or grep_matches(r, grep)]
        if found:
            yield found
        if not reply.more or not records:
            return
        from_seq = records[-1]["seq"] + 1


def newest(client: ApiClient, lines: int, grep: re.Pattern[str] | None,
           **filters: Any) -> tuple[list[dict[str, Any]], bool]:
    """The last ``lines`` matching records, oldest first, and whether older ones match too. The
    daemon answers the newest of its filters; ``--grep`` reads the messages as cardctl shows them,
    so pages of them are read back from the newest until enough match."""
    if grep is None:
        reply = client.log(limit=lines, newest=True, **filters)
        return [to_builtins(r) for r in reply.records], reply.more
    found: list[dict[str, Any]] = []
    to_seq = None
    while True:
        reply = client.log(limit=PAGE, newest=True, **({} if to_seq is None else {"to_seq": to_seq}), **filters)
        records = [to_builtins(r) for r in reply.records]
        found[:0] = [r for r in records if grep_matches(r, grep)]
        if len(found) > lines or not reply.more or not records:
            return found[-lines:], len(found) > lines
        to_seq = records[0]["seq"] - 1


def grep_matches(event: dict[str, Any], grep: re.Pattern[str]) -> bool:
    return grep.search(shown_message(event)) is not None


class Exporter:
    """Writes events to a new file as JSON lines or CSV (never over an existing file)."""

    def __init__(self, path: Path, fmt: str) -> None:
        try:
            self.file: IO[str] = open(path, "x", newline="")
        except FileExistsError:
            raise CliError(f"{path} exists: an export never overwrites a file", EXIT_USAGE) from None
        except OSError as exc:
            raise CliError(f"{path}: {exc.strerror}", EXIT_FAILURE) from None
        self.fmt, self.count = fmt, 0
        self.csv = csv.writer(self.file) if fmt == "csv" else None
        if self.csv is not None:
            self.csv.writerow(EXPORT_COLUMNS)

    def write(self, event: dict[str, Any]) -> None:
        if self.csv is not None:
            self.csv.writerow([json.dumps(event[c]) if c == "data" else event[c] for c in EXPORT_COLUMNS])
        else:
            self.file.write(json.dumps(event) + "\n")
        self.count += 1

    def close(self) -> None:
        self.file.close()


def archive_export(client: ApiClient, path: Path, fmt: str, since: float | None,
                   until: float | None) -> dict[str, Any]:
    """The daemon's export (journaled), copied to ``path`` and checked against the chain's
    export record; what was done, for the output."""
    args = {"format": fmt, **({} if since is None else {"since": since}), **({} if until is None else {"until": until})}
    result = run_command(client, "export_journal", **args)["data"]["result"]
    with api_errors():
        noted = client.log(from_seq=result["record_seq"], to_seq=result["record_seq"]).records
    chain = to_builtins(noted[0])["data"] if noted else {}
    if [chain.get(k) for k in ("file", "sha256", "first_seq", "last_seq")] != \
            [result[k] for k in ("file", "sha256", "first_seq", "last_seq")]:
        raise CliError(f"the daemon's reply does not match its export record (seq {result['record_seq']}) in the "
                       "journal", EXIT_INTEGRITY)
    copy_checked(Path(result["file"]), path, chain["sha256"], result["record_seq"])
    return {"exported": result["count"], "file": str(path), "format": result["format"],
            "first_seq": result["first_seq"], "last_seq": result["last_seq"], "sha256": result["sha256"],
            "record_seq": result["record_seq"], "daemon_file": result["file"]}


def copy_checked(source: Path, target: Path, sha256: str, record_seq: int) -> None:
    """Copy the daemon's export file to a new ``target``, hashing it on the way; a copy whose
    SHA-256 is not the journaled one is removed (exit 5)."""
    kept = f"the export stays in {source} on the table computer (journal record {record_seq})"
    try:
        reader = open(source, "rb")
    except OSError as exc:
        raise CliError(f"{source}: {exc.strerror}: cannot read the daemon's export (the export directory's group, "
                       f"docs/install.md section 13); {kept}", EXIT_FAILURE) from None
    digest = hashlib.sha256()
    try:
        with reader, open(target, "xb") as writer:
            while chunk := reader.read(COPY_CHUNK):
                digest.update(chunk)
                writer.write(chunk)
            writer.flush()
            os.fsync(writer.fileno())
    except FileExistsError:
        raise CliError(f"{target} exists: an export never overwrites a file; {kept}", EXIT_USAGE) from None
    except OSError as exc:
        target.unlink(missing_ok=True)
        raise CliError(f"{target}: {exc.strerror}; {kept}", EXIT_FAILURE) from None
    if digest.hexdigest() != sha256:
        target.unlink(missing_ok=True)
        raise CliError(f"{source}: SHA-256 {digest.hexdigest()} is not the journaled {sha256} (record {record_seq}): "
                       "the file changed after the export; copy removed", EXIT_INTEGRITY)


def query_export(client: ApiClient, path: Path, fmt: str, filters: dict[str, Any],
                 grep: re.Pattern[str] | None) -> dict[str, Any]:
    """The records matching a filtered query, written here (not an archive: nothing journaled)."""
    exporter = Exporter(path, fmt)
    try:
        for page in pages(client, grep, **filters):
            for event in page:
                exporter.write(event)
    finally:
        exporter.close()
    return {"exported": exporter.count, "file": str(path), "format": exporter.fmt}


@click.command("log")
@click.option("-n", "--lines", "--limit", "lines", type=click.IntRange(1, LOG_LIMIT_MAX), default=LINES,
              show_default=True, help="the newest this many matching records, printed oldest first")
@click.option("--since", help="from this time: 'now', 'today', 'yesterday 18:00', '1 hour ago', "
                              "'30 minutes ago', ISO 8601 (2026-11-23T10:00) or Unix seconds")
@click.option("--until", help="up to this time (the same forms)")
@click.option("--reason", help="only this reason code, e.g. CARD_ASSIGNED or ROUND_VOID")
@click.option("--severity", type=click.Choice(SEVERITIES), help="this severity or worse")
@click.option("--round", "round_id", type=click.IntRange(min=0), help="only this round")
@click.option("--who", help="only records of this user (the who column)")
@click.option("--grep", "grep_text", metavar="REGEX",
              help="only records whose message (as shown) matches; case-insensitive unless REGEX has a capital")
@click.option("-f", "--follow", is_flag=True, help="then keep printing new records as they come, in the same lines")
@click.option("--export", "export_path", type=click.Path(path_type=Path),
              help="write to a new file. With at most --since/--until: the daemon's archive export, journaled "
                   "(only exported records are ever pruned), copied here and checked against its SHA-256 in the "
                   "journal. With --reason/--severity/--round/--who/--grep: only a copy of the matching records, "
                   "not an archive: nothing is journaled and nothing becomes prunable")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default=None,
              help="export format (default: from the file name; .csv is CSV, anything else JSON lines)")
@json_option
def log_command(lines: int, since: str | None, until: str | None, reason: str | None, severity: str | None,
                round_id: int | None, who: str | None, grep_text: str | None, follow: bool,
                export_path: Path | None, fmt: str | None, as_json: bool) -> None:
    """\b
    Example:
      cardctl log
      cardctl log -n 50 --since "1 hour ago" --severity alarm
      cardctl log --since yesterday --until today --grep "alice"
      cardctl log --round 12 --who dana
      cardctl log --until 2026-09-01 --export archive-to-august.jsonl
      cardctl log --round 12 --export round-12.csv
      cardctl log -f --reason ROUND_VOID
    """
    if export_path is not None:
        given = click.get_current_context().get_parameter_source("lines") is not ParameterSource.DEFAULT
        ignored = [option for option, used in (("--follow", follow), ("-n/--lines", given)) if used]
        if ignored:  # an export is every matching record, once: it was written as if they were not there
            raise CliError(f"--export writes every matching record once: {' and '.join(ignored)} cannot go with it",
                           EXIT_USAGE)
    now = datetime.now()  # one clock for both ends: "today" and "1 hour ago" read against the same moment
    filters = {"since": unix_time(since, now), "until": unix_time(until, now), "reason": reason,
               "severity": severity, "round": round_id, "who": who}
    filters = {k: v for k, v in filters.items() if v is not None}
    grep = grep_pattern(grep_text)
    with daemon(timeout=None if follow else 30.0) as client, api_errors():
        if export_path is not None:
            fmt = fmt or ("csv" if export_path.suffix == ".csv" else "jsonl")
            if export_path.exists():
                raise CliError(f"{export_path} exists: an export never overwrites a file", EXIT_USAGE)
            check_output_directory(export_path)
            if filters.keys() <= {"since", "until"} and grep is None:
                done = archive_export(client, export_path, fmt, unix_time(since, now), unix_time(until, now))
                text = (f"{done['exported']} records (seq {done['first_seq']}..{done['last_seq']}) exported and "
                        f"journaled (record {done['record_seq']}), written to {export_path} ({fmt}), "
                        f"SHA-256 {done['sha256']} checked")
            else:
                done = query_export(client, export_path, fmt, filters, grep)
                text = f"{done['exported']} records written to {export_path} ({fmt}; a query, not an archive export)"
            emit(done, as_json, lambda out: out.print(shown(text)))
            return
        last = client.state()["seq"] if follow else 0
        records, more = newest(client, lines, grep, **filters)
        if not follow:
            emit({"records": records, "more": more}, as_json, lambda out: print_events(out, records, more))
            return
        # --follow: the newest matching records, then live ones with the same filters, in the same lines
        out = console()
        for record in records:
            if record["seq"] <= last:  # a later one comes again through the watch
                show_line(out, record, as_json)
        for event in client.watch(since_seq=last):
            record = to_builtins(event)
            record.pop("class", None)
            if matches(record, filters, grep):
                show_line(out, record, as_json)


def matches(event: dict[str, Any], filters: dict[str, Any], grep: re.Pattern[str] | None = None) -> bool:
    if "reason" in filters and event["reason"] != filters["reason"]:
        return False
    if "severity" in filters and SEVERITIES.index(event["severity"]) < SEVERITIES.index(filters["severity"]):
        return False
    if "round" in filters and (event.get("data") or {}).get("round") != filters["round"]:
        return False
    if "who" in filters and event.get("who") != filters["who"]:
        return False
    if grep is not None and not grep_matches(event, grep):
        return False
    return "until" not in filters or event["time"] < filters["until"]


def show_line(out: Console, event: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json(event)
        return
    print_records(out, [event])
    out.file.flush()  # a follower's reader sees each record as it comes, through a pipe too


def print_events(out: Console, records: list[dict[str, Any]], more: bool) -> None:
    if not records:
        out.print("no records match")
        return
    print_records(out, records)
    if more:  # on stderr: stdout is the records, one a line (grep -c counts them)
        click.echo("(more: older records match: raise -n/--lines, or narrow the query with --since/--until)",
                   err=True)


def print_records(out: Console, records: list[dict[str, Any]]) -> None:
    """Each record on one line (:func:`render_event`), whatever its length: never wrapped by cardctl."""
    if not out.is_terminal:  # written as it is: rich would turn the tabs into spaces
        out.file.write("".join(render_event(e, terminal=False) + "\n" for e in records))
        return
    for e in records:
        out.print(shown(render_event(e)), soft_wrap=True)


def record_fields(e: dict[str, Any]) -> tuple[str, ...]:
    """A record's columns in the view: seq, time, severity, reason, message, who."""
    return (str(e["seq"]), datetime.fromtimestamp(e["time"]).strftime("%Y-%m-%d %H:%M:%S"), e["severity"],
            e["reason"], shown_message(e), e.get("who") or "")


@click.command("verify-journal")
@click.option("--file", "path", type=click.Path(path_type=Path),
              help="check this journal file directly (read-only) instead of asking the daemon")
@click.option("--anchors", "anchors_path", type=click.Path(path_type=Path), metavar="FILE",
              help="then check the journal against the anchors it published to the floor's broker (JSON lines "
                   "from the cardd/v1/SITE/TABLE/anchor topic): each anchor's record must be in the journal with "
                   "that hash, which a chain rewritten after the fact cannot reproduce. Reads the journal file "
                   "itself, so it needs --file (the daemon's journal read-only, or a copy with its -wal and -head)")
@click.option("--table", "table_text", metavar="SITE/TABLE",
              help="with --anchors: check only this table's anchors (needed when the file holds several tables')")
@json_option
def verify_journal(path: Path | None, anchors_path: Path | None, table_text: str | None, as_json: bool) -> None:
    """\b
    Example:
      cardctl verify-journal
      cardctl verify-journal --file /var/lib/cardd/journal.sqlite3
      cardctl verify-journal --file /var/lib/cardd/journal.sqlite3 --anchors bj-07-anchors.jsonl
    """
    selected = _anchors_asked(path, anchors_path, table_text)
    anchored: AnchorResult | None = None
    if path is None:
        with daemon(timeout=None) as client:
            result = run_command(client, "verify_journal")["data"]["result"]
    else:
        try:
            with Journal.open(path, readonly=True) as journal:
                if selected is None:
                    checked = journal.verify()
                else:
                    anchored = check_anchors(journal, selected[2])
                    checked = anchored.verify
        except JournalCorrupt as exc:  # found by the check on open: the same answer as a verify's, --json too
            if exc.seq is None and _looks_like_an_export(path):  # a good archive is not a damaged journal
                raise CliError(f"{path}: a journal export (JSON lines or CSV), not a journal file: --file reads the "
                               "SQLite journal or a copy of it; an export is checked against the SHA-256 its "
                               "journal record holds (cardctl log --reason JOURNAL_EXPORTED), its records' hashes "
                               "as docs/journal.md shows", EXIT_USAGE) from None
            if as_json:
                emit_json({"journal": str(path), "ok": False, "checked": None, "first_bad_seq": exc.seq,
                           "problem": exc.problem})
            raise CliError(str(exc), EXIT_INTEGRITY) from None
        except JournalError as exc:  # no such file, or one SQLite cannot open: not a finding about the chain
            if not path.exists():
                raise CliError(str(exc), EXIT_USAGE) from None
            hint = ("" if os.access(path.absolute().parent, os.W_OK) else
                    f" (SQLite reads a journal by writing its -shm beside it, and {path.absolute().parent} is "
                    "read-only: copy the file, with its -wal and -head, to a writable directory and verify the copy)")
            raise CliError(f"{exc}{hint}", EXIT_FAILURE) from None
        result = {"journal": str(path), "ok": checked.ok, "checked": checked.checked,
                  "first_bad_seq": checked.first_bad_seq, "problem": checked.problem}
    if not result["ok"]:
        if as_json:
            emit_json(result)
        raise CliError(str(JournalCorrupt(result["journal"], result["first_bad_seq"], result["problem"])),
                       EXIT_INTEGRITY)  # the line a check on open's refusal gives
    verified = f"{result['journal']}: ok, {result['checked']} records verified"
    if anchored is None or selected is None:
        emit(result, as_json, lambda out: out.print(shown(verified)))
        return
    site, table, _ = selected
    said = f"journal {result['journal']}: {anchored.line()}"
    result = {**result, "ok": anchored.ok, "problem": None if anchored.ok else said,
              "anchors": {"file": str(anchors_path), "site": site, "table": table, **anchored.to_json_dict()}}
    if not anchored.ok:  # the chain is sound in itself: what it does not reproduce is what was published
        if as_json:
            emit_json(result)
        else:
            console().print(shown(verified))
        raise CliError(said, EXIT_INTEGRITY)

    def both(out: Console) -> None:
        out.print(shown(verified))
        out.print(shown(said))
    emit(result, as_json, both)


def _anchors_asked(path: Path | None, anchors_path: Path | None,
                   table_text: str | None) -> tuple[str, str, list[Anchor]] | None:
    """The table and the anchors to check the journal against (read before the journal: a file
    that is no anchors file is said before a long verify), or None without --anchors."""
    if anchors_path is None:
        if table_text is not None:
            raise CliError("--table chooses among the anchors of --anchors FILE: give --anchors too", EXIT_USAGE)
        return None
    if path is None:
        raise CliError("--anchors reads the journal file itself, not through the daemon: give --file PATH too (the "
                       "daemon's journal, read-only, e.g. --file /var/lib/cardd/journal.sqlite3, or a copy of it with "
                       "its -wal and -head)", EXIT_USAGE)
    try:
        wanted = None if table_text is None else parse_table(table_text)
    except ValueError as exc:
        raise CliError(f"--table {exc}", EXIT_USAGE) from None
    try:
        return select_table(read_anchors(anchors_path), wanted, str(anchors_path))
    except MixedTables as exc:
        raise CliError(f"{exc}: choose one with --table SITE/TABLE (e.g. --table {'/'.join(exc.tables[0])})",
                       EXIT_USAGE) from None
    except AnchorsFileError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def _looks_like_an_export(path: Path) -> bool:
    """The start of what ``log --export`` writes: a JSON line of a record, or the CSV header."""
    try:
        with open(path, "rb") as file:
            start = file.read(64)
    except OSError:
        return False
    return start.startswith((b"{\"seq\":", b"seq,time,"))  # JSON lines; CSV, the archive's or a query's


COMMANDS = (log_command, verify_journal)
