"""A failure group's kept outputs (``Client.failure_group_outputs``): shapes with counts and a
sample, the split by a field with "other" for the rest, and the bounds."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from storage import MAX_OUTPUT_BYTES, Client, InvalidFilter, InvalidName, Job
from storage.read import group_outputs

Args = dict[str, Any]
SIGNATURE = "ConnectionError: load failed"


@pytest.fixture
def loader(client: Client) -> None:
    @client.task(kind="load")
    async def load(job: Job[Args]) -> None:
        if "out" in job.args:
            job.set_output(job.args["out"])
        raise ConnectionError("load failed")


async def _fail(client: Client, outputs: list[Any], *, attempts: int = 1) -> None:
    await client.insert_many(
        [{"out": out} if out is not None else {} for out in outputs],
        kind="load",
        max_attempts=attempts,
    )
    await client.run_until_idle()


@pytest.mark.usefixtures("loader")
async def test_shapes_are_key_sets_or_types_counted_largest_first(client: Client) -> None:
    await _fail(
        client,
        [
            *[{"status": "failed", "rows": 0}] * 3,
            *[{"rows": 400, "status": "failed"}] * 2,  # same keys in another order
            {"status": "partial", "rows": 400, "extra": 1},
            "gave up",
            None,  # kept nothing
        ],
    )
    (group,) = await client.failure_groups()
    found = await client.failure_group_outputs("load", SIGNATURE)
    assert (found.members, found.kept) == (group.count, 7) == (8, 7)
    assert [(s.label, s.count) for s in found.shapes] == [
        ("{rows, status}", 5),
        ("string", 1),  # as many as the next, and newer
        ("{extra, rows, status}", 1),
    ]
    first = found.shapes[0]
    assert first.type == "object"
    assert first.keys == ["rows", "status"]
    newest = max(
        j.id
        for j in await client.list_jobs(kind="load")
        if j.args.get("out") == {"rows": 400, "status": "failed"}
    )
    assert first.sample_job_id == newest
    assert first.sample == '{"rows":400,"status":"failed"}'
    assert found.shapes[1].sample == '"gave up"'
    assert found.values == []
    assert found.field is None
    assert not found.capped
    assert "2,000 failed" in found.window


@pytest.mark.usefixtures("loader")
async def test_a_field_splits_them_by_value_with_missing_and_other(
    client: Client, conn: asyncpg.Connection
) -> None:
    await _fail(
        client,
        [
            *[{"status": "failed", "rows": 0}] * 3,
            *[{"status": "failed", "rows": 400}] * 2,
            {"status": "failed", "rows": None},
            {"status": "failed"},
            [1, 2],
        ],
    )
    found = await client.failure_group_outputs("load", SIGNATURE, field="rows")
    assert found.field == "rows"
    assert [(v.value, v.count) for v in found.values] == [
        ("0", 3),
        (None, 2),  # no such key, or no object: not the JSON null below
        ("400", 2),
        ("null", 1),
    ]
    assert found.other_values == 0
    bounded = await group_outputs.group_outputs(
        conn, "load", SIGNATURE, since=None, queue=None, field="rows", caps=(1, 2)
    )
    assert [(s.label, s.count) for s in bounded.shapes] == [("{rows, status}", 6)]
    assert (bounded.other_shapes, bounded.kept) == (2, 8)
    assert [v.value for v in bounded.values] == ["0", None]
    assert bounded.other_values == 3


@pytest.mark.usefixtures("loader")
async def test_retryable_members_count_and_a_sample_never_exceeds_4_kib(client: Client) -> None:
    wide = "€" * ((MAX_OUTPUT_BYTES - 16) // 3)  # within the limit, far over a preview
    await _fail(client, [{"note": wide}], attempts=3)
    (group,) = await client.failure_groups()
    assert group.retryable == 1
    found = await client.failure_group_outputs("load", SIGNATURE)
    (shape,) = found.shapes
    assert shape.label == "{note}"
    assert shape.sample.endswith("…")
    assert len(shape.sample.encode()) <= MAX_OUTPUT_BYTES


@pytest.mark.usefixtures("loader")
async def test_another_group_or_signature_reads_as_empty(client: Client) -> None:
    await _fail(client, [{"rows": 1}])
    other = await client.failure_group_outputs("load", "ConnectionError: other")
    assert (other.members, other.kept, other.shapes) == (0, 0, [])
    assert (await client.failure_group_outputs("mail", SIGNATURE)).members == 0


async def test_bad_names_are_refused_in_one_line(client: Client) -> None:
    with pytest.raises(InvalidName, match="Field name must not be empty"):
        await client.failure_group_outputs("load", SIGNATURE, field="")
    with pytest.raises(InvalidFilter, match="signature filter contains"):
        await client.failure_group_outputs("load", "a\x00b")


@pytest.mark.usefixtures("loader")
async def test_members_are_read_within_the_groups_window(
    client: Client, conn: asyncpg.Connection
) -> None:
    """Each source is read newest first up to the groups' bound: past it the counts are lower
    bounds (``capped``), the same members the groups' list counts."""
    await _fail(client, [{"rows": n} for n in range(3)])
    bounded = await group_outputs.group_outputs(
        conn, "load", SIGNATURE, since=None, queue=None, field=None, scan=2
    )
    assert (bounded.members, bounded.kept, bounded.capped) == (2, 2, True)
    oldest = min(j.id for j in await client.list_jobs(kind="load"))
    assert bounded.shapes[0].count == 2  # the oldest is past the bound
    assert oldest not in [s.sample_job_id for s in bounded.shapes]
    whole = await client.failure_group_outputs("load", SIGNATURE)
    assert (whole.members, whole.capped) == (3, False)
