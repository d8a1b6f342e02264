"""One runner for every benchmark case.

``python -m benchmarks CASE [--quick] [--dsn DSN] [--out DIR] [case options]`` runs one case
(``python -m benchmarks CASE --help`` lists its options); ``python -m benchmarks quick
[--dsn DSN]`` runs every case but ``peers`` in its quick mode, one after another. Results go
to ``benchmarks/results/`` (ignored by git) as ``CASE.json`` and ``CASE.md``.
"""

from __future__ import annotations

import asyncio
import importlib
import signal
import sys
import time
import traceback
from collections.abc import Sequence

from benchmarks._harness import command_line, parse_args

CASES = (
    "lifecycle",
    "instructions",
    "get_job_latency",
    "one_job_reads",
    "retry_storm",
    "browser_pages",
    "console_keys",
    "console_soak",
    "http_completions",
    "wakeup",
    "metrics_scrape",
    "idle_fleet",
    "processes",
    "last_good_output",
    "output_reads",
    "peers",
)
QUICK = [case for case in CASES if case not in ("peers", "console_soak")]


def run(case: str, argv: Sequence[str]) -> int:
    """Every case has ``QUICK_HELP`` (what ``--quick`` runs), optionally ``ROUNDS`` and
    ``OPTIONS`` (see ``parse_args``), and ``async amain(args) -> exit status``."""
    module = importlib.import_module(f"benchmarks.{case}")
    args = parse_args(case, module, argv)
    args.command = command_line(case, argv)  # recorded with the results, any DSN hidden
    args.started = time.perf_counter()  # the results' wall time
    status: int = asyncio.run(module.amain(args))
    return status


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # cleanup runs, as on ctrl+c
    if not args or args[0] not in (*CASES, "quick"):
        print(__doc__, "cases:", *CASES)
        return 0 if args and args[0] in ("-h", "--help") else 2
    if args[0] != "quick":
        return run(args[0], args[1:])
    failed = []
    for case in QUICK:
        started = time.perf_counter()
        try:
            status = run(case, ["--quick", *args[1:]])
        except Exception:  # one broken case must not hide the others' results
            traceback.print_exc()
            status = 1
        print(
            f"== {case}: {'FAILED' if status else 'ok'} in {time.perf_counter() - started:.0f} s",
            file=sys.stderr,
        )
        failed += [case] if status else []
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:  # ctrl+c or SIGTERM: the servers and children are stopped by now
        print("interrupted", file=sys.stderr)
        raise SystemExit(130) from None
