"""Schema drift (``Client.schema_drift``): a kind's recent completed outputs on both paths, and the
outputs its failed attempts kept, checked against its current declared schema, counted, the
newest listed by path and keyword only, within the last good output's window and the newest
failed, deferred and dead-lettered jobs.

Descriptors live in the shared control schema, so each test names its kind after its schema.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from storage import DRIFT_WINDOW, Client, InvalidName, Job, JobState
from storage.read import drift
from storage.testing import work_one
from tests.storage.read.test_reads_snapshot import AfterFetch

Args = dict[str, Any]
SCHEMA = {
    "type": "object",
    "properties": {"rows": {"type": "integer"}, "status": {"enum": ["ok", "partial"]}},
    "required": ["rows"],
}


@pytest.fixture
async def kind(client: Client, schema: str) -> str:
    name = f"report_{schema}"

    @client.task(kind=name)
    async def report(job: Job[Args]) -> None:
        job.set_output(job.args["out"])
        if job.args.get("fail"):
            raise RuntimeError("failed after writing its report")

    client.job_kind_descriptor(name, output={"type": "Report", "schema": SCHEMA})
    await client.sync_descriptors()
    return name


async def _done(client: Client, kind: str, out: Any, *, general: bool = False) -> int:
    job = await client.insert({"out": out}, kind=kind, tags=["general"] if general else [])
    result = await work_one(client)
    assert result is not None
    assert result.row is not None
    assert result.row.storage_path == ("general" if general else "compact")
    return job.id


async def test_outputs_that_break_the_schema_are_counted_and_named_by_path_and_keyword(
    client: Client, kind: str
) -> None:
    await _done(client, kind, {"rows": 1, "status": "ok"})
    typed = await _done(client, kind, {"rows": "many-secret-rows"})
    await _done(client, kind, {"rows": 2}, general=True)
    both = await _done(client, kind, {"status": "secret-status"}, general=True)
    deleted = await _done(client, kind, {"rows": "gone"})
    await client.delete_job(deleted)
    found = await client.schema_drift(kind)
    assert found.schema_declared
    assert (found.checked, found.drifted) == (4, 2)
    assert found.window == DRIFT_WINDOW
    assert (found.kept_checked, found.kept_drifted) == (0, 0)
    assert [(o.job_id, o.storage_path) for o in found.outputs] == [
        (both, "general"),
        (typed, "compact"),
    ]
    assert [(v.path, v.keyword) for v in found.outputs[0].violations] == [
        ("$.rows", "required"),
        ("$.status", "enum"),
    ]
    assert [(v.path, v.keyword) for v in found.outputs[1].violations] == [("$.rows", "type")]
    said = found.model_dump_json()
    assert "secret" not in said  # never the value, only where and which keyword


async def test_the_window_is_the_last_good_outputs_and_the_list_is_bounded(
    client: Client, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = await _done(client, kind, {"rows": "old"})
    for n in range(3):
        await _done(client, kind, {"rows": f"n{n}"})
    await _done(client, kind, {"rows": "general"}, general=True)
    async with client.session.connection("test") as conn:  # the pool's codecs read descriptors
        bounded = await drift.schema_drift(conn, kind, caps=(3, 1))
    assert (bounded.checked, bounded.drifted) == (4, 4)  # the oldest compact one is outside
    assert old not in [o.job_id for o in bounded.outputs]
    monkeypatch.setattr(drift, "MAX_DRIFT_LISTED", 2)
    listed = await client.schema_drift(kind)
    assert (listed.checked, listed.drifted, len(listed.outputs)) == (5, 5, 2)


async def _kept(client: Client, kind: str, out: Any, state: JobState, attempts: int = 1) -> int:
    """A job of ``kind`` whose failed attempt kept ``out``, now in ``state``."""
    job = await client.insert({"out": out, "fail": True}, kind=kind, max_attempts=attempts)
    result = await work_one(client)
    assert result is not None
    assert result.row is not None
    assert result.row.state is state
    return job.id


async def test_the_outputs_failed_attempts_kept_are_checked_and_said_to_be_kept(
    client: Client, kind: str
) -> None:
    fits = await _kept(client, kind, {"rows": 1}, JobState.FAILED)
    failed = await _kept(client, kind, {"rows": "secret-rows"}, JobState.FAILED)
    retrying = await _kept(client, kind, {"rows": "x"}, JobState.RETRYABLE, attempts=2)
    await client.configure_queue("default", dlq=True)
    dead = await _kept(client, kind, {"status": "secret-status"}, JobState.FAILED)
    dead_row = await client.get_job(dead)
    assert dead_row is not None
    assert dead_row.dlq is not None
    completed = await _done(client, kind, {"rows": "y"})

    found = await client.schema_drift(kind)

    assert (found.checked, found.drifted) == (5, 4)
    assert (found.kept_checked, found.kept_drifted) == (4, 3)
    assert {o.job_id: (o.storage_path, o.kept_by) for o in found.outputs} == {
        completed: ("compact", None),
        dead: ("error entry", "dead_lettered"),
        retrying: ("error entry", "retryable"),
        failed: ("error entry", "failed"),
    }
    assert fits not in {o.job_id for o in found.outputs}
    when = [o.finalized_at for o in found.outputs]
    assert when == sorted(when, reverse=True)  # the newest first, whichever source
    assert "secret" not in found.model_dump_json()
    async with client.session.connection("test") as conn:
        newest = await drift.schema_drift(conn, kind, kept_cap=1)
    assert (newest.kept_checked, newest.kept_drifted) == (3, 3)  # the older failed one is out


async def test_more_violations_than_shown_are_counted(client: Client, kind: str) -> None:
    many = {
        "type": "object",
        "properties": {name: {"type": "integer"} for name in "abcde"},
    }
    client.job_kind_descriptor(kind, output={"type": "Many", "schema": many})
    await client.sync_descriptors()
    await _done(client, kind, dict.fromkeys("abcde", "x"))
    (only,) = (await client.schema_drift(kind)).outputs
    assert len(only.violations) == drift.DRIFT_VIOLATIONS
    assert only.more == 5 - drift.DRIFT_VIOLATIONS


async def test_a_kind_without_a_declared_schema_has_nothing_to_check(
    client: Client, schema: str
) -> None:
    found = await client.schema_drift(f"undeclared_{schema}")
    assert not found.schema_declared
    assert (found.checked, found.drifted, found.outputs) == (0, 0, [])
    with pytest.raises(InvalidName, match="Kind name must not be empty"):
        await client.schema_drift("")


async def test_the_descriptor_and_both_paths_are_read_in_one_snapshot(
    client: Client, kind: str
) -> None:
    """A general-path completion that commits between the compact and the general read is not
    in this window (the page and its counts agree), and is in the next one."""
    await _done(client, kind, {"rows": "compact"})
    late = await client.insert({"out": {"rows": "late"}}, kind=kind, tags=["general"])

    async def complete_late() -> None:
        assert await work_one(client) is not None

    async with client.session.connection("test") as conn:
        between = AfterFetch(conn, 2, complete_late)  # 1: the descriptor, 2: the batches
        window = await drift.read_window(cast(Any, between), kind)
    assert between.fetches == 4  # then the done entries, and the failures' kept outputs
    assert late.id not in [stored[1] for stored in window.outputs]
    assert (await drift.check_window(window)).checked == 1
    assert next(o.job_id for o in (await client.schema_drift(kind)).outputs) == late.id
