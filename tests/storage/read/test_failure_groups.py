"""Failure groups: the signature rule, the sources grouped, the filters, and group actions
through the state-guarded bulk actions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from storage import Client, InvalidFilter, Job, JobState, TerminalError
from storage.read.failure_groups import SIGNATURE

Args = dict[str, Any]


def _failing(client: Client, kind: str = "mail", queue: str = "default") -> None:
    @client.task(kind=kind, queue=queue)
    async def handler(job: Job[Args]) -> None:
        if job.args.get("output"):
            job.set_output({"smtp": "421"})
        raise ConnectionError(job.args["message"])


async def test_twelve_failures_differing_in_a_tenant_number_form_one_group(
    client: Client,
) -> None:
    _failing(client)
    await client.insert_many(
        [{"message": f"smtp refused for tenant {n}"} for n in range(12)],
        kind="mail",
        max_attempts=1,
    )
    await client.run_until_idle()
    (group,) = await client.failure_groups()
    assert group.kind == "mail"
    assert group.signature == "ConnectionError: smtp refused for tenant <n>"
    assert group.error_class == "ConnectionError"
    assert group.count == group.failed == 12
    assert group.first_seen <= group.last_seen
    assert group.sample_job_id == max(j.id for j in await client.list_jobs(kind="mail"))
    assert not group.kept_output
    assert group.queues == ["default"]
    assert not group.capped


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("lookup of 'alice' failed", "lookup of 'bob' failed"),
        ('key "a1" missing', 'key "zz" missing'),
        (
            "order 0b7e4f0c-2d1a-4c3e-9a57-1f2e3d4c5b6a not found",
            "order 9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a not found",
        ),
        ("bad object 0x7ffe12", "bad object 0xdeadbeef"),
        ("trace 5f2a9c81e0d3 lost", "trace a0b1c2d3e4f5 lost"),
        ("took 1.5 s on port 5432", "took 12.25 s on port 6543"),
        ("job_123 and job_4", "job_9 and job_77777"),
    ],
)
async def test_signatures_normalise_values_that_differ_between_occurrences(
    conn: asyncpg.Connection, one: str, other: str
) -> None:
    sign = f"SELECT {SIGNATURE} FROM (SELECT $1::text AS error) e"
    assert await conn.fetchval(sign, one) == await conn.fetchval(sign, other)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("ConnectionError: refused", "TimeoutError: refused"),
        ("smtp refused", "smtp accepted"),
        ("word deadline passed", "word abcdefab passed"),
    ],
)
async def test_signatures_keep_class_and_words_apart(
    conn: asyncpg.Connection, one: str, other: str
) -> None:
    sign = f"SELECT {SIGNATURE} FROM (SELECT $1::text AS error) e"
    assert await conn.fetchval(sign, one) != await conn.fetchval(sign, other)


async def test_groups_span_failed_retryable_and_dead_lettered_jobs_by_kind(
    client: Client,
) -> None:
    _failing(client, "mail")
    _failing(client, "sms", queue="texts")
    await client.configure_queue("texts", dlq=True)
    await client.insert({"message": "down 1", "output": True}, kind="mail", max_attempts=1)
    await client.insert({"message": "down 2"}, kind="mail", max_attempts=5)
    await client.insert({"message": "down 3"}, kind="sms", max_attempts=1)
    await client.run_until_idle(maintenance_interval=None)
    groups = {g.kind: g for g in await client.failure_groups()}
    assert (groups["mail"].count, groups["mail"].failed, groups["mail"].retryable) == (2, 1, 1)
    assert groups["mail"].kept_output
    assert (groups["sms"].count, groups["sms"].dead_lettered) == (1, 1)
    assert not groups["sms"].kept_output
    assert [g.kind for g in await client.failure_groups(kind="sms")] == ["sms"]
    assert [g.kind for g in await client.failure_groups(queue="default")] == ["mail"]
    assert await client.failure_groups(since=datetime.now(UTC) + timedelta(minutes=1)) == []
    assert len(await client.failure_groups(since=timedelta(hours=1))) == 2
    assert len(await client.failure_groups(limit=1)) == 1


async def test_group_retry_and_cancel_go_through_the_guarded_bulk_actions(
    client: Client,
) -> None:
    _failing(client, "mail")
    await client.configure_queue("default", dlq=False)
    await client.insert_many(
        [{"message": f"refused {n}"} for n in range(3)], kind="mail", max_attempts=1
    )
    retrying = await client.insert({"message": "refused 9"}, kind="mail", max_attempts=5)
    await client.run_until_idle(maintenance_interval=None)
    (group,) = await client.failure_groups()
    members = await client.failure_group_jobs(group.kind, group.signature)
    assert (len(members.failed), members.retryable, members.total) == (3, [retrying.id], 4)
    assert await client.bulk_action("retry", ids=members.failed) == 3
    assert await client.bulk_action("retry", ids=members.retryable) == 0  # refused: skipped
    assert await client.bulk_action("cancel", ids=members.retryable) == 1
    for job_id in members.failed:
        row = await client.get_job(job_id)
        assert row is not None
        assert row.state is JobState.AVAILABLE
    assert await client.failure_groups() == []


async def test_a_naive_since_is_refused(client: Client) -> None:
    with pytest.raises(InvalidFilter, match="time zone"):
        await client.failure_groups(since=datetime(2026, 1, 1))  # noqa: DTZ001


async def test_terminal_error_text_without_a_class_still_groups(client: Client) -> None:
    @client.task(kind="k")
    async def handler(job: Job[Args]) -> None:
        raise TerminalError(f"quota {job.args['n']} exceeded")

    await client.insert_many([{"n": 1}, {"n": 2}], kind="k")
    await client.run_until_idle()
    (group,) = await client.failure_groups()
    assert group.count == 2
    assert group.signature == "TerminalError: quota <n> exceeded"


async def test_first_seen_is_the_first_failure_and_a_retry_keeps_it(client: Client) -> None:
    """A retried job that fails again moves its group's last seen, not its first seen."""
    _failing(client)
    job = await client.insert({"message": "smtp refused"}, kind="mail", max_attempts=1)
    await client.run_until_idle()
    (before,) = await client.failure_groups()
    await client.retry_job(job.id)
    await client.run_until_idle()
    (after,) = await client.failure_groups()
    row = await client.get_job(job.id)
    assert row is not None
    assert len(row.errors) == 2
    assert after.first_seen == before.first_seen == datetime.fromisoformat(row.errors[0]["at"])
    assert after.last_seen > before.last_seen
