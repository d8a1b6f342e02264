"""Run the quick set of every benchmark (peers excepted) in one command.

Run as ``python -m benchmarks.quick [--dsn DSN] [--out DIR] [--skip NAME ...]``.

Runs, in order, each with ``--quick``: ``completion_statements``, ``lifecycle``,
``instructions`` (needs valgrind), ``output_cost``, ``get_job_latency``, ``retry_storm``,
``browser_pages``. Each starts (and
stops) its own embedded PostgreSQL unless ``--dsn`` is given, prints its tables and writes
its JSON and Markdown into ``--out``. A failing benchmark is reported and the rest still
run; the exit status is non-zero if any failed. Budget: well under 10 minutes on 2 cores.
"""

from __future__ import annotations

import importlib
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._engine import log
from benchmarks._harness import Table, print_table

BENCHMARKS = (
    "completion_statements",
    "lifecycle",
    "instructions",
    "output_cost",
    "get_job_latency",
    "retry_storm",
    "browser_pages",
)


def parse_args(argv: Sequence[str] | None) -> Any:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.quick",
        description=__doc__.split("\n", 1)[0] if __doc__ else None,
    )
    parser.add_argument("--dsn", help="benchmark this server instead of embedded ones")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument(
        "--skip", action="append", default=[], choices=BENCHMARKS, help="leave one out"
    )
    return parser.parse_args(argv)


def run_one(name: str, out: Path, dsn: str | None) -> tuple[bool, float]:
    module = importlib.import_module(f"benchmarks.{name}")
    argv = ["--quick", "--out", str(out)]
    if dsn:
        argv += ["--dsn", dsn]
    started = time.perf_counter()
    saved = sys.argv
    # Each module records sys.argv[1:] as its command line.
    sys.argv = [f"benchmarks/{name}.py", *argv]
    try:
        status = module.main(argv)
        ok = status == 0
    except Exception:
        log(f"{name} failed:\n{traceback.format_exc()}")
        ok = False
    finally:
        sys.argv = saved
    return ok, time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    results: list[tuple[str, bool, float]] = []
    for name in BENCHMARKS:
        if name in args.skip:
            continue
        log(f"== {name} --quick")
        ok, seconds = run_one(name, args.out, args.dsn)
        results.append((name, ok, seconds))
    total = time.perf_counter() - started
    print_table(
        Table(
            f"Quick benchmark set: {total:.0f} s",
            ("benchmark", "status", "seconds", "results"),
            tuple(
                (name, "ok" if ok else "FAILED", f"{seconds:.0f}", str(args.out / f"{name}.md"))
                for name, ok, seconds in results
            ),
            align=("l", "l", "r", "l"),
        )
    )
    return 0 if all(ok for _, ok, _ in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
