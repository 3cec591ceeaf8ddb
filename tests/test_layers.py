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


def test_the_floor_service_shares_nothing_with_a_table_but_the_contract():
    """cardfloor (cardd/floor) reads the topic contract on its own (cardd/floor/contract.py): it
    imports only core's helpers and itself, never the table's daemon, journal, export or devices."""
    wrong = set()
    for path in (ROOT / "cardd" / "floor").rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            wrong |= {f"{path.relative_to(ROOT)} imports {name}" for name in names
                      if name.split(".")[0] in PACKAGES and name.split(".")[0] != "core"
                      and not name.startswith("cardd.floor")}
    assert not wrong, sorted(wrong)


def test_the_checker_sees_a_violation(tmp_path):
    sample = tmp_path / "bad.py"
    sample.write_text("from devices.tracker.table import Table\nimport drivers.errors\n")
    assert project_imports(sample) == {"devices", "drivers"}


# ---- no import circles, and a game that knows nothing of the protocol -----------------------

def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(path: Path, modules: set[str], root: Path = ROOT) -> set[str]:
    """The project modules ``path`` imports, however it imports them: ``import a.b``, ``from a import b``
    (b a module or a name in a), relative forms, and imports under ``if TYPE_CHECKING:`` alike."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            targets = [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # "a.b.C" (a name in module a.b) -> "a.b"
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    paths = [p for package in packages for p in (root / package).rglob("*.py")]
    modules = {module_name(p, root) for p in paths}
    return {module_name(p, root): module_imports(p, modules, root) for p in paths}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_no_import_circles_anywhere():
    cycles = import_cycles(import_graph())
    assert not cycles, f"modules that import each other in a circle: {cycles}"


def test_the_cycle_checker_sees_a_planted_circle(tmp_path):
    pkg = tmp_path / "planted"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from planted.sub import b\n")
    (pkg / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import C\n")
    (pkg / "sub" / "c.py").write_text("from ..a import something\n")  # relative, a name in module a
    (pkg / "d.py").write_text("import planted.a\n")  # imports into the circle, is not part of it
    graph = import_graph(tmp_path, ("planted",))
    assert graph["planted.sub.c"] == {"planted.a"} and graph["planted.a"] == {"planted.sub", "planted.sub.b"}
    assert import_cycles(graph) == [["planted.a", "planted.sub.b", "planted.sub.c"]]


def test_the_game_imports_nothing_of_the_protocol_or_the_drivers():
    graph = import_graph()
    wrong = {f"{m} imports {i}" for m, imports in graph.items() if m.startswith("devices.game")
             for i in imports if i.split(".")[0] in ("firmware_bridge", "drivers")}
    assert not wrong, f"devices/game is the game alone (cards come from core.cards): {sorted(wrong)}"
