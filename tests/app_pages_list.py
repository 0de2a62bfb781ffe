"""The lesson files app.py navigates to, read from app.py itself (so a new page is not missed)."""

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app.py"


def lesson_files() -> list[str]:
    tree = ast.parse(APP.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "LESSONS":
            return [ast.literal_eval(item)[0] for item in node.value.elts]
    raise AssertionError("app.py has no LESSONS list")
