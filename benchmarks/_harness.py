"""Shared plumbing for the benchmark scripts in this package.

Everything here is independent of any one benchmark:

* :func:`embedded_or_dsn` gives a DSN: the caller's, or one for a throw-away embedded
  PostgreSQL (pgserver) that is stopped and deleted afterwards.
* :func:`wal_lsn`, :func:`wal_bytes_since`, :func:`checkpoint`, :func:`relations_size`
  and :func:`table_sizes` measure what a workload wrote. WAL deltas are only meaningful
  while the benchmark is the only writer on the server.
* :func:`percentile` and :func:`latency_stats` summarise latency samples.
* :func:`base_parser` and :func:`command_line` give every script the same ``--quick``,
  ``--dsn`` and ``--out`` options and a printable (DSN-free) invocation.
* :class:`Stat` summarises repeated samples as median and min-max, including paired
  ratios/differences against a baseline measured in the same rounds.
* :class:`Table`, :func:`print_table` and :func:`write_results` render results to the
  terminal (``rich`` when importable, plain text otherwise), JSON and Markdown.
* :func:`machine_info` records the host and the server settings that matter for write
  benchmarks (cores, PostgreSQL version, fsync, WAL settings).

SQL identifiers that have to be interpolated (schema and table names) go through
:func:`ident`, which accepts only plain lower-case identifiers; values are always bound
as parameters.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import datetime as dt
import gc
import importlib
import os
import platform
import re
import shlex
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeAlias

import asyncpg
import orjson

Connection: TypeAlias = "asyncpg.Connection[asyncpg.Record]"
"""The connection type the helpers accept."""

__all__ = [
    "Connection",
    "GcClock",
    "ResultFiles",
    "ServerCpu",
    "Stat",
    "Table",
    "base_parser",
    "checkpoint",
    "command_line",
    "embedded_or_dsn",
    "ident",
    "latency_stats",
    "machine_info",
    "percentile",
    "print_table",
    "qualified",
    "relations_size",
    "schema_tables",
    "table_sizes",
    "wal_bytes_since",
    "wal_lsn",
    "write_results",
]

# --------------------------------------------------------------------------------------
# Identifiers
# --------------------------------------------------------------------------------------

_IDENT_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def ident(name: str) -> str:
    """Return ``name`` double-quoted for use as an SQL identifier.

    Only plain lower-case identifiers (``[a-z_][a-z0-9_]*``, at most 63 bytes) are
    accepted, so the result is safe to interpolate into SQL text.

    Raises:
        ValueError: if ``name`` is not such an identifier.
    """
    if not _IDENT_RE.fullmatch(name):
        raise ValueError(f"not a plain SQL identifier: {name!r}")
    return f'"{name}"'


def qualified(schema: str, name: str) -> str:
    """Return ``"schema"."name"``, validating both parts with :func:`ident`."""
    return f"{ident(schema)}.{ident(name)}"


# --------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------


def _start_embedded(pgdata: Path) -> Any:
    with warnings.catch_warnings():
        # platformdirs warns about a missing XDG_RUNTIME_DIR when pgserver is imported.
        warnings.simplefilter("ignore")
        from pgserver.postgres_server import get_server

        return get_server(pgdata, cleanup_mode="stop")


def _stop_embedded(server: Any, tmp: Path) -> None:
    try:
        server.cleanup()
    finally:
        # The server registered the same cleanup with atexit; it has run now.
        atexit.unregister(server._cleanup)
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.asynccontextmanager
async def embedded_or_dsn(
    dsn: str | None = None,
    *,
    log: Callable[[str], None] | None = None,
) -> AsyncIterator[str]:
    """Yield a DSN to benchmark against.

    With ``dsn`` given it is yielded unchanged and nothing is started or stopped. With
    ``dsn=None`` an embedded PostgreSQL (pgserver) is initialised in a new temporary
    directory, its unix-socket DSN is yielded, and on exit the server is stopped and the
    directory deleted, also when the body raises.

    Args:
        dsn: an existing server's DSN, or ``None`` for an embedded one.
        log: optional callback for progress messages (start/stop).
    """
    if dsn is not None:
        yield dsn
        return
    tmp = Path(tempfile.mkdtemp(prefix="awa-bench-"))
    if log is not None:
        log(f"starting embedded PostgreSQL in {tmp}")
    try:
        server = await asyncio.to_thread(_start_embedded, tmp / "pgdata")
    except BaseException:
        await asyncio.to_thread(shutil.rmtree, tmp, True)
        raise
    try:
        yield str(server.get_uri())
    finally:
        if log is not None:
            log("stopping embedded PostgreSQL")
        await asyncio.to_thread(_stop_embedded, server, tmp)


# --------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------


async def wal_lsn(conn: Connection) -> str:
    """Return the current WAL insert position (``pg_current_wal_insert_lsn()``) as text."""
    lsn = await conn.fetchval("SELECT pg_current_wal_insert_lsn()::text")
    return str(lsn)


async def wal_bytes_since(conn: Connection, start_lsn: str) -> int:
    """Return the WAL bytes inserted since ``start_lsn`` (from :func:`wal_lsn`).

    This counts every writer on the server, so it measures one workload only while that
    workload is the only writer.
    """
    diff = await conn.fetchval(
        "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::text::pg_lsn)::bigint",
        start_lsn,
    )
    return int(diff)


async def checkpoint(conn: Connection) -> bool:
    """Run ``CHECKPOINT``; return ``False`` instead of failing when not permitted.

    Running one before each measured run puts every run in the same position relative to
    checkpoints (full-page images, background flushing).
    """
    try:
        await conn.execute("CHECKPOINT")
    except asyncpg.InsufficientPrivilegeError:
        return False
    return True


# pg_partition_tree lists a partitioned table with its partitions (the parent's own size is
# zero) and nothing for a plain table, whose own size is then the answer.
_TREE_SIZE = (
    "SELECT t.name, (pg_total_relation_size(c.oid) + coalesce("
    "(SELECT sum(pg_total_relation_size(p.relid)) FROM pg_partition_tree(c.oid) AS p"
    " WHERE p.relid <> c.oid), 0))::bigint AS size"
    " FROM unnest($2::text[]) AS t(name),"
    " LATERAL (SELECT format('%I.%I', $1::text, t.name)::regclass::oid AS oid) AS c"
)


async def relations_size(conn: Connection, schema: str, tables: Iterable[str]) -> int:
    """Return the summed ``pg_total_relation_size`` (heap, TOAST, indexes, forks) of tables.

    A partitioned table counts with all of its partitions (its own size is always zero).
    """
    return sum((await table_sizes(conn, schema, tables)).values())


async def table_sizes(conn: Connection, schema: str, tables: Iterable[str]) -> dict[str, int]:
    """Return ``pg_total_relation_size`` per table, partitions summed into their parent."""
    ident(schema)
    names = list(tables)
    for name in names:
        ident(name)
    rows = await conn.fetch(_TREE_SIZE, schema, names)
    found = {str(r["name"]): int(r["size"]) for r in rows}
    return {name: found.get(name, 0) for name in names}


async def schema_tables(conn: Connection, schema: str) -> list[str]:
    """Return the top-level tables of ``schema``: plain and partitioned, not partitions."""
    ident(schema)
    rows = await conn.fetch(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
        " ORDER BY c.relname",
        schema,
    )
    return [str(r["relname"]) for r in rows]


@dataclass(frozen=True, slots=True)
class ServerCpu:
    """CPU time used by a PostgreSQL server on this host, read from ``/proc``.

    Wall-clock ratios on a 2-core host swing with whatever else runs; CPU seconds per job do
    not, and the server's share is half the cost of a job. The total is the postmaster's own
    time, the time of its children that have exited (``cutime``/``cstime``) and that of its
    live children (backends, the WAL writer, checkpointer, autovacuum workers).
    """

    postmaster: int

    @classmethod
    async def find(cls, conn: Connection) -> ServerCpu | None:
        """The server behind ``conn`` when its processes are visible here; None otherwise."""
        backend = int(await conn.fetchval("SELECT pg_backend_pid()"))
        fields = _proc_stat(backend)
        return None if fields is None else cls(int(fields[1]))

    def seconds(self) -> float | None:
        """CPU seconds so far; None once the postmaster is gone."""
        own = _proc_stat(self.postmaster)
        if own is None:
            return None
        ticks = sum(int(v) for v in own[11:15])  # utime, stime, cutime, cstime
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            child = _proc_stat(int(entry.name))
            if child is not None and int(child[1]) == self.postmaster:
                ticks += int(child[11]) + int(child[12])
        return ticks / os.sysconf("SC_CLK_TCK")


class GcClock:
    """CPU time this process spends in the cyclic garbage collector, per generation.

    A runtime with hundreds of attempts in flight keeps each attempt's objects alive across
    a completion flush, so they survive into the older generations whose collections walk
    every tracked object; this measures that share of the client's CPU. Use as a context
    manager around the measured window (it hooks ``gc.callbacks``).
    """

    def __init__(self) -> None:
        self.collections = [0, 0, 0]
        self.seconds = 0.0
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            self.collections[info["generation"]] += 1
            self.seconds += time.thread_time() - self._started

    def __enter__(self) -> GcClock:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (state is [0], ppid [1])."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) of ``values`` by linear interpolation between order stats."""
    if not values:
        raise ValueError("percentile needs at least one value")
    if not 0.0 <= q <= 1.0:
        raise ValueError("q must be within 0..1")
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def latency_stats(samples: Sequence[float]) -> dict[str, float]:
    """Median, p95, p99, min and max of latency samples, in the samples' unit."""
    return {
        "median": statistics.median(samples),
        "p95": percentile(samples, 0.95),
        "p99": percentile(samples, 0.99),
        "min": min(samples),
        "max": max(samples),
        "n": float(len(samples)),
    }


# --------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stat:
    """Median and min-max of repeated samples of one metric.

    Build it with :meth:`of`, or with :meth:`paired_ratio` / :meth:`paired_diff` to compare
    two metrics sampled in the same rounds (pairing cancels drift that affects both).
    """

    median: float
    min: float
    max: float
    samples: tuple[float, ...] = field(repr=False)

    @classmethod
    def of(cls, samples: Iterable[float]) -> Stat:
        """Summarise ``samples`` (at least one)."""
        values = tuple(float(s) for s in samples)
        if not values:
            raise ValueError("Stat.of needs at least one sample")
        return cls(statistics.median(values), min(values), max(values), values)

    @classmethod
    def paired_ratio(cls, numerators: Sequence[float], denominators: Sequence[float]) -> Stat:
        """Summarise ``numerators[i] / denominators[i]`` over rounds ``i``."""
        if len(numerators) != len(denominators):
            raise ValueError("paired samples differ in length")
        return cls.of(n / d for n, d in zip(numerators, denominators, strict=True))

    @classmethod
    def paired_diff(cls, values: Sequence[float], baseline: Sequence[float]) -> Stat:
        """Summarise ``values[i] - baseline[i]`` over rounds ``i``."""
        if len(values) != len(baseline):
            raise ValueError("paired samples differ in length")
        return cls.of(v - b for v, b in zip(values, baseline, strict=True))

    @property
    def n(self) -> int:
        """Number of samples."""
        return len(self.samples)

    @property
    def spread(self) -> float:
        """``max - min``."""
        return self.max - self.min

    @property
    def relative_spread(self) -> float:
        """``(max - min) / |median|`` (``inf`` for a zero median with a spread)."""
        if self.median == 0:
            return 0.0 if self.spread == 0 else float("inf")
        return self.spread / abs(self.median)

    def fmt(self, spec: str = ",.0f", *, spread: bool = True, signed: bool = False) -> str:
        """Format as ``median (min..max)`` using the format ``spec`` for each number.

        Args:
            spec: a format spec such as ``",.0f"`` or ``".2f"``.
            spread: include the ``(min..max)`` part.
            signed: prefix a ``+`` on non-negative numbers.
        """
        full = ("+" if signed else "") + spec
        text = format(self.median, full)
        if spread and self.n > 1:
            text += f" ({format(self.min, full)}..{format(self.max, full)})"
        return text

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form: median, min, max, n and the samples."""
        return {
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "n": self.n,
            "samples": list(self.samples),
        }


# --------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Table:
    """A titled table of pre-formatted cells, rendered to terminal or Markdown.

    ``align`` holds one of ``"l"``/``"r"`` per column; by default the first column is
    left-aligned and the rest right-aligned.
    """

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str | None = None
    align: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"row has {len(row)} cells, table has {len(self.columns)}")
        if self.align is not None and len(self.align) != len(self.columns):
            raise ValueError("align needs one entry per column")

    def _align(self) -> tuple[str, ...]:
        if self.align is not None:
            return self.align
        return ("l",) + ("r",) * (len(self.columns) - 1)

    def to_markdown(self) -> str:
        """Render as a Markdown section: ``### title``, the table, then the caption."""

        def cell(text: str) -> str:
            return text.replace("|", "\\|").replace("\n", " ")

        rule = ["---:" if a == "r" else ":---" for a in self._align()]
        lines = [f"### {self.title}", ""]
        lines.append("| " + " | ".join(cell(c) for c in self.columns) + " |")
        lines.append("| " + " | ".join(rule) + " |")
        lines.extend("| " + " | ".join(cell(c) for c in row) + " |" for row in self.rows)
        if self.caption:
            lines += ["", self.caption]
        return "\n".join(lines) + "\n"

    def to_text(self) -> str:
        """Render as fixed-width plain text."""
        widths = [
            max([len(c)] + [len(r[i]) for r in self.rows]) for i, c in enumerate(self.columns)
        ]

        def line(cells: Sequence[str]) -> str:
            parts = [
                c.ljust(w) if a == "l" else c.rjust(w)
                for c, w, a in zip(cells, widths, self._align(), strict=True)
            ]
            return "  ".join(parts).rstrip()

        out = [self.title, line(self.columns), "  ".join("-" * w for w in widths)]
        out.extend(line(r) for r in self.rows)
        if self.caption:
            out.append(self.caption)
        return "\n".join(out) + "\n"


def print_table(table: Table) -> None:
    """Print ``table`` with ``rich`` when it is importable, else as plain text."""
    try:
        from rich import box
        from rich.console import Console
        from rich.table import Table as RichTable
    except ImportError:  # pragma: no cover - rich is a project dependency
        print(table.to_text())
        return
    from rich.markup import escape

    # Cells are plain text: "outputs[k]" must not be read as rich markup.
    rich_table = RichTable(
        title=escape(table.title),
        caption=escape(table.caption) if table.caption else None,
        box=box.SIMPLE_HEAD,
    )
    for name, a in zip(table.columns, table._align(), strict=True):
        rich_table.add_column(
            escape(name), justify="right" if a == "r" else "left", overflow="fold"
        )
    rich_table.columns[0].no_wrap = True
    for row in table.rows:
        rich_table.add_row(*(escape(cell) for cell in row))
    # Not on a terminal (piped, CI logs): allow wide tables instead of rich's 80 columns.
    console = Console() if sys.stdout.isatty() else Console(width=200)
    console.print(rich_table)


class ResultFiles(NamedTuple):
    """Paths written by :func:`write_results`."""

    json: Path
    markdown: Path


def _json_default(value: object) -> object:
    if isinstance(value, Stat):
        return value.as_dict()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def _meta_markdown(meta: Mapping[str, object], depth: int = 0) -> list[str]:
    lines: list[str] = []
    pad = "  " * depth
    for key, value in meta.items():
        if isinstance(value, Mapping):
            lines.append(f"{pad}- {key}:")
            lines.extend(_meta_markdown(value, depth + 1))
        elif isinstance(value, Stat):
            lines.append(f"{pad}- {key}: {value.fmt('.4g')}")
        elif isinstance(value, list | tuple):
            lines.append(f"{pad}- {key}: {', '.join(str(v) for v in value) or '(none)'}")
        else:
            lines.append(f"{pad}- {key}: {value}")
    return lines


def write_results(
    out_dir: str | Path,
    name: str,
    rows: Sequence[Mapping[str, object]],
    meta: Mapping[str, object],
    *,
    title: str | None = None,
    tables: Sequence[Table] = (),
    notes: Sequence[str] = (),
    extra: Mapping[str, object] | None = None,
) -> ResultFiles:
    """Write ``<name>.json`` and ``<name>.md`` into ``out_dir`` (created if missing).

    The JSON holds ``{"name", "generated_at", "meta", "rows"}`` plus the ``extra``
    sections; :class:`Stat`, paths and datetimes anywhere inside are serialised. The
    Markdown holds the title, the ``tables``, the ``notes`` (paragraphs, Markdown
    allowed) and ``meta`` as a nested bullet list under "Machine and settings".

    Args:
        out_dir: directory to write into.
        name: file stem, e.g. ``"completion_statements"``.
        rows: one mapping per measured case (machine-readable results).
        meta: run context: machine info, configuration, reference numbers.
        title: Markdown heading; defaults to ``name``.
        tables: human-readable tables for the Markdown.
        notes: paragraphs appended after the tables.
        extra: further top-level JSON sections (derived comparisons, raw data); not
            rendered into the Markdown, which shows ``tables`` instead.
    """
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"bad result name: {name!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    generated_at = dt.datetime.now(dt.UTC).replace(microsecond=0)
    reserved = {"name", "generated_at", "meta", "rows"}
    if extra and reserved & set(extra):
        raise ValueError(f"extra may not redefine {sorted(reserved & set(extra))}")
    document: dict[str, object] = {
        "name": name,
        "generated_at": generated_at,
        "meta": dict(meta),
        "rows": [dict(r) for r in rows],
        **(extra or {}),
    }
    json_path = out / f"{name}.json"
    json_path.write_bytes(
        orjson.dumps(
            document,
            default=_json_default,
            option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS,
        )
        + b"\n"
    )
    md: list[str] = [f"# {title or name}", "", f"Generated {generated_at.isoformat()}.", ""]
    for table in tables:
        md += [table.to_markdown()]
    for note in notes:
        md += [note.strip(), ""]
    md += ["## Machine and settings", "", *_meta_markdown(meta), ""]
    md_path = out / f"{name}.md"
    md_path.write_text("\n".join(md), encoding="utf-8")
    return ResultFiles(json_path, md_path)


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------


def base_parser(name: str, description: str | None, *, quick_help: str) -> argparse.ArgumentParser:
    """An argument parser with the options every benchmark script shares.

    ``--quick`` (help text ``quick_help``), ``--dsn`` (benchmark that server instead of an
    embedded one) and ``--out`` (results directory, default ``benchmarks/results``).
    """
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{name}", description=description)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--dsn", help="benchmark this server instead of an embedded one")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("benchmarks/results"),
        help=f"directory for {name}.json and {name}.md, created if missing (default: %(default)s)",
    )
    return parser


def command_line(name: str, argv: Sequence[str]) -> str:
    """``python -m benchmarks.<name> ...`` with any ``--dsn`` value (may hold a password) hidden."""
    shown: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            shown.append("<dsn>")
            hide_next = False
        elif arg == "--dsn":
            shown.append(arg)
            hide_next = True
        elif arg.startswith("--dsn="):
            shown.append("--dsn=<dsn>")
        else:
            shown.append(arg)
    return shlex.join(["python", "-m", f"benchmarks.{name}", *shown])


# --------------------------------------------------------------------------------------
# Machine info
# --------------------------------------------------------------------------------------

_PG_SETTINGS = (
    "fsync",
    "synchronous_commit",
    "wal_sync_method",
    "wal_level",
    "full_page_writes",
    "wal_compression",
    "default_toast_compression",
    "shared_buffers",
    "work_mem",
    "max_wal_size",
    "checkpoint_timeout",
    "jit",
)


def _cpu_model() -> str | None:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or None
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or None


def _host_info() -> dict[str, object]:
    info: dict[str, object] = {
        "logical_cores": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "asyncpg": asyncpg.__version__,
    }
    with contextlib.suppress(OSError, AttributeError):
        # Other work on the host skews timings; record how busy it was when measured.
        info["load_average_1_5_15m"] = [round(v, 2) for v in os.getloadavg()]
    try:
        psutil = importlib.import_module("psutil")  # untyped; ships with pgserver
        info["physical_cores"] = psutil.cpu_count(logical=False)
        info["memory_gib"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:  # pragma: no cover - psutil comes with pgserver
        pass
    return info


def _source_info() -> dict[str, object]:
    """The git commit measured, and whether the engine's files differ from it."""
    import subprocess

    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True
        )
        return done.stdout.strip()

    try:
        return {
            "commit": git("rev-parse", "--short", "HEAD"),
            "engine_modified_since_commit": bool(
                git("status", "--porcelain", "--", "storage", "migrations")
            ),
        }
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown (not a git checkout)"}


async def machine_info(conn: Connection | None = None) -> dict[str, object]:
    """Describe the host and, given a connection, the server.

    Returns a JSON-ready mapping with ``host`` (cores, CPU model, platform, Python and
    asyncpg versions, memory, load average), ``source`` (git commit measured) and, with
    ``conn``, ``postgres`` (``server_version``,
    ``version()`` and the durability/WAL settings such as ``fsync``,
    ``synchronous_commit``, ``wal_level``, ``full_page_writes``).
    """
    info: dict[str, object] = {"host": _host_info(), "source": _source_info()}
    if conn is not None:
        rows = await conn.fetch(
            "SELECT name, current_setting(name) AS value FROM pg_settings"
            " WHERE name = ANY($1::text[])",
            list(_PG_SETTINGS),
        )
        found = {str(r["name"]): str(r["value"]) for r in rows}
        settings = {key: found[key] for key in _PG_SETTINGS if key in found}
        pg: dict[str, object] = {
            "server_version": await conn.fetchval("SHOW server_version"),
            "version": await conn.fetchval("SELECT version()"),
            **settings,
        }
        info["postgres"] = pg
    return info
