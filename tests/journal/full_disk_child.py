"""Opens or creates a journal where the test says (on a private tmpfs it may have filled) and
prints one JSON line: what happened.

    python full_disk_child.py open|create JOURNAL [RECORDS]

``create`` makes a new journal and appends RECORDS records; ``open`` opens an existing one and
verifies it. Either prints ``{"error": class name, "message": text}`` when the journal refused,
else ``{"records": last seq, "verified": bool}``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cardd.journal import Entry, Journal, JournalError  # noqa: E402


def main() -> None:
    mode, path = sys.argv[1], Path(sys.argv[2])
    records = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    try:
        with Journal.open(path, create=mode == "create") as journal:
            for n in range(records):
                journal.append([Entry(kind="input", source="test", data={"n": n})])
            print(json.dumps({"records": journal.last_seq, "verified": journal.verify().ok}))
    except JournalError as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))


if __name__ == "__main__":
    main()
