"""The JUnit XML report of a ``cardbench run``: one testsuite, one testcase a scenario.

The common subset JUnit consumers (CI servers, junitparser) read: ``testsuites`` > ``testsuite``
(tests, failures, errors, skipped, time) > ``testcase`` (classname = the scenario's folder, name = its
file, time) with a ``failure`` (message: the file, step and expected vs got) for a failed one, a
``skipped`` (message: why) for one real devices cannot run.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from cardd.bench.runner import ScenarioResult


def write_junit(results: list[ScenarioResult], path: Path, seconds: float) -> None:
    skipped = sum(bool(r.skipped) for r in results)
    failures = sum(not r.passed for r in results) - skipped
    suites = ET.Element("testsuites", tests=str(len(results)), failures=str(failures), skipped=str(skipped),
                        time=f"{seconds:.3f}")
    suite = ET.SubElement(suites, "testsuite", name="cardbench", tests=str(len(results)), failures=str(failures),
                          errors="0", skipped=str(skipped), time=f"{seconds:.3f}")
    for result in results:
        case = ET.SubElement(suite, "testcase", classname=result.path.parent.name or "scenarios",
                             name=result.path.stem, file=str(result.path), time=f"{result.seconds:.3f}")
        if result.skipped:
            ET.SubElement(case, "skipped", message=result.skipped)
        elif not result.passed:
            failure = ET.SubElement(case, "failure", message=result.message, type="ScenarioFailed")
            failure.text = result.message
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)
