"""Periodic jobs: schedules clients declare, enqueued by the maintenance leader.

A client declares a schedule (``Client.periodic``: a cron expression in a timezone, or a fixed
interval); ``start()`` stores it in ``periodic_schedules`` (migration v005), one row per name,
so every runtime on the schema, and the console, sees it. Each maintenance pass enqueues the
due ticks (``enqueue_due``), whichever runtime leads it.

Each tick is enqueued once:
- the schedule row is locked (``FOR UPDATE SKIP LOCKED``) and moved on (``next_run_at``,
  ``last_tick_at``) in the transaction that inserts the tick's job, so two passes that overlap
  (a leader that lost its connection and a new one) cannot both take it;
- the job carries the unique key ``periodic:<name>:<tick in UTC, ISO 8601>``, held in every
  state (see ``storage.insert.unique``), so the database refuses a second job for the tick for as
  long as the first is retained.

Missed ticks: when nothing ran a pass for a while, only the latest tick that is due is
enqueued, once; the earlier ones are skipped, not replayed. A new schedule (or one whose cron,
interval or timezone changed) starts at its next tick after it is stored: nothing is enqueued
for the past. Ticks are found on maintenance passes, so a job starts up to one maintenance
interval (default 1 s) after its tick.

Cron expressions have five fields and are read by ``cronsim``, in the schedule's timezone
(wall-clock times; on a daylight-saving change a skipped time runs at the change and a
repeated one runs once). Intervals are aligned to the Unix epoch in UTC, so every client
computes the same ticks.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson
from cronsim import CronSim, CronSimError
from pydantic import BaseModel, ConfigDict

from storage.db.pool import Conn
from storage.insert import enqueue, unique
from storage.insert.enqueue import KeyedJob, NewJob
from storage.values.errors import InvalidSchedule
from storage.values.names import check_stored_name

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MIN_EVERY = timedelta(seconds=1)
DUE_BATCH = 100
TICK = timedelta(microseconds=1)

# A changed cron, interval or timezone restarts the schedule at its next tick; a changed job
# (args, queue, ...) keeps its place.
UPSERT = """
INSERT INTO periodic_schedules AS p (name, kind, queue, args, priority, max_attempts, payload,
                                     cron, every_seconds, timezone, next_run_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (name) DO UPDATE SET
    kind = excluded.kind, queue = excluded.queue, args = excluded.args,
    priority = excluded.priority, max_attempts = excluded.max_attempts,
    payload = excluded.payload, cron = excluded.cron, every_seconds = excluded.every_seconds,
    timezone = excluded.timezone, updated_at = now(),
    next_run_at = CASE
        WHEN (p.cron, p.every_seconds, p.timezone)
             IS DISTINCT FROM (excluded.cron, excluded.every_seconds, excluded.timezone)
        THEN excluded.next_run_at ELSE p.next_run_at END
"""
DUE = """
SELECT * FROM periodic_schedules WHERE next_run_at <= $1
 ORDER BY next_run_at, name LIMIT $2
   FOR UPDATE SKIP LOCKED
"""
ADVANCE = """
UPDATE periodic_schedules
   SET next_run_at = $2, last_tick_at = COALESCE($3, last_tick_at),
       last_job_id = COALESCE($4, last_job_id)
 WHERE name = $1
"""
LIST = "SELECT * FROM periodic_schedules ORDER BY name"
# A trigger locks the schedule, so a maintenance pass skips it meanwhile (``DUE`` skips locked).
ONE = "SELECT *, clock_timestamp() AS clock FROM periodic_schedules WHERE name = $1 FOR UPDATE"
TRIGGERED = "UPDATE periodic_schedules SET last_job_id = $2 WHERE name = $1"
REMOVE = "DELETE FROM periodic_schedules WHERE name = $1"
# Schemas before v005 have no schedules table; a runtime ahead of its migration skips them.
CLOCK = """
SELECT clock_timestamp() AS now,
       to_regclass(current_schema() || '.periodic_schedules') IS NOT NULL AS installed
"""


class PeriodicSchedule(BaseModel):
    """A stored schedule, as the console lists it."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: str
    queue: str
    cron: str | None
    every: timedelta | None
    timezone: str
    next_run_at: datetime
    last_tick_at: datetime | None = None
    last_job_id: int | None = None
    description: str


@dataclass(frozen=True)
class Cadence:
    """When a schedule ticks: a cron expression in a timezone, or an epoch-aligned interval."""

    cron: str | None
    every: timedelta | None
    timezone: str

    def latest(self, now: datetime) -> datetime:
        """The latest tick at or before ``now``."""
        if self.every is not None:
            return EPOCH + (now - EPOCH) // self.every * self.every
        assert self.cron is not None
        local = now.astimezone(ZoneInfo(self.timezone)) + TICK  # cronsim excludes its start
        return next(CronSim(self.cron, local, reverse=True)).astimezone(UTC)

    def following(self, now: datetime) -> datetime:
        """The first tick after ``now``."""
        if self.every is not None:
            return self.latest(now) + self.every
        assert self.cron is not None
        local = now.astimezone(ZoneInfo(self.timezone))
        return next(CronSim(self.cron, local)).astimezone(UTC)

    def describe(self) -> str:
        if self.every is not None:
            return f"every {_interval(self.every)}"
        assert self.cron is not None
        text = CronSim(self.cron, datetime.now(UTC)).explain()
        return text if self.timezone == "UTC" else f"{text} ({self.timezone})"


def cadence(cron: str | None, every: timedelta | None, timezone: str | None) -> Cadence:
    """Check a schedule's timing before anything is stored; ``InvalidSchedule`` says why."""
    if (cron is None) == (every is None):
        raise InvalidSchedule("A periodic job needs either cron=... or every=..., not both.")
    if every is not None:
        if not isinstance(every, timedelta) or every < MIN_EVERY:
            raise InvalidSchedule(
                f"every= must be a timedelta of at least 1 second, not {every!r}: ticks are "
                "found by maintenance passes, which run about once a second."
            )
        if timezone not in (None, "UTC"):
            raise InvalidSchedule(
                "timezone= applies to cron schedules; an every= interval is aligned to the "
                "Unix epoch in UTC."
            )
        return Cadence(None, every, "UTC")
    zone = timezone or "UTC"
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(
            f"Timezone {zone!r} is not known; use an IANA name such as 'Europe/Paris' or 'UTC'."
        ) from None
    if not isinstance(cron, str):
        raise InvalidSchedule(f"cron= must be a string, not {type(cron).__name__}.")
    try:
        CronSim(cron, datetime.now(UTC))
    except CronSimError as exc:
        raise InvalidSchedule(
            f"Cron expression {cron!r} is not valid ({exc}); it needs five fields: minute, "
            "hour, day of month, month, day of week (for example '*/5 * * * *')."
        ) from None
    return Cadence(cron, None, zone)


@dataclass(frozen=True)
class Declared:
    """A schedule as a client declared it: its name, timing and the job each tick inserts."""

    name: str
    cadence: Cadence
    job: NewJob


def declare(name: str, job: NewJob, when: Cadence) -> Declared:
    if job.run_at is not None or isinstance(job, KeyedJob):
        raise InvalidSchedule(
            "A periodic job takes neither run_at= (its ticks say when) nor unique_key= "
            "(each tick has its own)."
        )
    return Declared(check_stored_name(name, "Schedule"), when, job)


async def store(conn: Conn, schedules: list[Declared], now: datetime) -> None:
    """Upsert the declared schedules (``Client.start`` does it, before the runtime runs)."""
    async with conn.transaction():
        for s in sorted(schedules, key=lambda s: s.name):
            every = s.cadence.every.total_seconds() if s.cadence.every is not None else None
            await conn.execute(
                UPSERT,
                s.name,
                s.job.kind,
                s.job.queue,
                s.job.args_json,
                s.job.priority,
                s.job.max_attempts,
                s.job.payload,
                s.cadence.cron,
                every,
                s.cadence.timezone,
                s.cadence.following(now),
            )


def tick_key(name: str, tick: datetime) -> str:
    return f"periodic:{name}:{tick.astimezone(UTC).isoformat()}"


def _cadence_of(row: Any) -> Cadence:
    every = row["every_seconds"]
    return Cadence(
        row["cron"], None if every is None else timedelta(seconds=every), row["timezone"]
    )


def _job_fields(row: Any) -> dict[str, Any]:
    """The job a schedule enqueues, from its stored row (a tick's and a trigger's alike)."""
    return {
        "kind": row["kind"],
        "queue": row["queue"],
        "args_json": orjson.dumps(row["args"]),
        "priority": row["priority"],
        "max_attempts": row["max_attempts"],
        "run_at": None,
        "payload": row["payload"],
    }


async def enqueue_due(conn: Conn, now: datetime) -> list[int]:
    """Enqueue the latest due tick of every schedule due at ``now``; returns the new job ids.

    ``now`` is the database clock in the maintenance pass (one clock for every host); tests
    pass their own.
    """
    fired: list[int] = []
    async with conn.transaction():
        for row in await conn.fetch(DUE, now, DUE_BATCH):
            when = _cadence_of(row)
            tick = when.latest(now)
            job_id = None
            if row["last_tick_at"] is None or tick > row["last_tick_at"]:
                job = KeyedJob(
                    **_job_fields(row),
                    unique_key=tick_key(row["name"], tick),
                    unique_states=tuple(unique.ALL_STATES),
                )
                (inserted,) = await enqueue.insert_jobs(conn, [job], now=now)
                if not inserted.duplicate:
                    job_id = inserted.job_id
                    fired.append(job_id)
            await conn.execute(
                ADVANCE, row["name"], when.following(now), tick if job_id else None, job_id
            )
    return fired


async def run_due(conn: Conn, now: datetime | None = None) -> list[int]:
    """The maintenance step: enqueue due ticks at the database's clock (or ``now``)."""
    clock = await conn.fetchrow(CLOCK)
    assert clock is not None
    if not clock["installed"]:
        return []
    return await enqueue_due(conn, now or clock["now"])


async def trigger(conn: Conn, name: str) -> int | None:
    """Enqueue one job of the schedule now, besides its ticks (an operator's "run now"), through
    ``enqueue.insert_jobs``, so the runtimes serving its queue are woken. Its next tick stays
    where it was; ``last_job_id`` names the new job. None when no schedule has this name."""
    async with conn.transaction():
        row = await conn.fetchrow(ONE, name)
        if row is None:
            return None
        (inserted,) = await enqueue.insert_jobs(
            conn, [NewJob(**_job_fields(row))], now=row["clock"]
        )
        await conn.execute(TRIGGERED, name, inserted.job_id)
        return inserted.job_id


async def list_schedules(conn: Conn) -> list[PeriodicSchedule]:
    schedules = []
    for row in await conn.fetch(LIST):
        when = _cadence_of(row)
        schedules.append(
            PeriodicSchedule(
                name=row["name"],
                kind=row["kind"],
                queue=row["queue"],
                cron=when.cron,
                every=when.every,
                timezone=when.timezone,
                next_run_at=row["next_run_at"],
                last_tick_at=row["last_tick_at"],
                last_job_id=row["last_job_id"],
                description=when.describe(),
            )
        )
    return schedules


async def remove(conn: Conn, name: str) -> bool:
    """Delete a stored schedule; its jobs already enqueued stay. False if there was none."""
    return not (await conn.execute(REMOVE, name)).endswith(" 0")


def _interval(every: timedelta) -> str:
    seconds = every.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    return f"{seconds:g} s"
