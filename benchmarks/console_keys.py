"""Key press to rendered result in the real console, on 10,000 vs 1,000,000 terminal jobs.

On ``browser_pages``'s two histories (200,000 jobs with ``--quick``), the real app runs
headless at 120x36 and each sample times from posting a key event into the app's queue to
the first frame that shows the result, rendered to terminal output (``pilot.press`` would add
its own idle waits); the sizes alternate in ``PASSES`` passes. Measured: tab switch (``7``
Failed, ``8`` Completed alternately: a first page of 50 and the counts) and paging (``n`` on
Completed, by keyset, re-selecting the tab after 5 pages), each with its time in
``Client.browse`` and this process's CPU time.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from textual import events
from textual._compositor import CompositorUpdate

from awa_tui.app import AwaApp, make_app
from awa_tui.screens.jobs import PAGE_SIZE, JobsScreen
from awa_tui.widgets.job_table import JobTable
from benchmarks._engine import log, session
from benchmarks._harness import Table, report, timed
from benchmarks.browser_pages import histories, settle
from storage import JobPage, JobState

NAME = "console_keys"
SIZE = (120, 36)
DEADLINE = 30.0
PASSES = 2  # each size is measured in this many passes of half the samples, alternating
PARTS = ("", " read", " cpu")


class KeyClock:
    """Times a key from posting its event to the first frame composed after the job table
    got the page and settled its layout; every frame meanwhile is rendered, as a terminal
    would need. The time in ``Client.browse`` is noted apart."""

    def __init__(self, app: AwaApp, table: JobTable) -> None:
        self.app, self.table = app, table
        self.done: Callable[[], bool] = lambda: False
        self.shown = False
        self.reads: list[float] = []
        self.finished: asyncio.Future[float] | None = None
        display, show = app._display, table.show

        def timed_display(screen: Any, renderable: Any) -> None:
            display(screen, renderable)
            if self.finished is None or renderable is None:
                return
            if isinstance(renderable, CompositorUpdate):
                renderable.render_segments(app.console)
            settled = not table._require_update_dimensions and not table._new_rows
            if self.shown and settled and self.done() and not self.finished.done():
                self.finished.set_result(time.perf_counter())

        def timed_show(*args: Any, **kwargs: Any) -> None:
            show(*args, **kwargs)
            self.shown = True

        app._display = timed_display  # type: ignore[method-assign]
        table.show = timed_show  # type: ignore[method-assign]

    async def time_reads(self) -> None:
        client = await self.app.client()
        browse = client.browse

        async def timed_browse(*args: Any, **kwargs: Any) -> JobPage:
            ms, page = await timed(browse(*args, **kwargs))
            self.reads.append(ms)
            return page

        client.browse = timed_browse

    async def press(self, key: str, done: Callable[[], bool]) -> tuple[float, float, float]:
        """Milliseconds from posting ``key`` to the frame showing ``done()``, of them in reads,
        and this process's CPU milliseconds meanwhile (not the server's)."""
        self.done, self.shown, self.reads = done, False, []
        self.finished = asyncio.get_running_loop().create_future()
        event = events.Key(key, key if len(key) == 1 else None)
        event.set_sender(self.app)
        started, cpu = time.perf_counter(), time.process_time()
        self.app.post_message(event)
        try:
            finished = await asyncio.wait_for(self.finished, DEADLINE)
            cpu = time.process_time() - cpu
        except TimeoutError:
            raise AssertionError(f"key {key!r}: the table never showed the result") from None
        finally:
            self.finished = None
        await self.app.workers.wait_for_complete()
        return (finished - started) * 1000, sum(self.reads), cpu * 1000


async def measure_app(dsn: str, schema: str, samples: int) -> dict[str, list[float]]:
    app = make_app(dsn, schema, refresh=0)
    out: dict[str, list[float]] = {
        f"{action}{part}": [] for action in ("tab switch", "next page") for part in PARTS
    }
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(JobTable)
        clock = KeyClock(app, table)
        await clock.time_reads()

        def showing(state: JobState, rows: int) -> Callable[[], bool]:
            def check() -> bool:
                jobs = table.jobs
                return (
                    isinstance(app.screen, JobsScreen)
                    and app.screen.query_state.tab == state.value
                    and len(jobs) == rows
                    and table.row_count == rows
                    and all(job.state is state for job in jobs)
                )

            return check

        async def press(key: str, state: JobState, rows: int, name: str | None = None) -> None:
            await pilot.pause()  # between samples, outside the clock: let the app go idle
            done = showing(state, rows)
            if name is None and done():
                return  # already there (the same tab again would load nothing)
            total, read, cpu = await clock.press(key, done)
            if name is not None:
                for part, value in zip(PARTS, (total, read, cpu), strict=True):
                    out[name + part].append(value)

        await app.workers.wait_for_complete()
        await press("8", JobState.COMPLETED, PAGE_SIZE)
        for i in range(samples):
            key, state = ("7", JobState.FAILED) if i % 2 == 0 else ("8", JobState.COMPLETED)
            await press(key, state, PAGE_SIZE, "tab switch")
        await press("8", JobState.COMPLETED, PAGE_SIZE)
        pages = 1
        for _ in range(samples):
            if pages == 6:
                await press("7", JobState.FAILED, PAGE_SIZE)
                await press("8", JobState.COMPLETED, PAGE_SIZE)
                pages = 1
            pages += 1
            await press("n", JobState.COMPLETED, pages * PAGE_SIZE, "next page")
    return out


def summary(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "n": len(values),
        "median_ms": round(statistics.median(values), 1),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))], 1),
        "max_ms": round(ordered[-1], 1),
    }


async def amain(args: Any) -> int:
    large_jobs = args.large_jobs or (200_000 if args.quick else 1_000_000)
    samples = args.samples or (20 if args.quick else 40)
    async with (
        session(args.dsn) as (dsn, conn, machine),
        histories(conn, dsn, args.seed, None if args.small_only else large_jobs) as targets,
    ):
        for _label, schema, _jobs in targets:
            await settle(conn, dsn, schema)
        build = time.perf_counter() - args.started
        log(f"built in {build:.0f} s")
        raw: dict[str, dict[str, list[float]]] = {label: {} for label, _s, _j in targets}
        for half in range(PASSES):  # the sizes alternate, so a change of load hits both
            for label, schema, _jobs in targets if half % 2 == 0 else targets[::-1]:
                for name, values in (await measure_app(dsn, schema, samples // 2)).items():
                    raw[label].setdefault(name, []).extend(values)
    rows = [
        {"jobs": label, "action": name, **summary(values)}
        for label, series in raw.items()
        for name, values in series.items()
    ]
    columns = ("jobs", "action", "n", "median_ms", "p90_ms", "max_ms")
    table = Table(
        "Key press to rendered frame, ms",
        tuple(c.replace("_ms", " ms") for c in columns),
        tuple(tuple(str(row[c]) for c in columns) for row in rows),
    )
    meta = {"machine": machine, "size": list(SIZE), "build_seconds": round(build, 1)}
    return report(args, NAME, rows, meta, title="Console keys", tables=[table])


QUICK_HELP = "200,000 jobs in the large database and 20 samples (default 1,000,000, 40)"
OPTIONS = {
    "--samples": {"type": int, "help": "samples per action"},
    "--large-jobs": {"type": int, "help": "jobs in the large database"},
    "--small-only": {"action": "store_true", "help": "only the 10,000-job database"},
}
