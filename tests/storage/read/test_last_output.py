"""The last good output of a kind (``Client.last_good_output``): the newest completed output of
the kind (and queue) on either path, read within the newest batches and done entries."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from storage import Client, InvalidName
from storage.read import last_output
from storage.testing import work_one
from tests.storage.read.test_output_search import _done, _report


@pytest.fixture
def report(client: Client) -> None:
    client.task(kind="report")(_report)
    client.task(kind="report_b", queue="other")(_report)


async def _last(client: Client, kind: str = "report", queue: str | None = None) -> Any:
    found = await client.last_good_output(kind, queue)
    return None if found is None else (found.job_id, found.output_text, found.storage_path)


@pytest.mark.usefixtures("report")
async def test_the_newest_completed_output_of_the_kind_on_either_path(client: Client) -> None:
    assert await _last(client) is None
    compact = await _done(client, {"rows": 1})
    assert await _last(client) == (compact, '{"rows":1}', "compact")
    general = await _done(client, {"rows": 2}, general=True)
    assert await _last(client) == (general, '{"rows":2}', "general")
    newer = await _done(client, {"rows": 3})
    await _done(client, None)  # completed without an output: not a good output to show
    await _done(client, {"rows": 4}, fail=True)  # a failed attempt's output is not "good"
    assert await _last(client) == (newer, '{"rows":3}', "compact")
    found = await client.last_good_output("report")
    assert found is not None
    assert (found.kind, found.queue) == ("report", "default")


@pytest.mark.usefixtures("report")
async def test_another_kind_another_queue_and_deleted_jobs_are_passed_over(
    client: Client,
) -> None:
    mine = await _done(client, {"mine": True})
    other = await client.insert({"out": {"theirs": True}}, kind="report_b", queue="other")
    theirs = await work_one(client, ["other"])
    assert theirs is not None
    assert theirs.output == {"theirs": True}
    assert await _last(client) == (mine, '{"mine":true}', "compact")
    assert await _last(client, "report_b") == (other.id, '{"theirs":true}', "compact")
    assert await _last(client, "report", "other") is None
    assert await _last(client, "report", "default") == (mine, '{"mine":true}', "compact")
    kept = await _done(client, {"kept": 1}, general=True)
    deleted = await _done(client, {"deleted": 1})
    await client.delete_job(deleted)
    assert await _last(client) == (kept, '{"kept":1}', "general")


@pytest.mark.usefixtures("report")
async def test_it_reads_only_the_newest_batches_and_done_entries(
    client: Client, conn: asyncpg.Connection
) -> None:
    old = await _done(client, {"old": 1})
    for _ in range(3):
        await _done(client, None)  # three newer batches without an output of the kind
    assert await _last(client) == (old, '{"old":1}', "compact")
    bounded = await last_output.last_good_output(conn, "report", caps=(3, 3))
    assert bounded is None  # not among the newest three: "none in the bound", never a scan
    assert await last_output.last_good_output(conn, "report", caps=(4, 3)) is not None


async def test_a_name_that_cannot_be_stored_is_refused(client: Client) -> None:
    with pytest.raises(InvalidName, match="NUL"):
        await client.last_good_output("a\x00b")
