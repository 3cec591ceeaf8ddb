"""RateLimitedLog at error level, and flush(): a trouble that ended is summarised at once, and the
same line is written again when the trouble comes back (the daemon's journal_commit_failed)."""
from __future__ import annotations

import structlog
from structlog.testing import capture_logs

from drivers.aio import RateLimitedLog


def test_error_lines_are_limited_and_a_flush_summarises_them_and_starts_over() -> None:
    now = [0.0]
    limited = RateLimitedLog(structlog.get_logger("test"), interval_s=60.0, burst=1, clock=lambda: now[0])
    with capture_logs() as logs:
        for retry in range(5):  # one a second: only the first is written
            now[0] = float(retry)
            limited.error("journal_commit_failed", retries=retry)
        limited.flush("journal_commit_failed")  # it ended: say how many were left out, now
        limited.flush("journal_commit_failed")  # nothing more to say
        limited.error("journal_commit_failed", retries=0)  # it came back within the minute: written
    assert [(e["event"], e["log_level"]) for e in logs] == [
        ("journal_commit_failed", "error"), ("log_rate_limited", "warning"), ("journal_commit_failed", "error")]
    assert logs[0]["retries"] == 0 and (logs[1]["line"], logs[1]["suppressed"], logs[1]["written"]) == (
        "journal_commit_failed", 4, 1)
