"""Deterministic data for the console's tests, snapshots and screenshots.

Jobs are seeded through the real runtime (``work_one``), then their timestamps and callback
ids are pinned with SQL (tests may write SQL; the console may not) so every screen renders the
same on every run: fixed ids (a fresh schema), fixed times, a fixed clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from awa_tui.app import AwaApp, make_app
from awa_tui.demo import (
    AwaitPayment,
    BuildReport,
    ChargeAttempt,
    ChargeCard,
    EmailReceipt,
    PaymentResult,
    ReportSummary,
    ResizeImage,
    SendEmail,
    SyncInventory,
    SyncReport,
    Thumbnail,
)
from storage import Client, Job, TerminalError, WaitForCallback
from storage.db.pool import connect_once
from storage.insert import enqueue
from storage.testing import work_one

FIXED_NOW = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)
T0 = FIXED_NOW - timedelta(hours=2)
DSN_LABEL = "postgresql://oncall@db.internal/jobs · schema awa"
SIZE = (120, 36)
KINDS = (
    "send_email",
    "resize_image",
    "sync_inventory",
    "charge_card",
    "await_payment",
    "build_report",
    "cleanup_tmp",
    "legacy_export",
)


def fixed_clock() -> datetime:
    return FIXED_NOW


def build_app(dsn: str, schema: str, **options: Any) -> AwaApp:
    """The app as the tests see it: fixed clock, live refresh paused, a pinned title."""
    options.setdefault("refresh", 0)
    options.setdefault("dsn_label", DSN_LABEL)
    return make_app(dsn, schema, clock=fixed_clock, **options)


def register(client: Client) -> None:
    """Handlers whose behaviour depends only on their args and attempt number."""

    @client.task(SendEmail, output=EmailReceipt, queue="mail")
    async def send_email(job: Job[SendEmail]) -> None:
        job.set_output(
            EmailReceipt(
                message_id=f"msg-{job.id:06d}", accepted=[job.args.to], provider="postmark"
            )
        )

    @client.task(ResizeImage, output=Thumbnail, queue="images")
    async def resize_image(job: Job[ResizeImage]) -> None:
        w, h = job.args.width // 4, job.args.height // 4
        job.set_output(
            Thumbnail(
                url=f"https://cdn.example/t/{job.args.image_id}.webp",
                width=w,
                height=h,
                bytes=w * h // 3,
            )
        )

    @client.task(SyncInventory, output=SyncReport)
    async def sync_inventory(job: Job[SyncInventory]) -> None:
        if job.attempt >= 3:
            raise RuntimeError(f"connection reset by warehouse {job.args.warehouse}")
        updated = 40 * job.attempt
        job.set_output(SyncReport(updated=updated, skipped=2, failed_skus=[f"SKU-{job.attempt}17"]))
        raise RuntimeError(f"upstream timed out after {updated} items")

    @client.task(ChargeCard, output=ChargeAttempt, queue="payments")
    async def charge_card(job: Job[ChargeCard]) -> None:
        if job.args.amount_cents % 7 == 0:
            job.set_output(
                ChargeAttempt(provider="stripe", decline_code="insufficient_funds", retryable=False)
            )
            raise TerminalError("card declined: insufficient_funds")
        job.set_output(ChargeAttempt(provider="stripe", decline_code=None, retryable=False))

    @client.task(AwaitPayment, output=PaymentResult, queue="webhooks")
    async def await_payment(job: Job[AwaitPayment]) -> WaitForCallback:
        return WaitForCallback(await job.register_callback(timeout_seconds=3600))

    @client.task(BuildReport, output=ReportSummary, queue="reports")
    async def build_report(job: Job[BuildReport]) -> None:
        job.set_output(ReportSummary(rows=1200, pages=14))

    @client.task(kind="cleanup_tmp")
    async def cleanup_tmp(job: Job[Any]) -> None:
        return None

    for kind, name in (
        (SendEmail, "Send email"),
        (ResizeImage, "Resize image"),
        (SyncInventory, "Sync inventory"),
        (ChargeCard, "Charge card"),
        (AwaitPayment, "Await payment"),
        (BuildReport, "Build report"),
    ):
        client.job_kind_descriptor(kind, display_name=name, owner="oncall")
    client.job_kind_descriptor(
        "legacy_export",
        display_name="Legacy export",
        description="Retired: no runtime publishes this kind any more.",
        owner="data",
    )


@dataclass(frozen=True)
class Incident:
    """Ids of the seeded jobs, by role."""

    emails: tuple[int, ...]
    resized: int
    failed: int  # three attempts; entry #2 kept an output
    dead: int  # dead-lettered with an output in its error entry
    waiting: int  # waiting for a callback
    available: int
    scheduled: int
    retryable: int
    cancelled: int
    untyped: int  # completed, kind without a declared output


async def work(client: Client, queue: str) -> None:
    result = await work_one(client, [queue])
    assert result is not None, f"nothing to work in queue {queue}"


async def promote(client: Client, conn: asyncpg.Connection, job_id: int) -> None:
    """Make a retryable job due now and let maintenance promote it."""
    await conn.execute(
        "UPDATE deferred_jobs SET run_at = now() - interval '1 second' WHERE job_id = $1", job_id
    )
    await client.run_maintenance()


async def seed_incident(client: Client, conn: asyncpg.Connection) -> Incident:
    """Every state the console shows, worked through the real executor, in id order."""
    register(client)
    await client.configure_queue("payments", dlq=True)
    emails = []
    for n in range(3):
        row = await client.insert(SendEmail(to=f"user{n + 1}@example.com", template="welcome"))
        await work(client, "mail")
        emails.append(row.id)
    resized = await client.insert(
        ResizeImage(image_id=101, width=1600, height=1200),
        tags=["upload"],
        metadata={"uploaded_by": "ana"},
    )
    await work(client, "images")
    failed = await client.insert(SyncInventory(warehouse="eu-3"), max_attempts=3)
    for attempt in range(3):
        if attempt:
            await promote(client, conn, failed.id)
        await work(client, "default")
    dead = await client.insert(ChargeCard(order_id=512, amount_cents=4900), max_attempts=1)
    await work(client, "payments")
    waiting = await client.insert(AwaitPayment(order_id=901, provider="adyen"))
    await work(client, "webhooks")
    available = await client.insert(SendEmail(to="late@example.com", template="receipt"))
    scheduled = await client.insert(
        BuildReport(report="weekly-finance", seconds=5), run_at=FIXED_NOW + timedelta(days=3650)
    )
    retryable = await client.insert(SyncInventory(warehouse="us-1"), max_attempts=5)
    await work(client, "default")
    cancelled = await client.insert(SendEmail(to="typo@exmaple.com", template="welcome"))
    await client.cancel_job(cancelled.id, actor="seed@tests")  # not the host's user@host
    untyped = await client.insert({"path": "/tmp/export-17"}, kind="cleanup_tmp")
    await work(client, "default")
    await client.sync_descriptors()
    client.periodic(
        BuildReport(report="daily-sales", seconds=2),
        cron="0 6 * * 1-5",
        timezone="Europe/Paris",
        name="daily-sales",
    )
    client.periodic({"path": "/tmp"}, kind="cleanup_tmp", every=timedelta(minutes=15))
    await client.store_schedules()
    await pin(conn)
    return Incident(
        emails=tuple(emails),
        resized=resized.id,
        failed=failed.id,
        dead=dead.id,
        waiting=waiting.id,
        available=available.id,
        scheduled=scheduled.id,
        retryable=retryable.id,
        cancelled=cancelled.id,
        untyped=untyped.id,
    )


# @T: the job's pinned creation time (T0 + 5 min per id); @B: a batch's first job's; @NOW.
_AT = (
    "$1::timestamptz + t.job_id * interval '5 minutes' + (e->>'attempt')::int * interval '1 minute'"
)
_ERRORS_AT = """
UPDATE {table} t SET payload = jsonb_set(t.payload, '{{errors}}', (
    SELECT jsonb_agg(e || jsonb_build_object('at', to_char(({at}) AT TIME ZONE 'UTC',
                                                           'YYYY-MM-DD"T"HH24:MI:30"+00:00"'))
                     ORDER BY ord)
      FROM jsonb_array_elements(t.payload->'errors') WITH ORDINALITY AS x(e, ord)))
 WHERE t.payload ? 'errors'
"""
_PIN = [
    """UPDATE ready_entries SET created_at = @T,
              run_at = @T + (run_lease - 1) * interval '1 minute',
              attempted_at = CASE WHEN attempted_at IS NOT NULL
                                  THEN @T + run_lease * interval '1 minute' END""",
    """UPDATE deferred_jobs SET created_at = @T,
              run_at = @NOW + CASE WHEN state = 'scheduled' THEN interval '3 days'
                                   ELSE interval '90 seconds' END,
              attempted_at = CASE WHEN attempted_at IS NOT NULL
                                  THEN @T + interval '1 minute' END""",
    """UPDATE claim_batches
          SET claimed_at = @B + interval '1 minute', deadline_at = @B + interval '31 minutes'""",
    # Two registered runtimes took the claims, by turns (the scenario claims with work_one,
    # which registers none): the timeline names them.
    """WITH started AS (
           INSERT INTO runtimes (host, pid, started_at, name, version)
           VALUES ('worker-a', 4242, $1::timestamptz - interval '1 hour', 'shop.tasks:tasks',
                   '0.1.0'),
                  ('worker-b', 977, $1::timestamptz - interval '20 minutes', 'shop.tasks:tasks',
                   '0.1.0')
           RETURNING id)
       UPDATE claim_batches SET runtime_id = (SELECT min(id) + claim_id % 2 FROM started)""",
    "UPDATE done_entries SET finalized_at = @T + interval '4 minutes'",
    "UPDATE attempt_closures SET closed_at = @T + run_lease * interval '1 minute' + '20 s'",
    "UPDATE receipt_completion_batches SET finalized_at = @B + interval '2 minutes'",
    # The queue ring last turned 10 minutes before the clock: prune estimates are fixed too.
    """UPDATE ring_state SET rotated_at = @NOW - interval '10 minutes'
        WHERE $1::timestamptz IS NOT NULL""",
    """UPDATE dlq_entries SET created_at = @T, run_at = @T,
              attempted_at = @T + interval '1 minute', finalized_at = @T + interval '2 minutes',
              dlq_at = @T + interval '2 minutes'""",
    """UPDATE attempt_state SET heartbeat_at = @T + interval '1 minute',
              callback_timeout_at = CASE WHEN callback_timeout_at IS NOT NULL
                                         THEN @NOW + interval '55 minutes' END,
              callback_id = CASE WHEN callback_id IS NOT NULL
                                 THEN '4f1c9a2e-5b7d-4c3a-9e1f-'
                                      || lpad(job_id::text, 12, '0') END""",
    *(_ERRORS_AT.format(table=table, at=_AT) for table in ("ready_entries", "deferred_jobs")),
    *(_ERRORS_AT.format(table=table, at=_AT) for table in ("done_entries", "dlq_entries")),
    # Schedules: the sweep ran 5 minutes ago (its last job the cleanup_tmp one), the report
    # never; both run next at fixed times after @NOW (Monday 06:00 in Paris is 05:00 UTC).
    """UPDATE periodic_schedules SET
              next_run_at = CASE WHEN every_seconds IS NOT NULL THEN @NOW + interval '10 minutes'
                                 ELSE date_trunc('day', @NOW) + interval '2 days 5 hours' END,
              last_tick_at = CASE WHEN every_seconds IS NOT NULL
                                  THEN @NOW - interval '5 minutes' END,
              last_job_id = CASE WHEN every_seconds IS NOT NULL THEN
                  (SELECT max(job_id) FROM ready_entries WHERE kind = 'cleanup_tmp') END
        WHERE $1::timestamptz IS NOT NULL""",  # pin passes T0 to every statement
]
PIN = [
    statement.replace("@T", "($1::timestamptz + job_id * interval '5 minutes')")
    .replace("@B", "($1::timestamptz + job_ids[1] * interval '5 minutes')")
    .replace("@NOW", "$2::timestamptz")
    for statement in _PIN
]

PIN_DESCRIPTORS = [
    "UPDATE awa.job_kind_descriptors SET created_at = $1::timestamptz - interval '30 days',"
    " updated_at = $1::timestamptz - interval '2 days',"
    " last_seen_at = $1::timestamptz - interval '40 seconds', sync_interval_seconds = 315360000",
    "UPDATE awa.job_kind_descriptors SET last_seen_at = $1::timestamptz - interval '20 days',"
    " updated_at = $1::timestamptz - interval '90 days', sync_interval_seconds = 60"
    " WHERE kind = 'legacy_export'",
]
DROP_OTHER_DESCRIPTORS = "DELETE FROM awa.job_kind_descriptors WHERE kind <> ALL($1::text[])"


async def pin(conn: asyncpg.Connection) -> None:
    """Fixed timestamps and callback ids for everything the console displays.

    Descriptors live in the shared control schema: other tests' kinds are dropped so the
    kinds screen lists exactly this scenario's.
    """
    async with conn.transaction():
        for statement in PIN:
            await conn.execute(
                statement, T0, FIXED_NOW
            ) if "$2" in statement else await conn.execute(statement, T0)
        await conn.execute(DROP_OTHER_DESCRIPTORS, list(KINDS))
        for statement in PIN_DESCRIPTORS:
            await conn.execute(statement, FIXED_NOW)


async def with_client(dsn: str, schema: str, seeder: Any) -> Any:
    """Run ``seeder(client, conn)`` on a fresh client and connection (under ``asyncio.run``)."""
    async with await Client.connect(dsn, schema) as client, connect_once(dsn) as conn:
        await conn.execute(f"SET search_path TO {schema}")
        return await seeder(client, conn)


def seed_sync(dsn: str, schema: str, seeder: Any) -> Any:
    return asyncio.run(with_client(dsn, schema, seeder))


RETRIED_ID = 13  # the first job after the incident's twelve


async def seed_retried(client: Client, conn: asyncpg.Connection) -> int:
    """A sync that failed once after recording an output (kept in error entry #1), then
    completed on the retry with another: the job the detail compares (``RETRIED_ID``)."""

    @client.task(kind="sync_ledger", queue="ledger")
    async def sync_ledger(job: Job[Any]) -> None:
        if job.attempt == 1:
            job.set_output({"updated": 0, "skipped": 412, "status": "partial"})
            raise RuntimeError("ledger locked by another sync")
        job.set_output({"updated": 412, "skipped": 0, "status": "ok", "batches": [1, 2]})

    job = await client.insert({"ledger": "eu-main"}, kind="sync_ledger")
    await work(client, "ledger")
    # Promoted without a maintenance pass: one would also tick the pinned periodic schedules.
    # Due before every other deferred job (promotion takes the earliest first).
    await conn.execute("UPDATE deferred_jobs SET run_at = $2 WHERE job_id = $1", job.id, T0)
    assert await enqueue.promote_due(conn, limit=1) == 1
    await work(client, "ledger")
    return job.id


async def seed_timeouts(client: Client, conn: asyncpg.Connection) -> int:
    """Five more sync_inventory jobs that timed out like retryable job 10, now one group of six
    (ids 13..17): 13..15 failed on attempt 1 keeping ``updated: 40``, 16 and 17 on attempt 2
    keeping ``updated: 80``; the group's outputs split by ``updated`` read as two rows."""
    ids = []
    for n, attempts in enumerate((1, 1, 1, 2, 2)):
        job = await client.insert(SyncInventory(warehouse=f"ap-{n}"), max_attempts=attempts)
        await work(client, "default")
        ids.append(job.id)
    # Due before every other deferred job, promoted without a maintenance pass (seed_retried).
    await conn.execute("UPDATE deferred_jobs SET run_at = $2 WHERE job_id = ANY($1)", ids[3:], T0)
    assert await enqueue.promote_due(conn, limit=2) == 2
    for _ in ids[3:]:
        await work(client, "default")
    return len(ids)


# Job 2's stored receipt rewritten as an older handler might have written it: its accepted
# address a string (the schema says a list) and no provider.
DRIFTED_RECEIPT = """
UPDATE receipt_completion_batches
   SET outputs[1] = '{"message_id": "msg-000002", "accepted": "user2@example.com"}'::json
 WHERE job_ids[1] = 2 AND $1::timestamptz IS NOT NULL
"""


# -- the pinned screens (snapshot tests and scripts/screenshots.py) ------------------------


@dataclass(frozen=True)
class Screen:
    """One screen to pin: what to seed, how to open the app, what to do before the picture."""

    name: str
    seed: bool = True
    app_options: tuple[tuple[str, Any], ...] = ()
    keys: tuple[str, ...] = ()
    paste: str | None = None
    confirm: bool = False
    sql: tuple[str, ...] = ()
    """Run after seeding, with $1 the pinned clock's now (a queue paused at a fixed time)."""
    more: Callable[[Client, asyncpg.Connection], Awaitable[int]] | None = None
    """Seeds more jobs after the incident (pinned again after it)."""

    async def run_before(self, pilot: Any) -> None:
        from textual import events

        from tests.tui.conftest import freeze_cursors, settle

        await settle(pilot)
        for key in self.keys:
            await pilot.press(key)
            await settle(pilot)
        if self.paste is not None:
            pilot.app.post_message(events.Paste(self.paste))
            await settle(pilot)
        if self.confirm:
            await pilot.press("ctrl+s")
            await settle(pilot)
            await pilot.press("y")
            await settle(pilot)  # the detail behind reloads only once the form closes
        freeze_cursors(pilot)
        await pilot.pause()


# Four operator writes at fixed times (the seed's own cancel, at the real time, dropped).
AUDIT_TRAIL = """
WITH gone AS (DELETE FROM audit_log WHERE $1::timestamptz IS NOT NULL)
INSERT INTO audit_log (at, actor, action, job_ids, filter, count, queue, reason, output_size,
                       output_sha256)
VALUES ($1 - interval '40 minutes', 'bo@oncall-box', 'pause_queue', '{}', NULL, 1, 'mail',
        'SMTP provider outage', NULL, NULL),
       ($1 - interval '25 minutes', 'ana@ops-laptop', 'bulk_retry', '{}',
        'state=failed kind=sync_inventory', 3, NULL, 'INC-4312 fixed upstream', NULL, NULL),
       ($1 - interval '9 minutes', 'api', 'purge_dlq', '{10}', NULL, 1, 'reports', NULL, NULL,
        NULL),
       ($1 - interval '2 minutes', 'ana@ops-laptop', 'complete_external', '{7}', NULL, 1,
        'payments', 'provider confirmed the charge by phone', 61,
        '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08')
"""

PAUSE_MAIL = """
INSERT INTO queue_settings (queue, paused, paused_at)
VALUES ('mail', true, $1::timestamptz - interval '7 minutes')
ON CONFLICT (queue) DO UPDATE SET paused = true, paused_at = excluded.paused_at
"""


INVALID_PAYMENT = '{"status": "maybe", "reference": "psp-77", "amount_cents": 4900}'
VALID_PAYMENT = '{"status": "paid", "reference": "psp-77", "amount_cents": 4900}'

SCREENS: dict[str, Screen] = {
    screen.name: screen
    for screen in (
        Screen("browser"),
        Screen("browser-since-sorted", keys=("slash", *"since:90m", "enter", "s")),
        Screen("detail", app_options=(("initial_job", 4),)),
        Screen(
            "detail-compare",
            app_options=(("initial_job", RETRIED_ID),),
            keys=("d",),
            more=seed_retried,
        ),
        Screen("detail-kept", app_options=(("initial_job", 5),)),
        Screen("errors", app_options=(("initial_job", 5),), keys=("e", "o")),
        Screen(
            "complete-invalid",
            app_options=(("initial_job", 7),),
            keys=("C",),
            paste=INVALID_PAYMENT,
        ),
        Screen(
            "complete-done",
            app_options=(("initial_job", 7),),
            keys=("C",),
            paste=VALID_PAYMENT,
            confirm=True,
        ),
        Screen("kinds", keys=("K",)),
        Screen("dlq", keys=("L",)),
        Screen("queues", keys=("Q",), sql=(PAUSE_MAIL,)),
        Screen("failure-groups", keys=("G",)),
        Screen("failure-groups-split", keys=("G", "f", "f", "f"), more=seed_timeouts),
        Screen("kinds-drift", keys=("K", *"jjjjjj"), sql=(DRIFTED_RECEIPT,)),
        Screen("timeline", app_options=(("initial_job", 5),), keys=("t",)),
        Screen("schedules", keys=("S",)),
        Screen("audit", keys=("U",), sql=(AUDIT_TRAIL,)),
        Screen("read-only", app_options=(("read_only", True),)),
        Screen("empty", seed=False),
    )
}


def prepare(dsn: str, schema: str, screen: Screen) -> AwaApp:
    """Seed (outside any running loop) and build the app for ``screen``."""

    async def seed(client: Client, conn: asyncpg.Connection) -> None:
        await seed_incident(client, conn)
        if screen.more is not None:
            await screen.more(client, conn)
            await pin(conn)
        for statement in screen.sql:
            await conn.execute(statement, FIXED_NOW)

    if screen.seed:
        seed_sync(dsn, schema, seed)
    return build_app(dsn, schema, **dict(screen.app_options))
