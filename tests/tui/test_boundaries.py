"""The console writes no SQL, and the engine never imports the console or its UI libraries."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import awa_tui

SQL = re.compile(
    r"\b(SELECT\s+.+\s+FROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX)"
    r"|ALTER\s+TABLE|DROP\s+(TABLE|SCHEMA)|TRUNCATE\s+\w+|pg_notify|\$1\b)",
    re.IGNORECASE | re.DOTALL,
)


def string_literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def test_awa_tui_contains_no_sql() -> None:
    package = Path(awa_tui.__file__).parent
    sources = sorted(package.rglob("*.py"))
    assert len(sources) > 10
    offenders = [
        f"{path.relative_to(package)}: {literal[:60]!r}"
        for path in sources
        for literal in string_literals(path)
        if SQL.search(literal)
    ]
    assert offenders == []


def test_the_scan_would_catch_sql() -> None:
    assert SQL.search("SELECT job_id FROM ready_entries WHERE job_id = $1")
    assert SQL.search("delete from dlq_entries")
    assert not SQL.search("Select a job, then press enter")


def test_storage_never_imports_the_console_or_textual() -> None:
    code = (
        "import storage, sys\n"
        "assert 'textual' not in sys.modules, 'textual'\n"
        "assert not [m for m in sys.modules if m.startswith('awa_tui')], 'awa_tui'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
