"""``awa-tui serve``: the HTTP API on uvicorn, with the CLI's DSN resolution and exit codes.

It connects first (a bad DSN or an unmigrated schema is one line on stderr and the usual exit
code, before anything listens), binds its socket itself (a taken port is a usage error, not a
traceback), prints the address it serves on, and on SIGTERM or SIGINT stops accepting,
finishes the requests in flight, closes its pool and exits 0 (SIGTERM) or 130 (SIGINT).

The log is one line per request: client, method, route, status, time. Never a body, a query
string, a header or a callback id; uvicorn's own access log is off.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

import uvicorn

from awa_tui.commands import fail, resolve_dsn
from awa_tui.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    describe,
    exit_code,
)
from awa_tui.http.app import create_app
from awa_tui.http.tokens import (
    TOKEN_VARIABLE,
    TOKENS_VARIABLE,
    NamedToken,
    TokenFileError,
    load,
)
from awa_tui.present import plural
from awa_tui.resilience import unexpected_summary
from storage import AwaError, Client, ConfigError, check_schema_name, redact_dsn

GRACE_SECONDS = 10
BACKLOG = 2048  # uvicorn's default


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="awa-tui serve",
        description="Serve the JSON HTTP API (callbacks with outputs, job detail, lists).",
        epilog=(
            f"Every request needs 'Authorization: Bearer TOKEN': a token of --tokens or "
            f"${TOKENS_VARIABLE} (named, role read or write), or ${TOKEN_VARIABLE} (one write "
            "token named api). Exit codes: 0 "
            "stopped by SIGTERM, 2 usage/configuration (no token, port taken), 3 cannot "
            "connect, 4 schema not migrated, 5 permission denied, 6 timed out, 8 not an "
            "awa-tui database (Awa's own, or a newer awa-tui's), 70 internal error, 130 "
            "interrupted."
        ),
    )
    parser.add_argument(
        "--dsn", help="PostgreSQL DSN (default: $AWA_DSN, $DATABASE_URL, libpq env)"
    )
    parser.add_argument("--schema", default="awa", help="queue-storage schema (default: awa)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--port", type=int, default=8080, help="port to listen on; 0 picks a free one"
    )
    parser.add_argument(
        "--read-only",
        action="store_true",
        help="a read-only database session; writes answer 403",
    )
    parser.add_argument(
        "--tokens",
        type=Path,
        metavar="FILE",
        help=f"named tokens with roles, TOML or JSON (docs/http-api.md); or ${TOKENS_VARIABLE}",
    )
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help=f"serve without {TOKEN_VARIABLE} (only on a loopback host)",
    )
    return parser


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    if not 0 <= args.port <= 65535:
        return fail(f"--port {args.port} is not a port number (0 to 65535).", EXIT_USAGE)
    try:
        check_schema_name(args.schema)
    except ConfigError as exc:
        return fail(exc.message, EXIT_USAGE)
    try:
        tokens: list[NamedToken] | None = load(args.tokens, os.environ)
    except TokenFileError as exc:
        return fail(str(exc), EXIT_USAGE)
    if args.no_auth:
        if not is_loopback(args.host):
            return fail(
                f"--no-auth is allowed only on a loopback host, not {args.host}; set "
                f"{TOKEN_VARIABLE} instead.",
                EXIT_USAGE,
            )
        tokens = None
    elif not tokens:
        return fail(
            f"Set {TOKEN_VARIABLE} to the bearer token callers must send, or give named tokens "
            f"with --tokens FILE or {TOKENS_VARIABLE} (or use --no-auth on a loopback host).",
            EXIT_USAGE,
        )
    dsn = resolve_dsn(args.dsn)
    signals: list[int] = []

    def remember(signum: int, _frame: FrameType | None) -> None:
        signals.append(signum)  # uvicorn stops on its own handler, then hands the signal on

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, remember)
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return asyncio.run(serve(args, dsn, tokens, signals))
    except (AwaError, OSError) as exc:
        return fail(describe(exc).text, exit_code(exc), dsn)
    except Exception as exc:  # a bug: its type and place, never its message
        return fail(f"internal error: {unexpected_summary(exc)}", EXIT_INTERNAL, dsn)


async def serve(
    args: argparse.Namespace,
    dsn: str | None,
    tokens: list[NamedToken] | None,
    signals: list[int],
) -> int:
    client = await Client.connect(dsn, args.schema, read_only=args.read_only)
    try:
        try:
            sock = listen(args.host, args.port)
        except OSError as exc:
            return fail(
                f"Cannot listen on {args.host}:{args.port}: {exc.strerror or exc}.", EXIT_USAGE
            )
        app = create_app(client, tokens=tokens, read_only=args.read_only)
        config = uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="off",
            server_header=False,
            timeout_graceful_shutdown=GRACE_SECONDS,
        )
        host, port = sock.getsockname()[:2]
        modes = ", read-only" if args.read_only else ""
        modes += ", no auth" if tokens is None else f", {plural(len(tokens), 'token')}"
        print(
            f"awa-tui: serving http://{_url_host(host)}:{port} on schema {args.schema} of "
            f"{redact_dsn(dsn)}{modes}",
            flush=True,
        )
        with sock:  # uvicorn closes it too; this covers a signal that came before serving
            if not signals:
                await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        await client.close()
    return EXIT_INTERRUPTED if signal.SIGINT in signals else EXIT_OK


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket. Its protocol must say TCP: asyncio turns Nagle's algorithm off
    (TCP_NODELAY) only on such sockets, and with it on every answer waited ~40 ms for an ACK."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
