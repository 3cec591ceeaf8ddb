"""The JUnit XML reports of cardbench: one testsuite, one testcase a scenario (``cardbench run``,
``replay``) or a requirement (``cardbench conformance``).

The common subset JUnit consumers (CI servers, junitparser) read: ``testsuites`` > ``testsuite``
(tests, failures, errors, skipped, time) > ``testcase`` (classname, name, file, time) with a
``failure`` (message: what was expected vs got) for a failed one, a ``skipped`` (message: why)
for one that was not run.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from cardd.bench.runner import ScenarioResult


@dataclass(frozen=True, slots=True)
class JUnitCase:
    classname: str
    name: str
    seconds: float
    failure: str | None = None  # why it failed (None: it did not)
    skipped: str | None = None  # why it was not run (None: it was)
    failure_type: str = "ScenarioFailed"
    file: str = ""


def write_cases(cases: list[JUnitCase], path: Path, seconds: float, suite: str = "cardbench") -> None:
    skipped = sum(c.skipped is not None for c in cases)
    failures = sum(c.failure is not None and c.skipped is None for c in cases)
    suites = ET.Element("testsuites", tests=str(len(cases)), failures=str(failures), skipped=str(skipped),
                        time=f"{seconds:.3f}")
    element = ET.SubElement(suites, "testsuite", name=suite, tests=str(len(cases)), failures=str(failures),
                            errors="0", skipped=str(skipped), time=f"{seconds:.3f}")
    for case in cases:
        attributes = {"classname": case.classname, "name": case.name, "time": f"{case.seconds:.3f}"}
        if case.file:
            attributes["file"] = case.file
        item = ET.SubElement(element, "testcase", attributes)
        if case.skipped is not None:
            ET.SubElement(item, "skipped", message=case.skipped)
        elif case.failure is not None:
            failure = ET.SubElement(item, "failure", message=case.failure, type=case.failure_type)
            failure.text = case.failure
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)


def write_junit(results: list[ScenarioResult], path: Path, seconds: float) -> None:
    """The report of a run or a replay: classname = the scenario's folder, name = its file."""
    write_cases([JUnitCase(r.path.parent.name or "scenarios", r.path.stem, r.seconds,
                           failure=None if r.passed else r.message, skipped=r.skipped or None, file=str(r.path))
                 for r in results], path, seconds)
