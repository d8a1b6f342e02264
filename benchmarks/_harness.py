"""What every benchmark shares: a server, WAL/size/CPU measurements, paired statistics,
tables and results files, and the one argument parser every case extends. Identifiers
interpolated into SQL go through :func:`ident`; values are always parameters."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import gc
import os
import platform
import pwd
import re
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeAlias, TypeVar

import asyncpg
import orjson

from awa_tui.embedded import EmbeddedPostgres

Connection: TypeAlias = "asyncpg.Connection[asyncpg.Record]"
T = TypeVar("T")
R = TypeVar("R")
RESULTS = Path("benchmarks/results")  # ignored by git, never committed

_IDENT_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def ident(name: str) -> str:
    """``name`` double-quoted for SQL; only plain lower-case identifiers are accepted."""
    if not _IDENT_RE.fullmatch(name):
        raise ValueError(f"not a plain SQL identifier: {name!r}")
    return f'"{name}"'


@contextlib.asynccontextmanager
async def embedded_or_dsn(
    dsn: str | None = None, *, log: Callable[[str], None] | None = None
) -> AsyncIterator[str]:
    """Yield ``dsn``, or start an embedded server (the console's and the tests'
    ``EmbeddedPostgres``: a private temporary directory) and remove it afterwards."""
    if dsn is not None:
        yield dsn
        return
    if log is not None:
        log("starting embedded PostgreSQL")
    server = EmbeddedPostgres(prefix="awa-bench-")
    try:
        yield await asyncio.to_thread(server.start)
    finally:
        server.stop()


async def ensure_max_connections(dsn: str, wanted: int, log: Callable[[str], None]) -> None:
    """Raise the server's ``max_connections`` to ``wanted`` (``ALTER SYSTEM``, then ``pg_ctl
    restart`` of its data directory, which keeps its socket options): only a server whose data
    directory is on this machine, such as the embedded one; another is refused in one line."""
    conn: Connection = await asyncpg.connect(dsn)
    try:
        have = int(await conn.fetchval("SHOW max_connections"))
        if have >= wanted:
            return
        data = Path(str(await conn.fetchval("SHOW data_directory")))
        if not await asyncio.to_thread((data / "postmaster.pid").exists):
            raise SystemExit(f"the server allows {have} connections; this case needs {wanted}")
        await conn.execute(f"ALTER SYSTEM SET max_connections = {int(wanted)}")
    finally:
        await conn.close()
    log(f"restarting the server with max_connections = {wanted}")
    await asyncio.to_thread(_restart_local, data)


def _restart_local(data: Path) -> None:
    """``pg_ctl restart`` by the embedded server's own binaries, as the data directory's owner."""
    from pgserver import _commands

    user = pwd.getpwuid(data.stat().st_uid).pw_name
    pg_ctl: Any = vars(_commands)["pg_ctl"]  # made when pgserver is imported
    pg_ctl(["-w", "-m", "fast", "restart"], pgdata=data, user=user, timeout=60)


async def wal_lsn(conn: Connection) -> str:
    """The current WAL insert position."""
    return str(await conn.fetchval("SELECT pg_current_wal_insert_lsn()::text"))


async def wal_bytes_since(conn: Connection, start_lsn: str) -> int:
    """WAL bytes inserted since ``start_lsn``, by every writer on the server."""
    sql = "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::text::pg_lsn)::bigint"
    return int(await conn.fetchval(sql, start_lsn))


async def checkpoint(conn: Connection) -> None:
    """``CHECKPOINT`` when permitted: every run starts at the same place relative to one."""
    with contextlib.suppress(asyncpg.InsufficientPrivilegeError):
        await conn.execute("CHECKPOINT")


async def schema_tables(conn: Connection, schema: str) -> list[str]:
    """The top-level tables of ``schema`` (plain and partitioned, not partitions)."""
    rows = await conn.fetch(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
        " ORDER BY c.relname",
        schema,
    )
    return [str(r["relname"]) for r in rows]


async def relations_size(conn: Connection, schema: str, tables: Iterable[str]) -> int:
    """The summed ``pg_total_relation_size`` of ``tables``, their partitions included."""
    sql = (
        "SELECT coalesce(sum(pg_total_relation_size(p.oid)), 0)::bigint"
        " FROM unnest($2::text[]) t(name),"
        " LATERAL (SELECT format('%I.%I', $1::text, t.name)::regclass AS oid) c,"
        " LATERAL (SELECT c.oid UNION SELECT relid FROM pg_partition_tree(c.oid)) p"
    )
    return int(await conn.fetchval(sql, schema, list(tables)))


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (ppid is [1])."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


@dataclass(frozen=True, slots=True)
class ServerCpu:
    """CPU seconds of a local PostgreSQL: the postmaster, its exited and live children."""

    postmaster: int

    @classmethod
    async def find(cls, conn: Connection) -> ServerCpu | None:
        """The server behind ``conn`` when its processes are visible here."""
        fields = _proc_stat(int(await conn.fetchval("SELECT pg_backend_pid()")))
        return None if fields is None else cls(int(fields[1]))

    def seconds(self) -> float:
        """The tree's CPU seconds. A child reaped while /proc is scanned would be in neither
        the scan nor the parent's cutime read before it, so the parent is read again after
        the scan and the scan repeated until no child was reaped meanwhile."""
        own = self._own()
        while True:
            ticks = 0
            for entry in os.scandir("/proc"):
                child = _proc_stat(int(entry.name)) if entry.name.isdigit() else None
                if child is not None and int(child[1]) == self.postmaster:
                    ticks += int(child[11]) + int(child[12])
            before, own = own, self._own()
            if own == before:
                return (sum(own) + ticks) / os.sysconf("SC_CLK_TCK")

    def _own(self) -> tuple[int, ...]:
        """The parent's utime, stime, cutime and cstime (its reaped children's), in ticks."""
        own = _proc_stat(self.postmaster)
        if own is None:
            raise RuntimeError("the postmaster is gone")
        return tuple(int(v) for v in own[11:15])


class GcClock:
    """CPU time this thread spends in the cyclic garbage collector while the block runs."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            self.seconds += time.thread_time() - self._started

    def __enter__(self) -> GcClock:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


def rotate(items: Sequence[T], turn: int) -> list[T]:
    """``items`` started at ``turn`` (mod its length): drift hits every item in turn."""
    turn %= max(1, len(items))
    return [*items[turn:], *items[:turn]]


async def timed(call: Awaitable[R]) -> tuple[float, R]:
    """Await ``call`` (a coroutine not yet started) and return (ms, result)."""
    started = time.perf_counter()
    result = await call
    return (time.perf_counter() - started) * 1000, result


def latency_stats(samples: Sequence[float]) -> dict[str, float]:
    """Median, p95, p99 and max of latency samples."""
    ordered = sorted(samples)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return {"median": statistics.median(ordered), "p95": at(0.95), "p99": at(0.99), "max": at(1)}


def stat_cells(stats: Mapping[str, float], keys: Iterable[str], spec: str) -> list[str]:
    """``stats[key]`` formatted with ``spec``, per key: latency table cells."""
    return [format(stats[key], spec) for key in keys]


@dataclass(frozen=True, slots=True)
class Stat:
    """Median and min..max of repeated samples of one metric."""

    median: float
    min: float
    max: float
    samples: tuple[float, ...] = field(repr=False)

    @classmethod
    def of(cls, samples: Iterable[float]) -> Stat:
        values = tuple(float(s) for s in samples)
        return cls(statistics.median(values), min(values), max(values), values)

    @classmethod
    def paired_ratio(cls, values: Sequence[float], baseline: Sequence[float]) -> Stat:
        """``values[i] / baseline[i]`` over rounds ``i``: drift hitting both cancels."""
        return cls.of(v / b for v, b in zip(values, baseline, strict=True))

    @classmethod
    def paired_diff(cls, values: Sequence[float], baseline: Sequence[float]) -> Stat:
        return cls.of(v - b for v, b in zip(values, baseline, strict=True))

    def fmt(self, spec: str = ",.0f", *, signed: bool = False) -> str:
        """``median (min..max)``, or the median alone for one sample."""
        full = ("+" if signed else "") + spec
        text = format(self.median, full)
        spread = f" ({format(self.min, full)}..{format(self.max, full)})"
        return text + spread if len(self.samples) > 1 else text


@dataclass(frozen=True, slots=True)
class Table:
    """A titled table of formatted cells: the first column left-aligned, the others right."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str | None = None

    def alignment(self) -> tuple[str, ...]:
        return ("l",) + ("r",) * (len(self.columns) - 1)

    def to_markdown(self) -> str:
        def line(cells: Iterable[str]) -> str:
            return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

        rule = ["---:" if a == "r" else ":---" for a in self.alignment()]
        lines = [f"### {self.title}", "", line(self.columns), line(rule)]
        lines += [line(row) for row in self.rows]
        return "\n".join([*lines, *(["", self.caption] if self.caption else [])]) + "\n"


def columns(header: str) -> tuple[str, ...]:
    """A table's column names from its Markdown header, ``"a | b | c"``."""
    return tuple(name.strip() for name in header.split("|"))


def print_table(table: Table) -> None:
    """Print ``table`` with rich, wide when not on a terminal."""
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table as RichTable

    out = RichTable(
        title=escape(table.title),
        caption=escape(table.caption) if table.caption else None,
        box=box.SIMPLE_HEAD,
    )
    for name, a in zip(table.columns, table.alignment(), strict=True):
        out.add_column(escape(name), justify="right" if a == "r" else "left", overflow="fold")
    for row in table.rows:
        out.add_row(*(escape(cell) for cell in row))
    (Console() if sys.stdout.isatty() else Console(width=200)).print(out)


def _json_default(value: object) -> object:
    if isinstance(value, Stat):
        return {"median": value.median, "min": value.min, "max": value.max, "n": len(value.samples)}
    if isinstance(value, Path | dt.datetime):
        return str(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")


def report(
    args: Any,
    name: str,
    rows: Sequence[Mapping[str, object]],
    meta: Mapping[str, object],
    *,
    title: str,
    tables: Sequence[Table] = (),
    notes: Sequence[str] = (),
    extra: Mapping[str, object] | None = None,
) -> int:
    """Print ``tables``; write ``<name>.json`` (meta, rows, extra) and ``<name>.md`` (tables,
    notes, meta) under ``args.out``, wall time from ``args.started``. Returns 0."""
    for table in tables:
        print_table(table)
    elapsed = round(time.perf_counter() - args.started, 1)
    meta = {"command": args.command, **meta, "wall_seconds": elapsed}
    args.out.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    document = {"name": name, "generated_at": now, "meta": meta, "rows": rows, **(extra or {})}
    options = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
    json_path = args.out / f"{name}.json"
    json_path.write_bytes(orjson.dumps(document, default=_json_default, option=options) + b"\n")
    meta_text = orjson.dumps(meta, default=_json_default, option=options).decode()
    md = [f"# {title}", "", f"Generated {now.isoformat()}.", ""]
    md += [t.to_markdown() for t in tables] + [n.strip() + "\n" for n in notes]
    md += ["## Machine and settings", "", "```json", meta_text, "```", ""]
    md_path = args.out / f"{name}.md"
    md_path.write_text("\n".join(md), encoding="utf-8")
    print(f"wrote {json_path} and {md_path}", file=sys.stderr, flush=True)
    return 0


def parse_args(name: str, case: ModuleType, argv: Sequence[str]) -> argparse.Namespace:
    """The options every case shares, ``--rounds`` if the case sets ``ROUNDS``, and its own
    ``OPTIONS`` (flag: ``add_argument`` keywords); described by its docstring's first line."""
    description = case.__doc__.split("\n", 1)[0] if case.__doc__ else None
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks {name}", description=description)
    parser.add_argument("--quick", action="store_true", help=case.QUICK_HELP)
    parser.add_argument("--dsn", help="benchmark this server instead of an embedded one")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory (ignored)")
    parser.add_argument("--seed", type=int, default=48, help="seed for outputs and sampling")
    if getattr(case, "ROUNDS", False):
        parser.add_argument("--rounds", type=int, help="override the number of rounds")
    for flag, keywords in getattr(case, "OPTIONS", {}).items():
        parser.add_argument(flag, **keywords)
    return parser.parse_args(argv)


def command_line(name: str, argv: Sequence[str]) -> str:
    """``python -m benchmarks <name> ...`` with any DSN (it may hold a password) hidden."""
    shown = [
        "<dsn>" if prev == "--dsn" else arg for prev, arg in zip(["", *argv], argv, strict=False)
    ]
    shown = ["--dsn=<dsn>" if arg.startswith("--dsn=") else arg for arg in shown]
    return shlex.join(["python", "-m", "benchmarks", name, *shown])


def _git(*args: str) -> str:
    root = Path(__file__).resolve().parent.parent
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
    except OSError:
        return ""
    return done.stdout.strip()


_PG_SETTINGS = ("fsync", "synchronous_commit", "full_page_writes", "wal_compression", "jit")


def _cpu_model() -> str:
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    models = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return models[0] if models else platform.processor()


async def machine_info(conn: Connection) -> dict[str, object]:
    """The host, the commit measured and the server's durability settings."""
    settings = await conn.fetch(
        "SELECT name, setting FROM pg_settings WHERE name = ANY($1::text[])", list(_PG_SETTINGS)
    )
    return {
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "load_average": os.getloadavg(),
        "python": sys.version.split()[0],
        "commit": _git("rev-parse", "--short", "HEAD") or "unknown",
        "engine_modified": bool(_git("status", "--porcelain", "--", "storage", "migrations")),
        "postgres": await conn.fetchval("SHOW server_version"),
        **{str(r["name"]): str(r["setting"]) for r in settings},
    }
