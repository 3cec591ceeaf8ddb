"""docs/bench.md's conformance list is the suite's table: the same ids, sections, words and
protocols, in the same order; and every section a requirement names is one docs/protocol.md has."""
from __future__ import annotations

import re
from pathlib import Path

from cardd.bench.conformance import requirements
from tests.bench.conformance_support import BREAKING

ROOT = Path(__file__).resolve().parents[2]


def documented_rows() -> list[tuple[str, str, str, str]]:
    text = (ROOT / "docs" / "bench.md").read_text(encoding="utf-8")
    block = text.split("### The conformance list", 1)[1]
    rows = []
    for line in block.splitlines():
        match = re.match(r"^\| `([^`]+)` \| ([\d.]+) \| (.+) \| ([\d., ]+) \|$", line)
        if match:
            rows.append((match[1], match[2], match[3], match[4]))
        elif rows and not line.startswith("|"):
            break
    return rows


def test_the_conformance_list_is_the_suites_table() -> None:
    coded = [(r.id, r.section, r.title, ", ".join(r.protocols)) for r in requirements()]
    assert documented_rows() == coded


def test_every_requirement_names_a_section_of_the_protocol() -> None:
    protocol = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", protocol, flags=re.M))
    assert {r.section for r in requirements()} <= headings


def documented_faults() -> dict[str, set[str]]:
    """The fault switch table under the conformance list: switch -> the checks it makes fail."""
    text = (ROOT / "docs" / "bench.md").read_text(encoding="utf-8")
    block = text.split("### The conformance list", 1)[1].split("| fault switch |", 1)[1]
    faults = {}
    for line in block.splitlines()[2:]:
        if not line.startswith("|"):
            break
        switch, failing = line.strip("|").split("|")
        failing = failing.split("(", 1)[0]  # what follows in brackets is blocked, not failed
        faults[re.findall(r"`([^`]+)`", switch)[0]] = set(re.findall(r"`([^`]+)`", failing))
    return faults


def test_the_fault_table_is_what_the_fault_tests_expect() -> None:
    assert documented_faults() == {spec.split()[0]: set(ids) for spec, (_, _, ids) in BREAKING.items()}
