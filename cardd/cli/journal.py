"""The journal: ``log`` (query, follow, export) through the API, and ``verify-journal``
(through the daemon, or straight on a journal file with ``--file``)."""
from __future__ import annotations

import csv
import json
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import click
from rich.console import Console
from rich.table import Table

from cardd.api.client import ApiClient
from cardd.cli.common import (EXIT_FAILURE, EXIT_INTEGRITY, EXIT_USAGE, CliError, api_errors, daemon, emit,
                              emit_json, json_option, run_command, to_builtins)
from cardd.journal import Journal, JournalError

SEVERITIES = ("info", "warning", "alarm")
EXPORT_COLUMNS = ("seq", "time", "kind", "source", "reason", "severity", "who", "message", "data")
#: records per LOG page when following or exporting
PAGE = 1000


def unix_time(text: str | None) -> float | None:
    """ISO 8601 (2026-11-23T10:00) or Unix seconds; BadParameter naming the text otherwise."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise click.BadParameter(f"{text!r}: give ISO 8601 (2026-11-23T10:00:00) or Unix seconds") from None


def render_event(event: dict[str, Any]) -> str:
    when = datetime.fromtimestamp(event["time"]).strftime("%H:%M:%S.%f")[:-3]
    who = f" ({event['who']})" if event.get("who") else ""
    return f"{event['seq']:>7} {when} {event['severity']:<7} {event['reason']:<22} {event['message']}{who}"


def pages(client: ApiClient, **filters: Any) -> Any:
    """Every matching record, page by page (each a list of event dicts)."""
    from_seq = filters.pop("from_seq", None)
    while True:
        reply = client.log(from_seq=from_seq, limit=PAGE, **filters)
        records = [to_builtins(r) for r in reply.records]
        if records:
            yield records
        if not reply.more or not records:
            return
        from_seq = records[-1]["seq"] + 1


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


@click.command("log")
@click.option("--since", help="from this time (ISO 8601 or Unix seconds)")
@click.option("--until", help="up to this time")
@click.option("--reason", help="only this reason code, e.g. CARD_READ or ROUND_VOID")
@click.option("--severity", type=click.Choice(SEVERITIES), help="this severity or worse")
@click.option("--round", "round_id", type=int, help="only this round")
@click.option("--limit", type=int, default=100, show_default=True, help="at most this many (the newest query page)")
@click.option("-f", "--follow", is_flag=True, help="then keep printing new events as they come")
@click.option("--export", "export_path", type=click.Path(path_type=Path), help="write every match to a new file")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default=None,
              help="export format (default: from the file name; .csv is CSV, anything else JSON lines)")
@json_option
def log_command(since: str | None, until: str | None, reason: str | None, severity: str | None,
                round_id: int | None, limit: int, follow: bool, export_path: Path | None, fmt: str | None,
                as_json: bool) -> None:
    """Query the journal by time, reason, severity and round; --follow; --export FILE.

    \b
    Example:
      cardctl log --round 12 --severity alarm
      cardctl log --since 2026-11-23T09:00 --export shift.csv
      cardctl log --follow --json
    """
    filters = {"since": unix_time(since), "until": unix_time(until), "reason": reason, "severity": severity,
               "round": round_id}
    filters = {k: v for k, v in filters.items() if v is not None}
    with daemon(timeout=None if follow else 30.0) as client, api_errors():
        if export_path is not None:
            exporter = Exporter(export_path, fmt or ("csv" if export_path.suffix == ".csv" else "jsonl"))
            try:
                for page in pages(client, **filters):
                    for event in page:
                        exporter.write(event)
            finally:
                exporter.close()
            emit({"exported": exporter.count, "file": str(export_path), "format": exporter.fmt}, as_json,
                 lambda out: out.print(f"{exporter.count} records written to {export_path} ({exporter.fmt})"))
            return
        if not follow:
            reply = client.log(limit=limit, **filters)
            records = [to_builtins(r) for r in reply.records]
            emit({"records": records, "more": reply.more}, as_json, lambda out: print_events(out, records, reply.more))
            return
        # --follow: the matching past (up to --limit), then live events with the same filters
        last = client.state()["seq"]
        for record in [to_builtins(r) for r in client.log(limit=limit, **filters).records]:
            show_line(record, as_json)
        for event in client.watch(since_seq=last):
            record = to_builtins(event)
            record.pop("class", None)
            if matches(record, filters):
                show_line(record, as_json)


def matches(event: dict[str, Any], filters: dict[str, Any]) -> bool:
    if "reason" in filters and event["reason"] != filters["reason"]:
        return False
    if "severity" in filters and SEVERITIES.index(event["severity"]) < SEVERITIES.index(filters["severity"]):
        return False
    if "round" in filters and (event.get("data") or {}).get("round") != filters["round"]:
        return False
    return "until" not in filters or event["time"] <= filters["until"]


def show_line(event: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json(event)
    else:
        click.echo(render_event(event))


def print_events(out: Console, records: list[dict[str, Any]], more: bool) -> None:
    table = Table(box=None, show_header=True)
    for column in ("seq", "time", "severity", "reason", "message", "who"):
        table.add_column(column)
    for e in records:
        table.add_row(str(e["seq"]), datetime.fromtimestamp(e["time"]).strftime("%Y-%m-%d %H:%M:%S"),
                      e["severity"], e["reason"], e["message"], e.get("who") or "")
    out.print(table)
    if more:
        out.print("(more: raise --limit or narrow the query)")


@click.command("verify-journal")
@click.option("--file", "path", type=click.Path(path_type=Path),
              help="check this journal file directly (read-only) instead of asking the daemon")
@json_option
def verify_journal(path: Path | None, as_json: bool) -> None:
    """Walk the journal's hash chain; exit 5 naming the first bad record.

    \b
    Example:
      cardctl verify-journal
      cardctl verify-journal --file /var/lib/cardd/journal.sqlite3
    """
    if path is None:
        with daemon(timeout=None) as client:
            result = run_command(client, "verify_journal")["data"]["result"]
    else:
        try:
            with Journal.open(path, readonly=True) as journal:
                checked = journal.verify()
        except JournalError as exc:  # a file that does not even open as a journal
            raise CliError(str(exc), EXIT_INTEGRITY if path.exists() else EXIT_USAGE) from None
        result = {"journal": str(path), "ok": checked.ok, "checked": checked.checked,
                  "first_bad_seq": checked.first_bad_seq, "problem": checked.problem}
    if not result["ok"]:
        if as_json:
            emit_json(result)
        raise CliError(f"{result['journal']}: chain broken at record {result['first_bad_seq']}: {result['problem']}",
                       EXIT_INTEGRITY)
    emit(result, as_json, lambda out: out.print(f"{result['journal']}: ok, {result['checked']} records verified"))


COMMANDS = (log_command, verify_journal)
