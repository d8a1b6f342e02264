"""An operator's enqueue of a new job of a known kind (``Client.enqueue_job``): audited in the
insert's own transaction (the new job, its queue, the actor, the reason, the args' size and
sha256, never their text); args checked by the one check an edit-and-retry makes (the args
model registered here, else the args schema a runtime published); an unknown kind or args
that do not fit write nothing. A runtime publishes its args model's schema and its queue in
the kind's descriptor, which is what a process without the handler checks against."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import orjson
import pytest
from pydantic import BaseModel, Field

from storage import (
    ArgsValidationError,
    Client,
    Job,
    JobState,
    SchemaNotMigrated,
    UnknownKind,
)

JOBS = "SELECT count(*) FROM ready_entries"
ENTRIES = "SELECT count(*) FROM audit_log"
WHOLE_ROWS = "SELECT coalesce(string_agg(row_to_json(a)::text, ' '), '') FROM audit_log a"


class Resize(BaseModel):
    url: str
    width: int = Field(ge=1)


async def _noop(job: Job[Any]) -> None:
    del job


@pytest.fixture
def kind(schema: str) -> str:
    """A kind of this test only: descriptors live in the control schema all tests share."""
    return f"{schema}_resize"


async def test_an_enqueue_is_audited_in_its_own_transaction_without_the_args(
    client: Client, conn: asyncpg.Connection, kind: str
) -> None:
    client.task(Resize, kind=kind, queue="images")(_noop)
    row = await client.enqueue_job(
        kind, {"url": "https://x/secret.png", "width": 64}, actor="ana", reason="INC-9"
    )
    assert (row.kind, row.queue, row.state, row.args, row.priority) == (
        kind,
        "images",
        JobState.AVAILABLE,
        {"url": "https://x/secret.png", "width": 64},
        2,
    )
    stored = orjson.dumps(row.args)
    (entry,) = await client.list_audit(job_id=row.id)
    assert (entry.action, entry.job_ids, entry.queue, entry.actor, entry.reason) == (
        "enqueue",
        [row.id],
        "images",
        "ana",
        "INC-9",
    )
    assert (entry.args_size, entry.args_sha256) == (
        len(stored),
        hashlib.sha256(stored).hexdigest(),
    )
    assert (entry.output_size, entry.output_sha256, entry.original_args) == (None, None, None)
    assert "secret" not in await conn.fetchval(WHOLE_ROWS)


async def test_an_enqueue_whose_entry_cannot_be_written_inserts_no_job(
    client: Client, conn: asyncpg.Connection, kind: str
) -> None:
    client.task(Resize, kind=kind)(_noop)
    await conn.execute("DROP TABLE audit_log")
    with pytest.raises(SchemaNotMigrated, match="v009 adds it"):
        await client.enqueue_job(kind, {"url": "u", "width": 1}, actor="ana")
    assert await conn.fetchval(JOBS) == 0


async def test_args_that_do_not_fit_the_registered_model_write_nothing(
    client: Client, conn: asyncpg.Connection, kind: str
) -> None:
    client.task(Resize, kind=kind)(_noop)
    with pytest.raises(ArgsValidationError, match=r"do not match Resize") as refused:
        await client.enqueue_job(kind, {"url": "u", "width": 0}, actor="ana")
    assert (refused.value.path, refused.value.rule) == (
        "$.width",
        "Input should be greater than or equal to 1",
    )
    assert (await conn.fetchval(JOBS), await conn.fetchval(ENTRIES)) == (0, 0)


async def test_a_runtime_publishes_its_args_schema_and_queue_and_a_console_checks_against_it(
    client: Client, console: Client, conn: asyncpg.Connection, kind: str
) -> None:
    client.task(Resize, kind=kind, queue="images")(_noop)
    await client.sync_descriptors()
    published = await console.get_descriptor(kind)
    assert published is not None
    assert published.args_schema == Resize.model_json_schema(mode="validation")
    assert published.queue == "images"
    assert console.default_queue(kind, published) == "images"

    with pytest.raises(ArgsValidationError, match=r"published args schema: \$\.width") as bad:
        await console.enqueue_job(kind, {"url": "u", "width": "wide"}, actor="ana")
    assert bad.value.path == "$.width"
    assert "wide" not in bad.value.message  # positions and rules, never the value
    assert (await conn.fetchval(JOBS), await conn.fetchval(ENTRIES)) == (0, 0)
    with pytest.raises(ArgsValidationError, match=r"\$\.url"):
        console.check_args(kind, {"width": 3}, published)  # what the form runs as you type

    row = await console.enqueue_job(kind, {"url": "u", "width": 3}, actor="ana")
    assert (row.queue, row.state) == ("images", JobState.AVAILABLE)


async def test_an_explicit_descriptor_extra_wins_over_what_the_runtime_publishes(
    client: Client, kind: str
) -> None:
    client.task(Resize, kind=kind, queue="images")(_noop)
    client.job_kind_descriptor(kind, extra={"queue": "thumbs", "sla_seconds": 5})
    await client.sync_descriptors()
    published = await client.get_descriptor(kind)
    assert published is not None
    assert published.extra["queue"] == "thumbs"
    assert published.extra["sla_seconds"] == 5
    assert published.args_schema is not None


async def test_an_unknown_kind_is_refused_in_one_line_and_writes_nothing(
    console: Client, conn: asyncpg.Connection, schema: str
) -> None:
    with pytest.raises(UnknownKind, match=rf"kind '{schema}_nope'; nothing was enqueued"):
        await console.enqueue_job(f"{schema}_nope", {"n": 1}, actor="ana")
    assert (await conn.fetchval(JOBS), await conn.fetchval(ENTRIES)) == (0, 0)


async def test_a_kind_with_only_a_descriptor_takes_any_args_on_its_queue_or_default(
    console: Client, kind: str
) -> None:
    console.job_kind_descriptor(kind, display_name="Resize")
    await console.sync_descriptors()
    row = await console.enqueue_job(kind, [1, "two"], actor="ana")
    assert (row.queue, row.args) == ("default", [1, "two"])
    row = await console.enqueue_job(kind, {}, queue="other", priority=1, actor="ana")
    assert (row.queue, row.priority) == ("other", 1)


async def test_a_run_at_in_the_future_enqueues_it_scheduled(client: Client, kind: str) -> None:
    client.task(Resize, kind=kind)(_noop)
    later = datetime.now(UTC) + timedelta(hours=1)
    row = await client.enqueue_job(kind, {"url": "u", "width": 1}, run_at=later, actor="ana")
    assert (row.state, row.run_at) == (JobState.SCHEDULED, later)
    (entry,) = await client.list_audit(action="enqueue")
    assert entry.job_ids == [row.id]
