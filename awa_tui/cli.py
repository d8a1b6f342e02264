"""``awa-tui``: the on-call console for Awa-style queue storage.

Usage::

    awa-tui --dsn postgresql://user@host/db [--schema awa] [--read-only] [--refresh 2]
            [--job ID] [--kind KIND] [--state STATE] [--actor NAME]
    awa-tui migrate --dsn postgresql://user@host/db
    awa-tui serve [--dsn ...] [--schema awa] [--host 127.0.0.1] [--port 8080] [--read-only]
                  [--no-auth]            (the HTTP API; see docs/http-api.md)
    awa-tui worker myapp.jobs:tasks [--dsn ...] [--schema awa] [--queues a,b | a=8,b=2]
            [--concurrency N] [--grace 30] [--max-connections 10] [--processes 1]
            [--metrics-port PORT]   (/metrics, /healthz, /readyz; see docs/metrics.md)
    awa-tui --demo

The DSN comes from ``--dsn``, else ``AWA_DSN``, else ``DATABASE_URL``, else the libpq
environment (``PGHOST``, ``PGUSER``, ... and ``~/.pgpass``). Passwords are never printed.

Exit codes:

    0  ok (the console was closed, the migration ran, ``serve`` was stopped by SIGTERM, or a
       worker stopped on SIGTERM/SIGINT)
    1  a worker's runtime failed (a loop gave up; its warnings say why)
    2  usage or configuration error (bad option, bad DSN, bad schema name, demo unavailable;
       for ``serve``: no AWA_API_TOKEN, --no-auth on a non-loopback host, port taken)
    3  cannot connect (server unreachable, login refused, database missing, connection lost)
    4  the schema is not migrated (run ``awa-tui migrate``)
    5  permission denied (the role lacks a privilege, e.g. CREATE for ``migrate``)
    6  timed out (a statement or lock wait ran past its timeout; nothing was applied, re-run)
    7  ``worker --processes``: a worker process died without being asked (killed by a signal)
    8  the database is not awa-tui's: Awa's own (``awa.schema_version``), another tool's, or
       migrated by a newer awa-tui; nothing is read or written (``migrate`` refuses it too)
    70 an unexpected internal error stopped the console (a bug; one line on stderr, no locals)
    130 interrupted (SIGINT / Ctrl-C outside the console, while --demo starts, or ``serve``)
    129, 143  --demo ended by SIGHUP (a closed terminal) or SIGTERM; the demo still cleans up

Once the console is open, a lost connection does not end it: the header says
``connection lost, retrying`` and the console recovers by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence

from awa_tui.commands import fail, preflight, resolve_dsn
from awa_tui.errors import (
    EXIT_CONNECT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    describe,
    exit_code,
)
from awa_tui.query import TAB_NAMES, tab_named
from storage import (
    AwaError,
    ConfigError,
    InvalidOption,
    check_actor,
    check_schema_name,
    migrate,
    redact_dsn,
)

REFRESH_DEFAULT = 2.0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="awa-tui",
        description="Inspect and repair jobs in Awa-style Postgres queue storage. "
        "Subcommands: migrate, worker MODULE:TASKS, serve (see `awa-tui worker --help`, "
        "`awa-tui serve --help`).",
        epilog=(
            "Exit codes: 0 ok, 2 usage/configuration, 3 cannot connect, 4 schema not migrated, "
            "5 permission denied, 6 timed out, 8 not an awa-tui database (Awa's own, or a newer "
            "awa-tui's), 70 internal error, 130 interrupted; a worker "
            "also exits 1 when its runtime fails, 7 when one of its --processes dies."
        ),
    )
    parser.add_argument(
        "--dsn", help="PostgreSQL DSN (default: $AWA_DSN, $DATABASE_URL, libpq env)"
    )
    parser.add_argument(
        "--schema",
        default="awa",
        help="queue-storage schema (default: awa); several as a,b (the first is shown, Z picks "
        "another) or * (every installed one, awa first)",
    )
    parser.add_argument(
        "--read-only", action="store_true", help="open a read-only database session"
    )
    parser.add_argument(
        "--refresh",
        type=float,
        default=REFRESH_DEFAULT,
        metavar="SECONDS",
        help="live refresh interval of the job browser; 0 starts paused (default: 2)",
    )
    parser.add_argument("--job", type=int, metavar="ID", help="open this job's detail at start")
    parser.add_argument("--kind", metavar="KIND", help="start with the browser filtered to KIND")
    parser.add_argument(
        "--state", metavar="STATE", help=f"start on a state tab: {', '.join(TAB_NAMES)}"
    )
    parser.add_argument(
        "--actor",
        metavar="NAME",
        help="who this console's writes are audited as (default: your OS user@host)",
    )
    parser.add_argument(
        "--demo", action="store_true", help="embedded PostgreSQL with a live demo workload"
    )
    parser.add_argument(
        "command",
        nargs="?",
        choices=["migrate", "serve"],
        help="migrate: apply migrations and exit; serve: the HTTP API (awa-tui serve --help)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The entry point: every way out returns one of the documented exit codes."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return fail("interrupted.", EXIT_INTERRUPTED)


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve"]:
        from awa_tui.http.serve import main as serve

        return serve(argv[1:])
    if argv[:1] == ["worker"]:
        return run_worker(argv[1:])
    args = build_parser().parse_args(argv)
    if args.refresh < 0:
        return fail("--refresh must be 0 (paused) or a number of seconds.", EXIT_USAGE)
    if args.state is not None:
        tab = tab_named(args.state)
        if tab is None:
            return fail(
                f"--state {args.state!r} is not a state; choose one of {', '.join(TAB_NAMES)}.",
                EXIT_USAGE,
            )
        args.state = tab
    if args.command == "serve":
        return fail("Put serve first: awa-tui serve [--dsn ...] [--port ...] ...", EXIT_USAGE)
    try:
        args.schema, args.schemas = schemas_named(args.schema)
        if args.actor is not None:
            args.actor = check_actor(args.actor)
    except (ConfigError, InvalidOption) as exc:
        return fail(exc.message, EXIT_USAGE)
    if args.demo:
        if args.command is not None:
            return fail("--demo cannot be combined with migrate.", EXIT_USAGE)
        from awa_tui.demo import run_demo

        return run_demo(args)
    dsn = resolve_dsn(args.dsn)
    if args.command == "migrate":
        try:
            applied = asyncio.run(migrate(dsn))
        except (AwaError, OSError) as exc:
            return fail(describe(exc).text, exit_code(exc), dsn)
        done = ", ".join(f"v{v:03d}" for v in applied) or "nothing (already up to date)"
        print(f"awa-tui: migrated {redact_dsn(dsn)}: applied {done}.")
        return EXIT_OK
    try:
        asyncio.run(preflight(dsn, args.schema, args.read_only))
    except (AwaError, OSError) as exc:
        return fail(describe(exc).text, exit_code(exc), dsn)
    return run_console(args, dsn)


def schemas_named(text: str) -> tuple[str, tuple[str, ...]]:
    """``--schema``: the schema shown first and the ones the picker offers (none: all).
    ``a,b`` shows a and offers a and b; ``*`` shows awa and offers every installed one."""
    if text.strip() == "*":
        return "awa", ()
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    if not names:
        raise ConfigError("--schema needs a schema name, several as a,b, or *.")
    for name in names:
        check_schema_name(name)
    return names[0], names if len(names) > 1 else ()


def run_worker(argv: Sequence[str]) -> int:
    """The ``worker`` subcommand: one worker, or ``--processes`` of them under one parent."""
    from awa_tui.worker import UsageError, serve, settings_from
    from awa_tui.worker_pool import supervise

    try:
        settings = settings_from(argv)
    except UsageError as exc:
        return fail(str(exc), EXIT_USAGE)
    except ConfigError as exc:
        return fail(exc.message, EXIT_USAGE)
    logging.basicConfig(
        level=logging.WARNING, format="awa-tui worker: %(levelname)s %(name)s: %(message)s"
    )
    if settings.processes > 1:
        return asyncio.run(supervise(argv, settings))
    return asyncio.run(serve(settings))


def run_console(args: argparse.Namespace, dsn: str | None) -> int:
    from awa_tui.app import make_app

    app = make_app(
        dsn,
        args.schema,
        schemas=args.schemas,
        read_only=args.read_only,
        refresh=args.refresh,
        initial_job=args.job,
        initial_kind=args.kind,
        initial_state=args.state,
        editor=os.environ.get("VISUAL") or os.environ.get("EDITOR"),
        actor=args.actor,
    )
    app.run()
    if app.fatal_message is not None:
        return fail(app.fatal_message, app.return_code or EXIT_CONNECT, dsn)
    return app.return_code or EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
