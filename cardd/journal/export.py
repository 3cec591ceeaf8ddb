"""Writing records to an export file: JSON lines or CSV, fsynced, with the file's SHA-256."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from pathlib import Path
from typing import Iterable

from .errors import JournalExportError
from .files import fsync_dir
from .records import Record

FORMATS = ("jsonl", "csv")
CSV_COLUMNS = ("seq", "time", "ts_ns", "kind", "source", "reason", "severity", "who", "round", "data", "prev", "hash")


def write_export(path: Path, fmt: str, batches: Iterable[list[Record]]) -> tuple[int, str]:
    """Write the records to a new file at ``path``; returns (count, SHA-256 hex of the file).
    The file is created exclusively (an existing file is never overwritten) and fsynced; on
    any failure the partial file is removed."""
    if fmt not in FORMATS:
        raise JournalExportError(f"export format {fmt!r}: one of {', '.join(FORMATS)}")
    digest, count = hashlib.sha256(), 0
    try:
        out = open(path, "xb")
    except FileExistsError:
        raise JournalExportError(f"export file {path} exists: exports never overwrite a file") from None
    except OSError as exc:
        raise JournalExportError(f"export file {path} cannot be created: {exc.strerror}") from None
    try:
        with out:
            if fmt == "csv":
                chunk = _csv_text([CSV_COLUMNS]).encode()
                digest.update(chunk)
                out.write(chunk)
            for batch in batches:
                chunk = (_jsonl_text(batch) if fmt == "jsonl" else _csv_text(_csv_rows(batch))).encode()
                digest.update(chunk)
                out.write(chunk)
                count += len(batch)
            out.flush()
            os.fsync(out.fileno())
        fsync_dir(path.parent)
    except BaseException as exc:
        path.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise JournalExportError(f"export file {path} cannot be written: {exc.strerror}") from None
        raise
    return count, digest.hexdigest()


def _jsonl_text(batch: list[Record]) -> str:
    return "".join(json.dumps(r.to_json_dict(), ensure_ascii=False, separators=(",", ":")) + "\n" for r in batch)


def _csv_rows(batch: list[Record]) -> list[tuple[object, ...]]:
    return [(r.seq, r.time_iso, r.ts_ns, r.kind, r.source, r.reason, r.severity, r.who, r.round or "", r.data_json,
             r.prev.hex(), r.hash.hex()) for r in batch]


def _csv_text(rows: Iterable[Iterable[object]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()

