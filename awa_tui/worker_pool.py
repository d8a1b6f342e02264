"""``awa-tui worker --processes P``: one parent and P worker processes, for more cores.

One worker process runs its handlers, claims and flushes on one core (the GIL), so more
cores take more processes. Each child is this same command with ``--processes 1``, started
as ``python -m awa_tui``: its own interpreter, pool (``--max-connections`` each) and runtime,
the single worker whose signals, exit codes and drain are tested. Children share the
parent's stderr (their own start and stop lines) and process group (Ctrl-C in a terminal
reaches them all), and the parent forwards SIGTERM/SIGINT as SIGTERM.

The parent restarts nothing. The first child that exits without being asked to (killed by a
signal such as the OOM killer's, crashed, its runtime failed) stops the others gracefully,
and the parent exits with a code that says so: the service supervisor (systemd, Kubernetes)
restarts the whole worker and counts the restart where on-call engineers look, where a
restart loop in here would hide a crash loop. A child whose parent is gone (SIGKILL) notices
within a second and drains as on SIGTERM. Every child runs maintenance; the database elects
one leader per pass (a session advisory lock), so leadership passes to a survivor by itself.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Sequence

from awa_tui.commands import fail, preflight
from awa_tui.errors import (
    EXIT_CONNECT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PERMISSION,
    EXIT_RUNTIME_FAILED,
    EXIT_SCHEMA,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    EXIT_WORKER_DIED,
    describe,
    exit_code,
)
from awa_tui.worker import PARENT_PID_ENV, WorkerSettings, say, stop_on_signals
from storage import AwaError, redact_dsn

# A child that was asked to stop: drained and exited 0, or got the signal before it could
# install its handlers (while importing).
ASKED_TO_STOP = {EXIT_OK, EXIT_INTERRUPTED, -signal.SIGTERM, -signal.SIGINT}
# The worker's own documented failures, passed on as the parent's exit code.
MEANINGS = {
    EXIT_RUNTIME_FAILED: "its runtime failed",
    EXIT_USAGE: "a usage or configuration error",
    EXIT_CONNECT: "it cannot connect",
    EXIT_SCHEMA: "the schema is not migrated",
    EXIT_PERMISSION: "permission denied",
    EXIT_TIMEOUT: "a statement timed out",
    EXIT_INTERNAL: "an internal error",
}
Child = asyncio.subprocess.Process


async def supervise(argv: Sequence[str], settings: WorkerSettings) -> int:
    """Start the children, wait for a signal or a child's exit, then stop and reap them all."""
    stop, received = stop_on_signals()
    try:  # a wrong DSN or an unmigrated schema is said once, not once per child
        await preflight(settings.dsn, settings.schema, read_only=False)
    except (AwaError, OSError) as exc:
        return fail(describe(exc).text, exit_code(exc), settings.dsn)
    command = [sys.executable, "-m", "awa_tui", "worker", *argv, "--processes", "1"]
    env = {**os.environ, PARENT_PID_ENV: str(os.getpid())}
    children: list[Child] = []
    try:
        while len(children) < settings.processes and not stop.is_set():
            children.append(await asyncio.create_subprocess_exec(*command, env=env))
        say(
            f"started {len(children)} worker processes (pids "
            f"{', '.join(str(c.pid) for c in children)}) on {redact_dsn(settings.dsn)}, "
            f"schema {settings.schema}; SIGTERM or SIGINT stops them all"
        )
        return await _watch(children, stop, received, settings.rescue_after)
    except OSError as exc:  # no process could be started (a process or memory limit)
        return fail(
            f"cannot start a worker process ({type(exc).__name__}: {exc.strerror}); "
            "the others were stopped.",
            EXIT_WORKER_DIED,
        )
    finally:  # on every way out: nothing keeps running after the parent
        for child in children:
            if child.returncode is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            await child.wait()


async def _watch(
    children: list[Child], stop: asyncio.Event, received: list[str], rescue: float
) -> int:
    """Wait for a signal or the first child's exit; stop every child; the exit code."""
    waits = {asyncio.ensure_future(child.wait()): child for child in children}
    stopping = asyncio.ensure_future(stop.wait())
    done, _ = await asyncio.wait([stopping, *waits], return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    exited = [waits[task] for task in done if task in waits]
    code, cause = EXIT_OK, f"on {received[0]}" if received else ""
    if exited and not stop.is_set():  # a child went first: say which and why, now
        first = min(exited, key=children.index)
        code, why = _verdict(first.returncode)
        cause = f"because worker process {children.index(first) + 1} (pid {first.pid}) {why}"
        say(f"stopping every worker process {cause}")
        if code != EXIT_OK:
            say(
                f"any job it was running runs again once maintenance rescues it ({rescue:g} s "
                f"after its last heartbeat); exit {code}: the supervisor should restart the worker"
            )
    for child in children:
        if child.returncode is None:
            child.send_signal(signal.SIGTERM)
    await asyncio.gather(*waits)
    for child in children:  # a later failure while draining still counts
        if code == EXIT_OK and child.returncode not in ASKED_TO_STOP:
            code, why = _verdict(child.returncode)
            say(f"worker process {children.index(child) + 1} (pid {child.pid}) {why}")
    say(f"stopped {len(children)} worker processes {cause}, exit {code}")
    return code


def _verdict(returncode: int | None) -> tuple[int, str]:
    """A child's exit status as (the parent's exit code, what happened to the child)."""
    if returncode in ASKED_TO_STOP:
        return EXIT_OK, "was stopped by a signal sent to it"
    if returncode is not None and returncode in MEANINGS:
        return returncode, f"exited {returncode} ({MEANINGS[returncode]})"
    if returncode is not None and -returncode in signal.valid_signals():
        return EXIT_WORKER_DIED, f"was killed by {signal.Signals(-returncode).name}"
    return EXIT_WORKER_DIED, f"exited {returncode} unexpectedly"
