"""A handler's exception keeps its traceback in the error entry: frames only, bounded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel

from storage import Cancel, Client, Job, JobState, TerminalError
from storage.testing import work_one
from storage.values.payload import MAX_TRACEBACK_BYTES, traceback_frames

SECRET_ARG = "s3cr3t-arg-value"
SECRET_LOCAL = "s3cr3t-local-value"
SECRET_OUTPUT = "s3cr3t-output-value"


class Mail(BaseModel):
    password: str = SECRET_ARG
    depth: int = 0


def send(depth: int) -> None:
    token = SECRET_LOCAL  # a local the traceback must not carry
    if depth > 0:
        send(depth - 1)
        return
    raise ConnectionError(f"smtp refused ({len(token)})")


def register(client: Client) -> None:
    @client.task(Mail)
    async def mail(job: Job[Mail]) -> None:
        job.set_output({"note": SECRET_OUTPUT})
        if job.args.depth < 0:
            raise TerminalError("no such mailbox")
        send(job.args.depth)


async def test_the_entry_holds_the_handlers_frames_and_nothing_else(client: Client) -> None:
    register(client)
    await client.insert(Mail(depth=2))
    result = await work_one(client)
    assert result is not None
    assert result.row is not None
    assert result.row.state is JobState.RETRYABLE
    (entry,) = result.row.errors
    assert set(entry) == {"error", "attempt", "at", "output", "traceback"}
    assert entry["error"] == "ConnectionError: smtp refused (18)"
    frames = entry["traceback"]
    here = "tests/storage/finalize/test_tracebacks.py"
    # Outermost first, from the handler down; the executor's own frame is left out.
    assert [frame.split(" in ")[1] for frame in frames] == [
        "register.<locals>.mail",
        "send",
        "send",
        "send",
    ]
    assert all(frame.startswith(f"{here}:") for frame in frames)
    assert frames[-1] == f"{here}:{send.__code__.co_firstlineno + 5} in send"
    text = orjson.dumps(entry["traceback"]).decode()
    for secret in (SECRET_ARG, SECRET_LOCAL, SECRET_OUTPUT, "smtp refused"):
        assert secret not in text
    assert entry["output"] == {"note": SECRET_OUTPUT}  # the output stays where it was


async def test_a_terminal_error_keeps_its_traceback_too(client: Client) -> None:
    register(client)
    await client.insert(Mail(depth=-1))
    result = await work_one(client)
    assert result is not None
    assert result.row is not None
    (entry,) = result.row.errors
    assert entry["terminal"] is True
    assert [frame.split(" in ")[1] for frame in entry["traceback"]] == ["register.<locals>.mail"]


async def test_a_deep_traceback_keeps_the_innermost_frames_within_2_kib(client: Client) -> None:
    register(client)
    await client.insert(Mail(depth=300), max_attempts=1)
    result = await work_one(client)
    assert result is not None
    assert result.row is not None
    assert result.row.state is JobState.FAILED
    (entry,) = result.row.errors
    frames = entry["traceback"]
    assert len(orjson.dumps(frames)) <= MAX_TRACEBACK_BYTES
    dropped = int(frames[0].split()[1])
    assert frames[0] == f"... {dropped} earlier frames"
    assert dropped + len(frames) - 1 == 302  # the handler and 301 calls of send
    assert all(frame.endswith(" in send") for frame in frames[1:])


async def test_an_end_the_handler_returned_has_no_traceback(client: Client) -> None:
    @client.task(Mail)
    async def cancelled(job: Job[Mail]) -> Cancel:
        return Cancel("not needed")

    await client.insert(Mail())
    result = await work_one(client)
    assert result is not None
    assert result.row is not None
    (entry,) = result.row.errors
    assert "traceback" not in entry


def test_frames_are_bounded_one_by_one_and_as_a_whole() -> None:
    def long_named() -> None:
        raise ValueError("x")

    long_named.__code__ = long_named.__code__.replace(co_qualname="f" * 5000)
    try:
        long_named()
    except ValueError as exc:
        frames = traceback_frames(exc.__traceback__)
    assert len(frames) == 2
    assert all(len(frame) <= 240 for frame in frames)
    assert frames[-1].startswith("...")
    assert frames[-1].endswith("f" * 10)
    assert len(orjson.dumps(frames)) <= MAX_TRACEBACK_BYTES
    assert traceback_frames(None) == []


def test_a_file_under_no_import_root_keeps_only_its_name(tmp_path: Path) -> None:
    """A handler in a script run by path (``/home/alice/jobs/send.py``) must not store where
    its author's home is; one under an import root keeps its module path."""
    script = tmp_path / "alice" / "send.py"
    script.parent.mkdir()
    script.write_text("def send():\n    raise RuntimeError('smtp refused')\n")
    namespace: dict[str, Any] = {}
    exec(compile(script.read_text(), str(script), "exec"), namespace)
    try:
        namespace["send"]()
    except RuntimeError as exc:
        frames = traceback_frames(exc.__traceback__)
    assert frames[-1] == "send.py:2 in send"
    assert not any(str(tmp_path) in frame for frame in frames)
    assert frames[0].startswith("tests/storage/finalize/test_tracebacks.py:")
