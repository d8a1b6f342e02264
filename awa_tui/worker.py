"""``awa-tui worker module:tasks``: run the tasks a module declares until SIGTERM or SIGINT.

The module is imported and ``tasks`` (any attribute name after the colon) must be a
``storage.Tasks``. On the first SIGTERM or SIGINT the worker stops claiming, lets running
handlers finish for up to ``--grace`` seconds, flushes their completions, gives the rest back
(retried at once with an error entry saying the worker shut down) and exits 0. It prints one
line when it starts and one when it stops; storage's own warnings go to stderr too. No output,
args or password is ever printed. ``--processes P`` runs P such workers under one parent
(``worker_pool``); a worker started by that parent also stops, as on SIGTERM, once the parent
is gone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from awa_tui.commands import fail, resolve_dsn
from awa_tui.errors import EXIT_OK, EXIT_RUNTIME_FAILED, EXIT_USAGE, describe, exit_code
from awa_tui.http.probe_server import serving_probes
from storage import (
    AwaError,
    Client,
    HealthState,
    JobEvent,
    MaintenanceSettings,
    Tasks,
    check_schema_name,
    redact_dsn,
)

GRACE_DEFAULT = 30.0
PARENT_PID_ENV = "AWA_WORKER_PARENT_PID"  # set by ``--processes`` for the workers it starts


class UsageError(Exception):
    """A worker option or target a person must fix; the message says how."""


@dataclass(frozen=True)
class WorkerSettings:
    tasks: Tasks
    target: str
    dsn: str | None
    schema: str
    queues: list[str] | dict[str, int] | None
    concurrency: int | None  # None: the runtime sizes itself (storage.runtime.sizing)
    grace: float
    max_connections: int
    rescue_after: float
    processes: int
    gc_freeze: bool  # freeze the start-up heap (storage.runtime.heap) when the runtime starts
    metrics_port: int | None = None  # /metrics, /healthz, /readyz (awa_tui.http.probe_server)
    metrics_host: str = "127.0.0.1"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="awa-tui worker",
        description="Run the tasks a module declares until SIGTERM or SIGINT.",
        epilog="Exit codes: 0 stopped by a signal, 1 runtime failed, 2 usage/configuration, "
        "3 cannot connect, 4 schema not migrated, 5 permission denied, 6 timed out, "
        "7 (--processes) a worker process died without being asked to stop, 8 not an awa-tui "
        "database (Awa's own, or a newer awa-tui's).",
    )
    parser.add_argument("target", metavar="MODULE:TASKS", help="e.g. myapp.jobs:tasks")
    parser.add_argument(
        "--dsn", help="PostgreSQL DSN (default: $AWA_DSN, $DATABASE_URL, libpq env)"
    )
    parser.add_argument("--schema", default="awa", help="queue-storage schema (default: awa)")
    parser.add_argument(
        "--queues",
        metavar="a,b | a=8,b=2",
        help="queues to serve, optionally with a cap on running handlers each "
        "(default: the queues of the tasks)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        help="a cap on jobs held at once (default: sized by the runtime, 64 to 1,024)",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=GRACE_DEFAULT,
        metavar="SECONDS",
        help="on SIGTERM/SIGINT, how long running handlers may finish (default: 30)",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=10,
        help="the worker's pool size, its whole connection budget (default: 10, at least 3)",
    )
    parser.add_argument(
        "--rescue-after",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="rescue another worker's attempt whose heartbeat is this old (default: 60)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="worker processes, each with the options above, for more cores (default: 1)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve /metrics (Prometheus), /healthz and /readyz on this port, no token; 0 picks "
        "a free one (default: off; see docs/metrics.md)",
    )
    parser.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        help="the address --metrics-port listens on (default: 127.0.0.1)",
    )
    parser.add_argument(
        "--no-gc-freeze",
        action="store_true",
        help="do not freeze the heap found at start-up against the garbage collector "
        "(frozen by default: see docs/runtime.md)",
    )
    return parser


def parse_queues(text: str | None) -> list[str] | dict[str, int] | None:
    """``a,b`` -> ``["a", "b"]``, ``a=8,b=2`` -> ``{"a": 8, "b": 2}``. Every queue carries a cap
    or none does, so a bare name beside capped ones is never a guess."""
    if text is None:
        return None
    names = [part.strip() for part in text.split(",")]
    if not all(names):
        raise UsageError(f"--queues {text!r} has an empty queue name.")
    if not any("=" in n for n in names):
        return names
    caps: dict[str, int] = {}
    for item in names:
        name, sep, cap = item.partition("=")
        if not sep or not name.strip() or not cap.strip().isdigit() or int(cap) < 1:
            raise UsageError(
                f"--queues item {item!r} is not NAME=N with N at least 1; give every queue a "
                "cap (a=8,b=2) or none (a,b)."
            )
        caps[name.strip()] = int(cap)
    return caps


def load_tasks(target: str) -> Tasks:
    """The ``Tasks`` named by ``module:attribute``, imported from the current directory too."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(f"{target!r} is not MODULE:TASKS (for example myapp.jobs:tasks).")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the module's own import error, reported as the person's to fix
        raise UsageError(
            f"Cannot import module {module_name!r} ({type(exc).__name__}: {exc})."
        ) from exc
    tasks = getattr(module, attribute, None)
    if not isinstance(tasks, Tasks):
        found = "nothing" if tasks is None else f"a {type(tasks).__name__}"
        raise UsageError(
            f"{target!r} is {found}, not a storage.Tasks; declare `tasks = Tasks()` there."
        )
    if not tasks.specs:
        raise UsageError(f"{target!r} declares no task, so this worker would have nothing to run.")
    return tasks


def settings_from(argv: Sequence[str]) -> WorkerSettings:
    args = build_parser().parse_args(argv)
    if args.concurrency is not None and args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1.")
    if args.grace < 0:
        raise UsageError("--grace must be 0 or a number of seconds.")
    if args.max_connections < 3:
        raise UsageError("--max-connections must be at least 3 (listener, claims, finalizing).")
    if args.rescue_after < 1:
        raise UsageError("--rescue-after must be at least 1 second.")
    if args.processes < 1:
        raise UsageError("--processes must be at least 1.")
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        raise UsageError(f"--metrics-port {args.metrics_port} is not a port number (0 to 65535).")
    if args.metrics_port is not None and args.processes > 1:
        raise UsageError(
            "--metrics-port serves one worker process; with --processes, run each worker as "
            "its own command with its own --metrics-port."
        )
    check_schema_name(args.schema)
    queues = parse_queues(args.queues)
    return WorkerSettings(
        tasks=load_tasks(args.target),
        target=args.target,
        dsn=resolve_dsn(args.dsn),
        schema=args.schema,
        queues=queues,
        concurrency=args.concurrency,
        grace=args.grace,
        max_connections=args.max_connections,
        rescue_after=args.rescue_after,
        processes=args.processes,
        gc_freeze=not args.no_gc_freeze,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
    )


def stop_on_signals() -> tuple[asyncio.Event, list[str]]:
    """An event SIGTERM or SIGINT sets, and the names of the signals received, in order (the
    stop line names them); for the running loop, the worker's and ``--processes``'s parent's."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    received: list[str] = []

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig.name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    return stop, received


async def serve(settings: WorkerSettings) -> int:
    stop, received = stop_on_signals()
    parent = os.environ.pop(PARENT_PID_ENV, None)  # not inherited by what handlers start
    try:
        client = await Client.connect(
            settings.dsn,
            settings.schema,
            tasks=settings.tasks,
            max_connections=settings.max_connections,
        )
    except (AwaError, OSError) as exc:
        return fail(describe(exc).text, exit_code(exc), settings.dsn)
    started = 0

    def count(_event: JobEvent) -> None:
        nonlocal started
        started += 1

    client.on_event(count, names=["started"])  # every kind: the runtime's own
    probes = contextlib.AsyncExitStack()
    if settings.metrics_port is not None:
        registry = client.enable_prometheus()  # before the first claim, so it is counted
        try:
            host, port = await probes.enter_async_context(
                serving_probes(client, registry, settings.metrics_host, settings.metrics_port)
            )
        except OSError as exc:
            await client.close()
            return fail(
                f"Cannot listen on {settings.metrics_host}:{settings.metrics_port} for "
                f"--metrics-port: {exc.strerror or exc}.",
                EXIT_USAGE,
            )
        say(f"metrics on http://{host}:{port}/metrics (/healthz, /readyz)")
    try:
        await client.start(
            settings.queues,
            concurrency=settings.concurrency,
            heartbeat_interval=min(10.0, settings.rescue_after / 3),
            maintenance=MaintenanceSettings(heartbeat_stale_seconds=settings.rescue_after),
            gc_freeze=settings.gc_freeze,
            name=settings.target,
        )
        runtime_queues = _queues_text(settings.queues or settings.tasks.queues())
        say(
            f"started {settings.target} (pid {os.getpid()}) on {redact_dsn(settings.dsn)}, "
            f"schema {settings.schema}, queues {runtime_queues}, "
            f"concurrency {settings.concurrency or 'auto'}, "
            f"{settings.max_connections} connections"
        )
        while not stop.is_set():
            health = client.health
            if health.state is HealthState.FAILED:
                await client.shutdown(grace=settings.grace)
                await probes.aclose()
                await client.close()
                return fail(
                    f"the runtime failed ({health.reason}) after starting {started} jobs; "
                    "see the warnings above.",
                    EXIT_RUNTIME_FAILED,
                    settings.dsn,
                )
            if parent is not None and str(os.getppid()) != parent:  # its parent was killed
                received.append(f"the exit of its parent process (pid {parent})")
                break
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
            except TimeoutError:
                continue
        await client.shutdown(grace=settings.grace)
        await probes.aclose()
        await client.close()
    except (AwaError, OSError) as exc:
        await probes.aclose()
        client.pool.terminate()  # failing anyway: nothing to wait for (a no-op once closed)
        return fail(describe(exc).text, exit_code(exc), settings.dsn)
    say(f"stopped on {received[0]} after starting {started} jobs; completions flushed")
    return EXIT_OK


def _queues_text(queues: Sequence[str] | Mapping[str, int]) -> str:
    if isinstance(queues, Mapping):
        return ",".join(f"{q}={n}" for q, n in queues.items())
    return ",".join(queues)


def say(line: str) -> None:
    print(f"awa-tui worker: {line}", file=sys.stderr, flush=True)
