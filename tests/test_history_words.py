"""No tracked file narrates the project's history: code, tests and docs say what a behaviour is and
why, never which session, trial, review or stop found it, nor what the code did before (that is
git's). Each pattern is one phrase of that narrative, precise enough to leave the software's own
words alone: a device's session (firmware_bridge.session), the daemon's stop, a hostile device, a
device that no longer has an event, a measurement's date."""
from __future__ import annotations

import codecs
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THIS = Path(__file__).resolve().relative_to(ROOT).as_posix()

#: what the narrative says -> the phrases that say it (case-insensitive)
PATTERNS: dict[str, str] = {
    "a numbered stop": r"\bstops? \d+\b",
    "naming trials": r"\b(?:the|a|from the) tr[i]al\b|\btr[i]al's\b",
    "a review": r"\bthe (?:stop's )?review\b|\breview's\b|\breview helper\b",
    "who found it": (r"\bfound (?:by|in|during) (?:the |a |an )?(?:review|trial|stop|session|soak|ci\b|helper"
                     r"|coordinator|tester|new user|hostile|sampling|[\d,]+-shoe)"),
    "a tester or a new user": r"\bhostile tester\b|\b(?:by|as) a new user\b|\ba new user (?:found|met|saw|hit)\b",
    "when it was measured": r"\b(?:measured|found|seen|fixed) (?:in|at|during|since|before) (?:the |a |this |that )?"
                            r"(?:session|stop|trial|review)\b",
    "a working session": (r"\bin a session whose\b|\b(?:measuring|working|coding|earlier|previous) sessions?\b"
                          r"|\bsessions? of work\b"),
    "the people of the project": r"\bcoordinator'?s?\b|\bintegrator\b|\bhelper's (?:scope|section)\b"
                                 r"|\bengineers' helpers\b",
    "an issue": r"\bissue \d+\b|\bthe issue's\b|\bthe issue (?:asks|lists|says)\b",
    "what it did before": (r"\bpreviously\b|\bused to (?:be|have|fail|leave|share|cost|queue|wait|block|hang|crash"
                           r"|grow)\b"),
    "no longer": r"\bno longer\b(?! (?:has|have|had|trusts?|match(?:es)?|reach(?:es)?|does|waiting|established)\b)"
                 r"(?!\))",
    "a fix": r"\bbefore (?:the|its|this) fix\b|(?<!\w)\(fixed\)|\bfixed at\b|\bfound and fixed\b|~~",
    "a dated heading": r"^#+ .*\b20\d\d-\d\d-\d\d\b",
    "before, and now": r'(?-i:(?:^|[.;:!?]\s+|"""|#\s+)(?:Before,|Now)\s)',
    "since a date": r"(?<![-\w])(?:since|until|before|after) 20\d\d-\d\d-\d\d\b",
}

#: (path, pattern name) -> why the phrase is the software's own there, not its history
ALLOWED: dict[tuple[str, str], str] = {}

COMPILED = {name: re.compile(pattern, re.IGNORECASE | re.MULTILINE) for name, pattern in PATTERNS.items()}


def tracked_text_files() -> list[Path]:
    """Every file git tracks here, but this one and those that are not text."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    files = []
    for name in names.decode().split("\0"):
        path = ROOT / name
        if name and name != THIS and path.is_file() and b"\0" not in path.read_bytes()[:8192]:
            files.append(path)
    return files


def history_phrases(path: Path) -> list[str]:
    """``path:line: what: the line`` for each phrase of the narrative in ``path``."""
    name = path.relative_to(ROOT).as_posix()
    text = path.read_text(encoding="utf-8", errors="replace")
    found = []
    for what, pattern in COMPILED.items():
        if (name, what) in ALLOWED:
            continue
        for match in pattern.finditer(text):
            line = text.count("\n", 0, match.end() - 1) + 1
            shown = text.splitlines()[line - 1].strip()
            found.append(f"{name}:{line}: {what} ({match.group(0)!r}): {shown[:140]}")
    return found


def test_the_patterns_catch_the_narrative_and_leave_the_software_alone() -> None:
    # the narrative examples are kept in rot13, so that this file itself never reads as one
    narrative = [codecs.decode(phrase, "rot13") for phrase in (
        'zrnfherq ng fgbc 21', '(sebz gur gevny)', "gur erivrj'f: n eha", "sbhaq ol gur fgbc'f erivrj",
        'Sbhaq ol gur 2,000-fubr fbnx', 'gur ubfgvyr grfgre', 'zrg ol n arj hfre', 'va n frffvba jubfr', '(vffhr 7)',
        "gur vffhr'f gnetrg", 'vg hfrq gb snvy', 'cerivbhfyl', 'ab ybatre jnvgf', '(svkrq)',
        '## Gur qnrzba (2026-11-23, yngre)', 'vg ena. Orsber, vg uhat', 'gur raq. Abj vg jnvgf',
        'wbheanyf znqr orsber 2026-11-27', 'gur pbbeqvangbe')]
    software = ["the session's CONNECTED event", "the stop's last commit", "a hostile device",
                "the device no longer has", "a device it no longer trusts", "found by the check on open",
                "found by the walk that reads it", "cardctl log --until 2026-09-01",
                "Latest (2026-11-27, quiet machine)", "the key used to sign", "--update-golden after review",
                "its stop record", "Before the first card is drawn, any box may surrender", "len(fixed)"]
    for phrase in narrative:
        assert any(p.search(phrase) for p in COMPILED.values()), phrase
    for phrase in software:
        assert not any(p.search(phrase) for p in COMPILED.values()), phrase


def test_no_tracked_file_narrates_history() -> None:
    files = tracked_text_files()
    assert len(files) > 100  # git ls-files answered from this checkout
    found = [hit for path in files for hit in history_phrases(path)]
    assert not found, "say what the behaviour is and why, not its history:\n" + "\n".join(found)


def test_every_allowance_is_still_needed() -> None:
    for (name, what), why in ALLOWED.items():
        path = ROOT / name
        assert why and path.is_file(), name
        assert COMPILED[what].search(path.read_text(encoding="utf-8", errors="replace")), (name, what)
