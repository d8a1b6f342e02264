"""Key press to rendered result in the real console, on 10,000 vs 1,000,000 terminal jobs.

Run as ``python -m benchmarks.console_keys [--quick] [--dsn DSN] [--out DIR]``.

The databases are built exactly as ``benchmarks.browser_pages`` builds them (its
``build_small``/``build_large``/``settle``; ``--quick`` makes the large one 200,000 jobs).
For each, the real app (``make_app``, live refresh off) runs headless under Textual's
``run_test`` at 120x36, and each sample is the wall time from ``pilot.press`` to the table
showing the result: the press returns, the app's workers complete, and the job table holds
the expected rows. Measured:

* tab switch: ``7`` (Failed) and ``8`` (Completed) alternately, each a first page of 50 and
  the tab counts;
* paging: ``n`` on the Completed tab, 50 more rows by keyset (after 5 pages the tab is
  re-selected, so every sample pages at the same depths).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import asyncpg

from awa_tui.app import AwaApp, make_app
from awa_tui.screens.jobs import PAGE_SIZE, JobsScreen
from awa_tui.widgets.job_table import JobTable
from benchmarks._engine import drop_queue_schema, log, prepare
from benchmarks._harness import Connection, base_parser, command_line, embedded_or_dsn
from benchmarks.browser_pages import BASE_JOBS, build_large, build_small, settle
from storage import JobState

NAME = "console_keys"
SIZE = (120, 36)
DEADLINE = 30.0


def screen_of(app: AwaApp) -> JobsScreen:
    screen = app.screen
    assert isinstance(screen, JobsScreen)
    return screen


async def press_until(pilot: Any, key: str, done: Callable[[], bool]) -> float:
    """Milliseconds from pressing ``key`` to ``done()`` with no worker left running."""
    started = time.perf_counter()
    await pilot.press(key)
    deadline = started + DEADLINE
    while True:
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        if done() and not any(w.is_running for w in pilot.app.workers):
            return (time.perf_counter() - started) * 1000
        if time.perf_counter() > deadline:
            raise AssertionError(f"key {key!r}: the table never showed the result")


async def measure_app(dsn: str, schema: str, samples: int) -> dict[str, list[float]]:
    app = make_app(dsn, schema, refresh=0)
    out: dict[str, list[float]] = {"tab switch": [], "next page": []}
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(JobTable)

        def showing(state: JobState, rows: int) -> Callable[[], bool]:
            def check() -> bool:
                screen = screen_of(app)
                jobs = table.jobs
                return (
                    screen.query_state.tab == state.value
                    and len(jobs) == rows
                    and table.row_count == rows
                    and all(job.state is state for job in jobs)
                )

            return check

        await press_until(pilot, "8", showing(JobState.COMPLETED, PAGE_SIZE))
        for i in range(samples):
            key, state = ("7", JobState.FAILED) if i % 2 == 0 else ("8", JobState.COMPLETED)
            out["tab switch"].append(await press_until(pilot, key, showing(state, PAGE_SIZE)))
        await press_until(pilot, "8", showing(JobState.COMPLETED, PAGE_SIZE))
        pages = 1
        for _ in range(samples):
            if pages == 6:
                await press_until(pilot, "7", showing(JobState.FAILED, PAGE_SIZE))
                await press_until(pilot, "8", showing(JobState.COMPLETED, PAGE_SIZE))
                pages = 1
            pages += 1
            rows = pages * PAGE_SIZE
            out["next page"].append(
                await press_until(pilot, "n", showing(JobState.COMPLETED, rows))
            )
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
    started = time.perf_counter()
    results: dict[str, dict[str, dict[str, float]]] = {}
    async with embedded_or_dsn(args.dsn, log=log) as dsn:
        await prepare(dsn)
        conn: Connection = await asyncpg.connect(dsn)
        schemas: list[str] = []
        try:
            small = await build_small(conn, dsn, 48)
            schemas.append(small)
            targets = [(f"{BASE_JOBS // 1000}k", small)]
            if not args.small_only:
                large = await build_large(conn, small, large_jobs // BASE_JOBS)
                schemas.append(large)
                targets.append(
                    (
                        f"{large_jobs / 1e6:g}M" if large_jobs >= 1e6 else f"{large_jobs // 1000}k",
                        large,
                    )
                )
            for _label, schema in targets:
                await settle(conn, dsn, schema)
            build = time.perf_counter() - started
            log(f"built in {build:.0f} s")
            for label, schema in targets:
                raw = await measure_app(dsn, schema, samples)
                results[label] = {name: summary(values) for name, values in raw.items()}
                for name, stats in results[label].items():
                    log(f"{label} {name}: {stats}")
        finally:
            for schema in schemas:
                await drop_queue_schema(conn, schema)
            await conn.close()
    print(
        "| jobs | action | n | median ms | p90 ms | max ms |\n| --- | --- | --- | --- | --- | --- |"
    )
    for label, actions in results.items():
        for name, s in actions.items():
            cells = (label, name, s["n"], s["median_ms"], s["p90_ms"], s["max_ms"])
            print("| " + " | ".join(str(cell) for cell in cells) + " |")
    args.out.mkdir(parents=True, exist_ok=True)
    document = {
        "command": command_line(NAME, sys.argv[1:]),
        "size": list(SIZE),
        "build_seconds": round(build, 1),
        "results": results,
    }
    path = Path(args.out) / f"{NAME}.json"
    path.write_text(json.dumps(document, indent=2) + "\n")
    log(f"wrote {path} ({time.perf_counter() - started:.0f} s total)")
    return 0


def parse_args(argv: Sequence[str] | None = None) -> Any:
    parser = base_parser(
        NAME,
        __doc__.split("\n", 1)[0] if __doc__ else None,
        quick_help="200,000 jobs in the large database and 20 samples (default 1,000,000, 40)",
    )
    parser.add_argument("--samples", type=int, help="samples per action")
    parser.add_argument("--large-jobs", type=int, help="jobs in the large database")
    parser.add_argument("--small-only", action="store_true", help="only the 10,000-job database")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(amain(parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
