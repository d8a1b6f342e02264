"""A live workload for console tests, and a tour of every screen to drive while it runs.

The workload runs the demo's kinds through the real runtime (completions on both paths,
retries whose failed attempts keep outputs, terminal failures into the DLQ, jobs waiting for
callbacks), keeps inserting, and a second client does what an operator does meanwhile:
cancel, retry, delete and complete_external. Races with the runtime are expected (a job moves
on between the read and the action); storage refuses those with an ``AwaError``, counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from textual import events
from textual.pilot import Pilot

from awa_tui.app import AwaApp
from awa_tui.demo import (
    AwaitPayment,
    ChargeCard,
    ResizeImage,
    SendEmail,
    SyncInventory,
    register,
    seed,
)
from awa_tui.query import TABS
from awa_tui.screens.complete import CompleteCallbackModal
from awa_tui.screens.detail import JobDetailScreen
from awa_tui.screens.dlq import DlqScreen
from awa_tui.screens.error_history import ErrorHistoryScreen
from awa_tui.screens.failure_groups import FailureGroupsScreen
from awa_tui.screens.help import HelpScreen
from awa_tui.screens.jobs import JobsScreen
from awa_tui.screens.kinds import KindsScreen
from awa_tui.screens.queues import QueuesScreen
from awa_tui.screens.timeline import TimelineScreen
from storage import AwaError, Client, JobState

ADMIN_ACTIONS = ("cancel", "retry", "delete", "complete_external")


async def _every(stop: asyncio.Event, seconds: float) -> bool:
    """Wait ``seconds`` or until stopped; True while the workload should go on."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    return not stop.is_set()


async def _feed(
    client: Client, rng: random.Random, stop: asyncio.Event, tally: Counter[str]
) -> None:
    n = 10_000
    while await _every(stop, 0.05):
        n += 1
        pick = rng.random()
        if pick < 0.3:
            to = f"bounce{n}@example.com" if n % 4 == 0 else f"user{n}@example.com"
            await client.insert(SendEmail(to=to, template="receipt"), max_attempts=3)
        elif pick < 0.5:
            await client.insert(ResizeImage(image_id=n, width=800, height=600), tags=["upload"])
        elif pick < 0.65:
            await client.insert(ChargeCard(order_id=n, amount_cents=7 * n), max_attempts=1)
        elif pick < 0.85:
            await client.insert(AwaitPayment(order_id=n, provider="adyen"))
        else:
            await client.insert(SyncInventory(warehouse="eu-3"), max_attempts=2)
        tally["inserted"] += 1


async def _admin(client: Client, stop: asyncio.Event, tally: Counter[str]) -> None:
    async def act(name: str, action: Awaitable[Any]) -> None:
        try:
            await action
        except AwaError:
            tally[f"{name} refused"] += 1
        else:
            tally[name] += 1

    rounds = 0
    while await _every(stop, 0.5):
        for row in await client.list_jobs(state=JobState.AVAILABLE, limit=2):
            await act("cancel", client.cancel_job(row.id))
        for row in await client.list_jobs(state=JobState.CANCELLED, limit=1):
            await act("retry", client.retry_job(row.id))
        for row in await client.list_jobs(dlq=True, limit=1):
            await act("retry", client.retry_job(row.id))
        for row in await client.list_jobs(state=JobState.COMPLETED, limit=1):
            await act("delete", client.delete_job(row.id))
        rounds += 1
        if rounds % 4:  # slower than callbacks arrive, so some stay waiting for the tour
            continue
        for row in await client.list_jobs(state=JobState.WAITING_EXTERNAL, limit=1):
            job = await client.get_job(row.id)
            if job is None or job.callback is None:
                continue
            output = {"status": "paid", "reference": f"r{row.id}", "amount_cents": 100}
            await act(
                "complete_external",
                client.complete_external(job.callback.callback_id, output=output),
            )


@asynccontextmanager
async def live_workload(dsn: str, schema: str) -> AsyncIterator[Counter[str]]:
    """Runs until the block ends; yields a tally of what it did. A failure in it fails the test."""
    tally: Counter[str] = Counter()
    rng = random.Random(11)
    worker = await Client.connect(dsn, schema)
    admin = await Client.connect(dsn, schema)
    register(worker)
    await seed(worker, rng)
    await worker.start(poll_interval=0.02, heartbeat_interval=1.0)
    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(_feed(worker, rng, stop, tally)),
        asyncio.create_task(_admin(admin, stop, tally)),
    ]
    try:
        yield tally
    finally:
        stop.set()
        try:
            await asyncio.gather(*tasks)
        finally:
            await worker.shutdown(abandon=True)
            await worker.close()
            await admin.close()


def assert_alive(app: AwaApp) -> None:
    """Nothing reached the app's top level, and it still runs."""
    assert app._exception is None, f"the app crashed: {app._exception!r}"
    assert app.is_running


CHARS = {"right_square_bracket": "]", "question_mark": "?", "enter": "\r", "escape": "\x1b"}


async def step(pilot: Pilot[Any], *keys: str, rest: float = 0.1) -> None:
    """Press keys as a person would, then give the app a moment, live.

    Not ``pilot.press``: it waits for the process to go idle (up to 1 s, twice per key), and
    with a workload running in the same process it never does.
    """
    for key in keys:
        pilot.app.post_message(events.Key(key, key if len(key) == 1 else CHARS.get(key)))
        await pilot.pause(rest)
    if not keys:
        await pilot.pause(rest)
    assert_alive(pilot.app)  # type: ignore[arg-type]


async def reach(pilot: Pilot[Any], screen_type: type[Any], within: float = 10.0) -> bool:
    """Whether ``screen_type`` is on top within ``within`` seconds (polled, live)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if isinstance(pilot.app.screen, screen_type):
            return True
        await pilot.pause(0.02)
    return False


async def arrive(pilot: Pilot[Any], screen_type: type[Any], within: float = 10.0) -> None:
    """``screen_type`` is on top within ``within`` seconds, or the test fails saying what is."""
    if not await reach(pilot, screen_type, within):
        app = pilot.app
        stack = " > ".join(type(screen).__name__ for screen in app.screen_stack)
        raise AssertionError(
            f"{screen_type.__name__} not on top within {within} s: screens {stack}, "
            f"focused {app.focused!r}"
        )


async def back_to_jobs(pilot: Pilot[Any]) -> None:
    for _ in range(10):
        if isinstance(pilot.app.screen, JobsScreen):
            return
        await step(pilot, "escape")
    raise AssertionError(f"escape does not lead back from {type(pilot.app.screen).__name__}")


async def detail_loaded(pilot: Pilot[Any], within: float = 10.0) -> bool:
    """Whether the job detail on top has loaded its job within ``within`` seconds (polled)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        screen = pilot.app.screen
        if isinstance(screen, JobDetailScreen) and screen.loaded:
            return True
        await pilot.pause(0.02)
    return False


STOPS = (
    "tab",
    "paging",
    "detail",
    "errors",
    "timeline",
    "kinds",
    "dlq",
    "queues",
    "failure groups",
    "completion form",
    "help",
)


async def tour(
    pilot: Pilot[Any], *, seconds: float, find: Callable[[JobState], Awaitable[int | None]]
) -> Counter[str]:
    """Visit every tab and screen again and again for ``seconds``, and on until every stop was
    visited once (a slow host makes fewer rounds, not fewer stops; at most four times
    ``seconds``); counts the visits."""
    app = pilot.app
    assert isinstance(app, AwaApp)
    seen: Counter[str] = Counter()
    started = time.monotonic()
    await arrive(pilot, JobsScreen)
    while time.monotonic() < started + seconds or (
        any(seen[stop] == 0 for stop in STOPS) and time.monotonic() < started + 4 * seconds
    ):
        for _ in TABS:  # every state tab, back to All
            await step(pilot, "right_square_bracket")
            seen["tab"] += 1
        await step(pilot, "end", "n", "end", "n", "g")  # paging on the All tab
        seen["paging"] += 1
        await step(pilot, "enter")
        if await reach(pilot, JobDetailScreen, within=2):
            seen["detail"] += 1
        await back_to_jobs(pilot)
        # failed after retries (or retrying): it has an error history
        retried = await find(JobState.FAILED) or await find(JobState.RETRYABLE)
        if retried is not None:
            app.open_job(retried)
            await arrive(pilot, JobDetailScreen)
            await detail_loaded(pilot)  # or it vanished meanwhile: the next round tries again
            await step(pilot, "e")
            if await reach(pilot, ErrorHistoryScreen, within=2):
                seen["errors"] += 1
            await step(pilot, "escape", "t")
            if await reach(pilot, TimelineScreen, within=2):
                seen["timeline"] += 1
            await back_to_jobs(pilot)
        await step(pilot, "K")
        await arrive(pilot, KindsScreen)
        seen["kinds"] += 1
        await step(pilot, "j", "escape")
        await step(pilot, "L")
        await arrive(pilot, DlqScreen)
        seen["dlq"] += 1
        await step(pilot, "n", "enter")
        await back_to_jobs(pilot)
        waiting = await find(JobState.WAITING_EXTERNAL)
        if waiting is not None:
            app.open_job(waiting)
            await arrive(pilot, JobDetailScreen)
            await detail_loaded(pilot)  # or it vanished meanwhile: the next round tries again
            await step(pilot, "C")
            if await reach(pilot, CompleteCallbackModal, within=2):  # unless completed meanwhile
                seen["completion form"] += 1
            await back_to_jobs(pilot)
        await step(pilot, "Q")
        await arrive(pilot, QueuesScreen)
        seen["queues"] += 1
        await step(pilot, "j", "escape")
        await step(pilot, "G")
        await arrive(pilot, FailureGroupsScreen)
        seen["failure groups"] += 1
        await step(pilot, "j", "enter")  # the browser filtered to the group
        await back_to_jobs(pilot)
        await step(pilot, "question_mark")
        await arrive(pilot, HelpScreen)
        seen["help"] += 1
        await back_to_jobs(pilot)
    return seen
