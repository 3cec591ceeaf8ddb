"""RateLimitedLog at error level, and flush(): a trouble that ended is summarised at once, and the
same line is written again when the trouble comes back (the daemon's journal_commit_failed)."""
from __future__ import annotations

import pytest
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



def test_a_budget_window_reports_what_it_held_back_at_its_end_on_the_loop() -> None:
    """WindowedBudget, the one mechanism behind RateLimitedLog and the API's refusal budget: the
    end is a loop timer at the window's end (its start + the interval); a window that held nothing
    back ends without a word; the key's next use opens a new window."""
    import asyncio

    from drivers.aio import WindowedBudget

    ended: list[tuple[str, str, int, dict[str, int]]] = []

    async def run() -> None:
        budget: WindowedBudget[str] = WindowedBudget(1.0, 2, lambda key, window: ended.append(
            (key, window.label, window.used, dict(window.held))))
        assert budget.use("a", "alice") and budget.use("a")
        assert budget.over("a") is not None  # two of two: spent
        assert budget.use("b") and budget.over("b") is None  # another key: its own window
        await asyncio.sleep(0.5)
        assert not budget.use("a")
        budget.hold("a", "x")
        budget.hold("a", "x")
        budget.hold("a", "y")
        await asyncio.sleep(0.75)  # the window's end (1.0) passed; an interval after the first held (1.5) not yet
        assert ended == [("a", "alice", 3, {"x": 2, "y": 1})]
        assert budget.over("a") is None and budget.use("a") and budget.over("a") is None  # a new window

    asyncio.run(run())
    assert [key for key, *_ in ended] == ["a"]  # "b" held nothing back


@pytest.mark.parametrize("offset_s", [1e6, -1e6])
def test_a_window_ends_an_interval_later_on_the_loop_whatever_the_budgets_clock(offset_s: float) -> None:
    """The budget's clock need not be the loop's (a test freezes or injects one): the end's timer is
    the time left on the budget's clock, not its window's end read as a time on the loop's clock
    (ahead: the summary never came; behind: at once, the window cut short)."""
    import asyncio

    from drivers.aio import WindowedBudget

    ended: list[str] = []

    async def run() -> None:
        loop = asyncio.get_running_loop()
        budget: WindowedBudget[str] = WindowedBudget(0.5, 1, lambda key, window: ended.append(key),
                                                     clock=lambda: loop.time() + offset_s)
        opened = loop.time()
        assert budget.use("a") and not budget.use("a")
        assert 0.0 < budget.hold("a") <= 0.5
        window = budget.over("a")
        assert window is not None and window.timer is not None
        assert opened + 0.499 <= window.timer.when() <= loop.time() + 0.501, (
            f"ends {window.timer.when() - loop.time():+.1f} s from now on the loop, not in 0.5 s")
        await asyncio.sleep(0.6)  # a timer due later than the window's end
        assert ended == ["a"]

    asyncio.run(run())
