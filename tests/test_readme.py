"""The README's Python examples are code a person can run: each block compiles (top-level
``await`` allowed, as in ``python -m asyncio``), and every name a block reads is defined by it,
by an earlier block, by Python, or is one the prose says is the reader's own."""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path
from typing import Any

import pytest

from storage import Client, Job, JobState
from storage.testing import work_one

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
YOURS = {"make_thumbnail", "payments", "Charge", "Invoice", "Report", "Sweep"}
"""Names the README's prose says stand for the reader's own code."""


def blocks() -> list[tuple[int, str]]:
    text = README.read_text()
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in BLOCK.finditer(text)]


def parse(line: int, code: str) -> ast.Module:
    tree = compile(
        code,
        f"README.md:{line}",
        "exec",
        flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
        dont_inherit=True,
    )
    assert isinstance(tree, ast.Module)
    return tree


def bound_and_read(tree: ast.Module) -> tuple[set[str], set[str]]:
    bound: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
    return bound, read


def test_the_readme_has_python_examples() -> None:
    assert len(blocks()) >= 6


@pytest.mark.parametrize(("line", "code"), blocks(), ids=lambda v: str(v)[:12])
def test_each_example_compiles_and_reads_only_defined_names(line: int, code: str) -> None:
    bound = set(dir(builtins)) | YOURS
    for earlier_line, earlier in blocks():
        if earlier_line >= line:
            break
        bound |= bound_and_read(parse(earlier_line, earlier))[0]
    own, read = bound_and_read(parse(line, code))
    assert read - bound - own == set(), f"README.md:{line} reads names it never defines"


def test_no_example_is_mangled_by_a_formatter() -> None:
    for line, code in blocks():
        assert not re.search(r"^\s*for \($", code, re.MULTILINE), f"README.md:{line}"
        assert not re.search(r"^\)\s+#", code, re.MULTILINE), f"README.md:{line}"


async def test_the_on_call_example_runs_as_shown(client: Client) -> None:
    """The block that pauses a queue, reads queues and failure groups and browses with a
    filter, run against a real schema with one job in it."""
    (line, code) = next((line, code) for line, code in blocks() if "pause_queue" in code)

    @client.task(kind="send_email", queue="mail")
    async def send_email(job: Job[Any]) -> None:
        raise ConnectionError("smtp refused for tenant 7")

    job = await client.insert({"to": "a@example.com"}, kind="send_email", max_attempts=1)
    await work_one(client, ["mail"])  # failed: a failure group to read and retry
    namespace: dict[str, object] = {"client": client, "job": job}
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    running = eval(compile(code, f"README.md:{line}", "exec", flags=flags), namespace)
    if running is not None:
        await running
    assert "page" in namespace
    retried = await client.get_job(job.id)
    assert retried is not None
    assert retried.state is JobState.AVAILABLE  # the example retried its failure group
