"""Each layer talks only to the ones below it (docs/architecture.md): checked on every import."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "drivers", "firmware_bridge", "devices", "simulators", "cardd")
#: what each package may import from the project (itself always allowed)
ALLOWED = {
    "core": set(),
    "drivers": {"core"},
    "firmware_bridge": {"drivers", "core"},
    "devices": {"firmware_bridge", "core"},
    "simulators": {"firmware_bridge", "drivers", "core"},
    "cardd": {"devices", "firmware_bridge", "drivers", "simulators", "core"},
}


def project_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found |= {n.split(".")[0] for n in names if n.split(".")[0] in PACKAGES}
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_layers_import_only_downwards(package):
    wrong = {
        f"{path.relative_to(ROOT)} imports {', '.join(sorted(bad))}"
        for path in (ROOT / package).rglob("*.py")
        if (bad := project_imports(path) - ALLOWED[package] - {package})
    }
    assert not wrong, f"{package} may import only {sorted(ALLOWED[package]) or 'nothing'} from the project: {sorted(wrong)}"


def test_the_checker_sees_a_violation(tmp_path):
    sample = tmp_path / "bad.py"
    sample.write_text("from devices.tracker.table import Table\nimport drivers.errors\n")
    assert project_imports(sample) == {"devices", "drivers"}
