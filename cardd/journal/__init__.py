"""The journal: cardd's durable, hash-chained record and its source of truth after a crash.

    journal = Journal.open("/var/lib/cardd/journal.db", create=True)
    seqs = journal.append([Entry.from_event(event)], snapshot=table_state)
    restored = journal.latest_snapshot()          # (seq, state) or None
    replay = journal.entries_after(restored[0])   # records written after that snapshot

docs/journal.md describes the file, the hash chain (with an auditor's script), retention
and the guarantees after a crash or a power cut.
"""
from .errors import (JournalBusy, JournalConfigError, JournalCorrupt, JournalEntryError, JournalError,
                     JournalExportError, JournalNotFound, JournalWriteError)
from .integrity import QUICK_CHECK_RECORDS, VerifyResult
from .journal import Delivery, Encoded, Journal, journal_files
from .lock import WriterLock
from .records import (INPUT_KEY, KIND_COMMAND, KIND_EVENT, KIND_EXPORT, KIND_INPUT, KIND_PRUNE, KIND_START,
                      KIND_STOP, SEVERITIES, Entry, Record, input_of)
from .retention import ExportFile, ExportResult, PruneResult, RetentionStatus
from .schema import MIN_RETENTION_DAYS

__all__ = [
    "Delivery", "Encoded", "Entry", "ExportFile", "ExportResult", "INPUT_KEY", "Journal", "JournalBusy", "JournalConfigError",
    "JournalCorrupt", "JournalEntryError", "JournalError", "JournalExportError", "JournalNotFound",
    "JournalWriteError", "KIND_COMMAND", "KIND_EVENT", "KIND_EXPORT", "KIND_INPUT", "KIND_PRUNE", "KIND_START",
    "KIND_STOP", "MIN_RETENTION_DAYS", "PruneResult", "QUICK_CHECK_RECORDS", "Record", "RetentionStatus",
    "SEVERITIES", "VerifyResult", "WriterLock", "input_of", "journal_files",
]
