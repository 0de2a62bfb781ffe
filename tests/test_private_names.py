"""No module imports another module's private names (issue 28): a name with a leading underscore
is its module's own business. lint-imports checks which modules may import which; this checks
what they import.

Tests, benches and scripts may reach into a module (they test it); sim/, live/, ui/ and
app_pages/ may not.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sim", "live", "ui", "app_pages")


def private_imports(path: Path) -> list[str]:
    """`module: name` for each `from <project module> import _name` in `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{node.module}: {alias.name}")
    return found


def test_no_module_imports_another_modules_private_names():
    offenders = {
        str(path.relative_to(ROOT)): names
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if (names := private_imports(path))
    }
    assert offenders == {}


def test_the_check_sees_a_private_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from sim.cli import _hidden\nfrom sim.cli import main\nimport os\n")
    assert private_imports(sample) == ["sim.cli: _hidden"]
