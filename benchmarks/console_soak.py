"""The console through a long incident: RSS and key-to-frame latency at 1, 10 and 60 minutes.

The real app runs headless at 120x36 and ``--refresh 0.2`` on the browser, against the demo's
live workload (``awa_tui.demo.DemoWorkload``: inserts, retries, failures, callbacks) in a fresh
queue schema. At each mark it records the process's RSS and times, from posting the key to the
first frame rendered after the result is on screen, a tab switch (``7`` Failed / ``8``
Completed, alternately), ``Q`` (Queues
loaded), ``G`` (failure groups loaded) and ``S`` (schedules loaded), each followed by ``esc``
(not timed). ``q`` ends the app, so it is timed twice: on a fresh app after 10 s, and at the
last mark, from the key to the app's shutdown finished (the client closed); both check that
the frame the terminal keeps says "stopping…". ``--quick``: marks at 1 and 5 minutes.

The hour's history grows under the app (Queues counts the last hour's completions and draws
them per minute), so a slower key at the last mark may be the data's, not the console's age.
The control separates them: after the long-lived app quits, a fresh app on the same schema,
with the same workload running again, is measured the same way one minute in. The target the
issue sets (within 1.2x of minute 1) is checked, and beside it the console's own share (within
1.2x of the fresh app on the same data).

One mark's median is noisy: on a quiet host, medians of 9 ``Q`` presses 90 s apart ranged from
114 to 225 ms over 20 minutes with no trend. So between marks every key is also pressed
``PROBE_ROUNDS`` times every ``PROBE_MINUTES``, and the trend check fits a least-squares line
through every press of a key: the latency fitted at the last mark over the one fitted at the
first must stay within 1.2x.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from textual import events

from awa_tui.app import AwaApp, make_app
from awa_tui.demo import DEMO_LABEL, DemoWorkload
from awa_tui.query import TAB_KEYS
from awa_tui.screens.failure_groups import FailureGroupsScreen
from awa_tui.screens.jobs import JobsScreen
from awa_tui.screens.queues import QueuesScreen
from awa_tui.screens.schedules import SchedulesScreen
from awa_tui.screens.table import TableScreen
from benchmarks._engine import drop_queue_schema, log, new_queue_schema, session
from benchmarks._harness import Table, report

NAME = "console_soak"
SIZE = (120, 36)
REFRESH = 0.2
DEADLINE = 30.0  # seconds for one key's result
SAMPLES = 11  # presses of each key at each mark (the median is reported; 5 left +-20% noise)
KEYS = ("tab switch", "Q", "G", "S")
PROBE_MINUTES = 2.0  # between marks, the keys are pressed this often for the trend
PROBE_ROUNDS = 3


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class FrameClock:
    """Times a key from posting it to the first frame composed once ``done()`` holds."""

    def __init__(self, app: AwaApp) -> None:
        self.app = app
        self.done: Callable[[], bool] = lambda: False
        self.finished: asyncio.Future[float] | None = None
        self.frames = 0
        self.said_stopping = False  # a frame was drawn while the header said "stopping…"
        self.shown = False  # the browser's table got a page since the key
        display = app._display
        browser = app.screen
        assert isinstance(browser, JobsScreen)
        show = browser.table.show

        def timed_show(*args: Any, **kwargs: Any) -> None:
            show(*args, **kwargs)
            self.shown = True

        browser.table.show = timed_show  # type: ignore[method-assign]

        def timed_display(screen: Any, renderable: Any) -> None:
            display(screen, renderable)
            self.frames += 1
            self.said_stopping = self.said_stopping or app.sub_title.startswith("stopping")
            if self.finished is not None and not self.finished.done() and self.done():
                self.finished.set_result(time.perf_counter())

        app._display = timed_display  # type: ignore[method-assign]

    def post(self, key: str) -> None:
        event = events.Key(key, key if len(key) == 1 else None)
        event.set_sender(self.app)
        self.app.post_message(event)

    async def press(self, key: str, done: Callable[[], bool]) -> float:
        self.done, self.shown = done, False
        self.finished = asyncio.get_running_loop().create_future()
        started = time.perf_counter()
        self.post(key)
        try:
            return (await asyncio.wait_for(self.finished, DEADLINE) - started) * 1000
        except TimeoutError:
            screen = self.app.screen
            raise AssertionError(
                f"key {key!r}: the result never showed (on {type(screen).__name__}, "
                f"loaded={getattr(screen, 'loaded', None)})"
            ) from None
        finally:
            self.finished = None


def loaded(app: AwaApp, screen_type: type[TableScreen[Any]]) -> Callable[[], bool]:
    def check() -> bool:
        screen = app.screen
        return isinstance(screen, screen_type) and screen.loaded

    return check


def on_tab(app: AwaApp, clock: FrameClock, tab: str) -> Callable[[], bool]:
    def check() -> bool:
        screen = app.screen
        return isinstance(screen, JobsScreen) and screen.query_state.tab == tab and clock.shown

    return check


async def back_to_jobs(app: AwaApp, clock: FrameClock) -> None:
    """One esc at a time, each waited for: esc posted every 50 ms piled up on a loaded host,
    and the ones left over closed the next screen the moment it opened (the 60-minute run
    ended at 40 minutes on "key 'G': the result never showed")."""
    while not isinstance(app.screen, JobsScreen):
        left = app.screen
        clock.post("escape")
        for _ in range(200):  # up to 10 s for the esc to be handled
            if app.screen is not left:
                break
            await asyncio.sleep(0.05)


async def press_keys(app: AwaApp, clock: FrameClock, rounds: int) -> dict[str, list[float]]:
    """Each key pressed ``rounds`` times, in turn: every press's milliseconds."""
    times: dict[str, list[float]] = {key: [] for key in KEYS}
    screens: dict[str, type[TableScreen[Any]]] = {
        "Q": QueuesScreen,
        "G": FailureGroupsScreen,
        "S": SchedulesScreen,
    }
    for _ in range(rounds):
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        tab = "completed" if screen.query_state.tab == "failed" else "failed"
        times["tab switch"].append(await clock.press(TAB_KEYS[tab], on_tab(app, clock, tab)))
        for key, screen_type in screens.items():
            await asyncio.sleep(0.2)
            times[key].append(await clock.press(key, loaded(app, screen_type)))
            await back_to_jobs(app, clock)
        await asyncio.sleep(0.2)
    return times


def trend(presses: list[tuple[float, float]], first: float, last: float) -> float:
    """The latency fitted at minute ``last`` over the one fitted at ``first``: a least-squares
    line through every press, so the noise of single marks (a median of 11 swung 114-225 ms
    between marks 90 s apart with no trend, on a quiet host) averages out."""
    minutes, ms = zip(*presses, strict=True)
    fit = statistics.linear_regression(minutes, ms)
    return (fit.intercept + fit.slope * last) / max(fit.intercept + fit.slope * first, 1.0)


async def quit_ms(app: AwaApp, clock: FrameClock) -> tuple[float, bool]:
    """Post ``q``; milliseconds until the app stopped running, and whether a frame drawn after
    the key said "stopping…" (the header)."""
    started = time.perf_counter()
    clock.post("q")
    polls = 0  # the app's own exit signals are private: poll it, 5 ms apart
    while app.is_running:
        polls += 1
        await asyncio.sleep(0.005)
    return (time.perf_counter() - started) * 1000, clock.said_stopping


async def run_app(
    dsn: str,
    schema: str,
    marks: list[float],
    samples: list[dict[str, float]],
    presses: dict[str, list[tuple[float, float]]] | None = None,
) -> dict[str, Any]:
    """Run the app until the last mark; measure at each; quit. Returns the marks' results.
    With ``presses``, every key is also pressed ``PROBE_ROUNDS`` times each ``PROBE_MINUTES``
    between marks, and every press, at the marks too, is kept as (minute, ms) for the trend."""
    app = make_app(
        dsn,
        schema,
        refresh=REFRESH,
        demo_label=DEMO_LABEL,
        client_factory=DemoWorkload(dsn, schema).start,
    )
    results: dict[str, Any] = {"marks": []}
    started = time.perf_counter()
    async with app.run_test(size=SIZE) as pilot:
        await app.client()
        await pilot.pause(0.5)
        clock = FrameClock(app)

        async def pressed(rounds: int) -> dict[str, list[float]]:
            minute = (time.perf_counter() - started) / 60
            times = await press_keys(app, clock, rounds)
            for key, values in times.items():
                if presses is not None:
                    presses.setdefault(key, []).extend((minute, ms) for ms in values)
            return times

        probe = PROBE_MINUTES
        for mark in marks:
            while (elapsed := time.perf_counter() - started) < mark * 60:
                if presses is not None and probe < mark and elapsed >= probe * 60:
                    await pressed(PROBE_ROUNDS)
                    probe += PROBE_MINUTES
                    continue
                await pilot.pause(min(10.0, mark * 60 - elapsed))
                samples.append({"minute": round(elapsed / 60, 2), "rss_mb": round(rss_mb(), 1)})
            if presses is not None and probe <= mark:
                probe = mark + PROBE_MINUTES
            times = await pressed(SAMPLES) if mark > 0 else {}
            keys = {key: statistics.median(values) for key, values in times.items()}
            results["marks"].append({"minute": mark, "rss_mb": round(rss_mb(), 1), **keys})
            log(f"minute {mark:g}: {results['marks'][-1]}")
        results["q_ms"], results["said_stopping"] = await quit_ms(app, clock)
    results["q_done_ms"] = round((time.perf_counter() - started) * 1000, 1)
    return results


async def amain(args: Any) -> int:
    marks = [float(m) for m in args.minutes.split(",")] if args.minutes else None
    marks = marks or ([1.0, 5.0] if args.quick else [1.0, 10.0, 60.0])
    samples: list[dict[str, float]] = []
    async with session(args.dsn) as (dsn, conn, machine):
        schema = await new_queue_schema(conn, "soak")
        try:
            fresh = await run_app(dsn, schema, [10 / 60], [])
            log(f"fresh q: {fresh['q_ms']:.0f} ms")
            presses: dict[str, list[tuple[float, float]]] = {}
            soak = await run_app(dsn, schema, marks, samples, presses)
            control = await run_app(dsn, schema, [1.0], [])
            log(f"fresh app on the same data: {control['marks'][-1]}")
        finally:
            await drop_queue_schema(conn, schema)
    first = soak["marks"][0]
    rows: list[dict[str, Any]] = []
    for mark in soak["marks"]:
        row: dict[str, Any] = {"minute": mark["minute"], "rss_mb": mark["rss_mb"]}
        for key in KEYS:
            row[f"{key} ms"] = round(mark[key], 1)
        rows.append(row)
    last = rows[-1]
    rows[-1]["q ms"] = round(soak["q_ms"], 1)
    q_fresh = {"minute": round(10 / 60, 2), "q ms": round(fresh["q_ms"], 1)}
    columns = ("minute", "RSS MB", *(f"{key} ms" for key in KEYS), "q ms")
    table_rows = [
        (
            f"{row['minute']:g}",
            f"{row['rss_mb']:.1f}",
            *(f"{row[f'{key} ms']:.0f}" for key in KEYS),
            f"{row['q ms']:.0f}" if "q ms" in row else "-",
        )
        for row in rows
    ]
    table_rows.insert(
        0, (f"{q_fresh['minute']:g} (fresh)", "-", "-", "-", "-", "-", f"{q_fresh['q ms']:.0f}")
    )
    same_data = control["marks"][-1]
    trends = {key: trend(presses[key], marks[0], marks[-1]) for key in KEYS}
    table_rows.append(
        (
            f"trend, fitted {marks[-1]:g} ÷ fitted {marks[0]:g} ({len(presses[KEYS[0]])} presses)",
            "-",
            *(f"{trends[key]:.2f}x" for key in KEYS),
            "-",
        )
    )
    table_rows.append(
        (
            f"{marks[-1]:g} + 1 (fresh app, same data)",
            "-",  # the same process: its RSS is the long-lived app's high-water mark
            *(f"{same_data[key]:.0f}" for key in KEYS),
            "-",
        )
    )
    checks = {
        "rss_within_20_mb": last["rss_mb"] - first["rss_mb"] <= 20,
        "latency_within_1_2x": all(last[f"{key} ms"] <= 1.2 * max(first[key], 1.0) for key in KEYS),
        "latency_trend_within_1_2x": all(ratio <= 1.2 for ratio in trends.values()),
        "latency_within_1_2x_of_fresh_app": all(
            last[f"{key} ms"] <= 1.2 * max(same_data[key], 1.0) for key in KEYS
        ),
        "q_within_1_s": max(soak["q_ms"], fresh["q_ms"]) <= 1000,
        "q_said_stopping": bool(soak["said_stopping"] and fresh["said_stopping"]),
    }
    table = Table(
        f"RSS and key to frame at --refresh {REFRESH} on a live workload (median of {SAMPLES})",
        columns,
        tuple(table_rows),
        caption=" · ".join(f"{name}: {'yes' if ok else 'NO'}" for name, ok in checks.items()),
    )
    meta = {"machine": machine, "size": list(SIZE), "refresh": REFRESH, "marks": marks}
    report(
        args,
        NAME,
        rows,
        meta,
        title="Console soak",
        tables=[table],
        extra={
            "rss_samples": samples,
            "checks": checks,
            "q_fresh": q_fresh,
            "fresh_app_same_data": same_data,
            "trends": trends,
            "presses": presses,
        },
    )
    return 0 if all(checks.values()) else 1


QUICK_HELP = "marks at 1 and 5 minutes (default 1, 10 and 60)"
OPTIONS = {"--minutes": {"help": "marks, comma-separated minutes (overrides --quick)"}}
