"""``awa-tui worker --processes 2``: one parent, two worker processes.

Both children share the jobs and each job runs once; SIGTERM to the parent drains both and
exits 0 with no process left and nothing written to the temporary directory. A child killed
with SIGKILL stops the other gracefully and the parent exits 7 (its jobs run again after the
restart a supervisor makes); a killed parent's children drain and exit by themselves.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from awa_tui.errors import EXIT_OK, EXIT_WORKER_DIED
from storage import Client
from storage.db.pool import connect_once
from tests.faults.test_many_workers import LEADER, ROOT, TARGET, _runs_table, _until
from tests.workers_tasks import Count, Dawdle, tasks


@dataclass
class Parent:
    process: asyncio.subprocess.Process
    stderr: list[str]
    drained: asyncio.Task[None]
    children: list[int]

    @property
    def text(self) -> str:
        return "".join(self.stderr)


async def _read(process: asyncio.subprocess.Process, lines: list[str]) -> None:
    assert process.stderr is not None
    async for line in process.stderr:
        lines.append(line.decode())


def _children_of(pid: int) -> list[int]:
    """Live processes whose parent is ``pid``, from /proc."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and _stat(int(entry.name))[1:2] == [str(pid)]:
            found.append(int(entry.name))
    return sorted(found)


def _stat(pid: int) -> list[str]:
    """``/proc/<pid>/stat`` after the command name: state, ppid, ...; [] once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return text[text.rindex(")") + 2 :].split()


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped by whoever adopted it."""
    return _stat(pid)[:1] not in ([], ["Z"])


@asynccontextmanager
async def _pool(dsn: str, schema: str, tmp: Path, *options: str) -> AsyncIterator[Parent]:
    """``awa-tui worker --processes 2`` past both children's start lines; killed, with its
    children, on any way out the test did not take itself."""
    env = {
        **os.environ,
        "AWA_DSN": dsn,
        "AWA_TEST_RUNS_SCHEMA": schema,
        "PYTHONPATH": str(ROOT),
        "TMPDIR": str(tmp),
    }
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "awa_tui", "worker", TARGET, "--schema", schema),
        *("--processes", "2", "--max-connections", "4", *options),
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    lines: list[str] = []
    parent = Parent(process, lines, asyncio.ensure_future(_read(process, lines)), [])
    try:

        async def both_started() -> bool:
            assert process.returncode is None, parent.text
            return parent.text.count(f"started {TARGET}") == 2

        await _until(both_started, 60)
        parent.children = _children_of(process.pid)
        assert len(parent.children) == 2, parent.children
        yield parent
    finally:
        for pid in [process.pid, *parent.children]:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
        await process.wait()
        await parent.drained


async def _exit_code(parent: Parent, sig: signal.Signals | None = None) -> int:
    if sig is not None:
        parent.process.send_signal(sig)
    code = await asyncio.wait_for(parent.process.wait(), 60)
    await parent.drained
    return code


def _left_running(parent: Parent, schema: str) -> list[int]:
    """The parent, its children, and any process started with this test's schema."""
    tagged = []
    for entry in os.scandir("/proc"):
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if schema.encode() in cmdline and entry.name.isdigit() and _running(int(entry.name)):
            tagged.append(int(entry.name))
    return [p for p in {parent.process.pid, *parent.children, *tagged} if _running(p)]


async def _completed(conn: asyncpg.Connection) -> int:
    done: int = await conn.fetchval("SELECT count(*) FROM terminal_jobs WHERE state = 'completed'")
    return done


async def test_two_processes_run_each_job_once_and_exit_0_on_sigterm_leaving_nothing(
    migrated_dsn: str, schema: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    await _runs_table(conn)
    async with (
        connect_once(migrated_dsn) as watcher,
        _pool(migrated_dsn, schema, tmp_path, "--concurrency", "32") as parent,
        await Client.connect(migrated_dsn, schema, tasks=tasks, max_connections=2) as client,
    ):
        for start in range(0, 4000, 1000):
            await client.insert_many([Count(n=n) for n in range(start, start + 1000)])

        async def all_completed_one_leader() -> bool:
            assert len(await watcher.fetch(LEADER, schema)) <= 1  # one maintenance leader
            return await _completed(conn) == 4000

        await _until(all_completed_one_leader, 50)
        code = await _exit_code(parent, signal.SIGTERM)
    assert code == EXIT_OK, parent.text
    assert parent.text.count("stopped on SIGTERM") == 2  # each child drained
    assert "stopped 2 worker processes on SIGTERM, exit 0" in parent.text
    assert "Traceback" not in parent.text
    runs = await conn.fetchrow(
        "SELECT count(*) AS runs, count(DISTINCT job_id) AS jobs, max(run_lease) AS lease,"
        "       array_agg(DISTINCT pid ORDER BY pid) AS pids FROM runs"
    )
    assert runs is not None
    assert (runs["runs"], runs["jobs"], runs["lease"]) == (4000, 4000, 1)
    assert runs["pids"] == parent.children  # both children took a share, nobody else ran one
    assert _left_running(parent, schema) == []
    assert os.listdir(tmp_path) == []


async def test_a_killed_child_stops_the_other_and_exits_7_then_a_restart_reruns_its_jobs(
    migrated_dsn: str, schema: str, conn: asyncpg.Connection, tmp_path: Path
) -> None:
    await _runs_table(conn)
    options = ("--concurrency", "8", "--rescue-after", "2", "--grace", "5")
    async with await Client.connect(migrated_dsn, schema, tasks=tasks, max_connections=2) as c:
        async with _pool(migrated_dsn, schema, tmp_path, *options) as parent:
            await c.insert_many([Dawdle(n=n, seconds=0.3) for n in range(120)])
            victim, survivor = parent.children

            async def both_running_jobs() -> bool:
                pids = await conn.fetch("SELECT DISTINCT pid FROM runs")
                return {r["pid"] for r in pids} == {victim, survivor}

            await _until(both_running_jobs, 30)
            os.kill(victim, signal.SIGKILL)
            code = await _exit_code(parent)
        orphaned = await conn.fetchval(
            "SELECT array_agg(job_id) FROM runs r WHERE pid = $1 AND NOT EXISTS (SELECT 1"
            " FROM terminal_jobs t WHERE t.job_id = r.job_id AND t.state = 'completed')",
            victim,
        )
        assert code == EXIT_WORKER_DIED, parent.text
        assert f"(pid {victim}) was killed by SIGKILL" in parent.text
        assert "stopped on SIGTERM" in parent.text  # the survivor drained
        assert "exit 7" in parent.text
        assert "Traceback" not in parent.text
        assert _left_running(parent, schema) == []
        assert os.listdir(tmp_path) == []
        async with _pool(migrated_dsn, schema, tmp_path, *options) as restarted:

            async def all_completed() -> bool:
                return await _completed(conn) == 120

            await _until(all_completed, 60)  # the killed child's jobs rescued and run again
            assert await _exit_code(restarted, signal.SIGTERM) == EXIT_OK, restarted.text
    assert orphaned, "the killed child held no running job"
    leases = await conn.fetchval(
        "SELECT array_agg(DISTINCT lease) FROM (SELECT max(run_lease) AS lease FROM runs"
        " WHERE job_id = ANY($1::bigint[]) GROUP BY job_id) l",
        orphaned,
    )
    assert min(leases) >= 2  # each ran again, as another attempt


async def test_a_killed_parent_leaves_no_child_running(
    migrated_dsn: str, schema: str, tmp_path: Path
) -> None:
    async with _pool(migrated_dsn, schema, tmp_path) as parent:
        parent.process.kill()  # not waited for here: wait() also waits for the children's pipe

        async def children_gone() -> bool:
            return not any(_running(pid) for pid in parent.children)

        await _until(children_gone, 30)  # each noticed within a second and drained
    await parent.drained
    assert parent.text.count("stopped on the exit of its parent process") == 2, parent.text
