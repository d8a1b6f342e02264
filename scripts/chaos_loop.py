"""Run the chaos test (``tests/faults/test_chaos_kills.py``) N times and count the hangs.

    python scripts/chaos_loop.py 50              # 50 runs, each its own pytest process
    python scripts/chaos_loop.py 50 --run-timeout 300

Each run is one pytest process (its own embedded PostgreSQL, or $AWA_TEST_DSN). A run counts
as a **hang** when the process has not finished after ``--run-timeout`` seconds (it is then
stopped: SIGTERM, which the test session turns into a clean stop of its server, then SIGKILL
of its process group), or when the test failed on its close watchdog (``HANG`` in its
output: a close that did not return, or that had to use its bound to terminate connections
that never came back). Any other failure counts as a **failure**, with its last lines shown.
Not run in CI: it takes minutes (about 10 s a run on a quiet host).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/faults/test_chaos_kills.py"


def run_once(run_timeout: float) -> tuple[str, float, str]:
    """One run: ("pass" | "hang" | "failure", seconds, its output's tail)."""
    start = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", TEST, "-q", "-p", "no:randomly"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, so a hung run is stopped whole
    )
    try:
        output, _ = process.communicate(timeout=run_timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
        return "hang", time.monotonic() - start, _tail(output)
    took = time.monotonic() - start
    if process.returncode == 0:
        return "pass", took, ""
    verdict = "hang" if "HANG" in output else "failure"
    return verdict, took, _tail(output)


def _tail(output: str, lines: int = 15) -> str:
    return "\n".join(output.strip().splitlines()[-lines:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=int, nargs="?", default=50)
    parser.add_argument("--run-timeout", type=float, default=300.0, help="seconds per run")
    args = parser.parse_args()
    counts = {"pass": 0, "hang": 0, "failure": 0}
    began = time.monotonic()
    for i in range(1, args.runs + 1):
        verdict, took, tail = run_once(args.run_timeout)
        counts[verdict] += 1
        print(f"run {i}/{args.runs}: {verdict} in {took:.1f}s", flush=True)
        if tail:
            print(tail, flush=True)
    total = time.monotonic() - began
    print(
        f"{args.runs} runs, {counts['hang']} hangs, {counts['failure']} other failures "
        f"({counts['pass']} passed) in {total:.0f}s",
        flush=True,
    )
    return 0 if counts["pass"] == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
