"""Build cardd's wheel into a folder: ``make wheel``, ``make deb`` and tests/packaging all build it here.

    python packaging/build_wheel.py OUT_DIR      # prints the wheel's path

The build runs on a fresh copy of what the wheel is made of (pyproject.toml and the packages its
``[tool.setuptools.packages.find] include`` names), never in the checkout: setuptools keeps a
``build/`` folder between builds and puts into the next wheel whatever is still there, a module
since moved or deleted included. It uses the venv's own setuptools (the locked one:
``--no-build-isolation``) and no network.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: left out of the copy: caches, and what a build or a test run leaves in a package folder
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")


def packages(root: Path) -> list[str]:
    """The top-level package folders pyproject.toml's find ``include`` patterns name (``core*``...)."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = project["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({pattern.split(".")[0].rstrip("*") for pattern in patterns})


def build_wheel(out: Path, root: Path = ROOT) -> Path:
    """The wheel built from ``root`` into ``out`` (made if missing); CalledProcessError when pip fails."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cardd-wheel-") as scratch:
        source = Path(scratch) / "src"
        source.mkdir()
        shutil.copy2(root / "pyproject.toml", source)
        for name in packages(root):
            shutil.copytree(root / name, source / name, ignore=IGNORED)
        wheels = Path(scratch) / "wheels"
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                        "--disable-pip-version-check", "--no-cache-dir", "--wheel-dir", str(wheels), str(source)],
                       check=True)
        (wheel,) = wheels.glob("cardd-*.whl")
        return Path(shutil.move(wheel, out / wheel.name))

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python packaging/build_wheel.py OUT_DIR")
    try:
        print(build_wheel(Path(sys.argv[1]).absolute()))
    except subprocess.CalledProcessError as exc:
        sys.exit(f"build_wheel: pip wheel failed with exit {exc.returncode} (its output is above)")
