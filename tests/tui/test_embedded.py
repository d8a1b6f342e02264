"""The embedded PostgreSQL's lifecycle, and the signal handling the demo runs under."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import cast

import pytest

from awa_tui.app import AwaApp
from awa_tui.demo import run_app
from awa_tui.embedded import (
    TERMINAL_SIGNALS,
    EmbeddedPostgres,
    exit_on_signals,
    process_alive,
    signal_exit_code,
    signals_held,
)
from storage.db.pool import connect_once

ROOT = Path(__file__).resolve().parents[2]


async def test_stop_ends_the_server_and_removes_its_directory() -> None:
    server = EmbeddedPostgres(prefix="awa-embedded-test-")
    await asyncio.to_thread(server.start)
    root, pid = server.root, server.pid
    assert root is not None
    assert pid is not None
    async with connect_once(server.dsn) as conn:
        assert await conn.fetchval("SELECT 1") == 1
    await asyncio.to_thread(server.stop)
    assert not process_alive(pid)
    assert not root.exists()
    server.stop()  # twice is fine


async def test_stop_ends_a_server_whose_start_was_interrupted() -> None:
    """A signal can land after pg_ctl started the postmaster, before pgserver returned."""
    server = EmbeddedPostgres(prefix="awa-embedded-test-")
    await asyncio.to_thread(server.start)
    root, pid = server.root, server.pid
    assert root is not None
    assert pid is not None
    server._server = None  # as if get_server never returned
    await asyncio.to_thread(server.stop)
    assert not process_alive(pid)
    assert not root.exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_exits_through_finally_blocks_once(signum: signal.Signals) -> None:
    before = signal.getsignal(signum)
    cleaned: list[bool] = []

    def work() -> None:
        with exit_on_signals():
            try:
                os.kill(os.getpid(), signum)
                signal.pthread_sigmask(signal.SIG_BLOCK, [])  # a point where handlers have run
            finally:
                os.kill(os.getpid(), signum)  # a second one (a hang-up can repeat) is ignored
                cleaned.append(True)

    with pytest.raises(SystemExit) as exited:
        work()
    assert exited.value.code == signal_exit_code(signum)
    assert cleaned == [True]
    assert signal.getsignal(signum) == before


class _Finalized:
    """An object whose finalizer is where the signal's handler raises (as an asyncio transport
    collected after its loop closed was, in the demo's start)."""

    def __del__(self) -> None:
        os.kill(os.getpid(), self.signum)
        signal.pthread_sigmask(signal.SIG_BLOCK, [])  # a point where handlers have run

    def __init__(self, signum: int) -> None:
        self.signum = signum


@pytest.mark.parametrize(
    ("signum", "raised"),
    [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, SystemExit)],
    ids=["SIGINT", "SIGTERM"],
)
def test_a_signal_whose_raise_a_finalizer_swallowed_is_raised_at_the_step_end(
    signum: int, raised: type[BaseException], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Raised inside ``__del__``, the handler's exception is only printed ("Exception ignored
    in ..."): the demo went on starting after a Ctrl-C, and ran until a SIGTERM 60 s later."""
    swallowed: list[type[BaseException] | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: swallowed.append(u.exc_type))
    steps: list[str] = []

    def start() -> None:
        with exit_on_signals() as seen:
            _Finalized(signum)  # collected at once: its finalizer runs the handler
            steps.append("went on")
            seen.raise_if_seen()
            steps.append("the next step")

    with pytest.raises(raised):
        start()
    assert swallowed == [raised]
    assert steps == ["went on"]


def test_a_ctrl_c_during_the_cleanup_neither_cuts_it_short_nor_comes_after_it() -> None:
    """Inside ``stop``'s cleanup a KeyboardInterrupt would leave the server or half its
    directory behind (seen: a demo directory left after a Ctrl-C during start-up), and one
    held back until after it ends the process by the signal. Inside ``signals_held`` the
    Ctrl-C is dropped: nothing is raised in the block or after it."""
    steps: list[str] = []
    # Python's own Ctrl-C, as a terminal starts it (a shell without job control starts a
    # background job with SIGINT ignored, and that would make the Ctrl-C below change nothing).
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with signals_held():
            os.kill(os.getpid(), signal.SIGINT)  # delivered to this (the main) thread at once
            for step in ("stop", "remove"):  # bytecode between which the KeyboardInterrupt fell
                steps.append(step)
        steps.append("after")
        assert steps == ["stop", "remove", "after"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, inherited)


def test_a_hang_ups_sigcont_during_the_cleanup_changes_nothing() -> None:
    """A closed terminal sends SIGCONT with SIGHUP. Textual's driver leaves its resume handler
    installed, and once the app's loop is gone it raises: inside the cleanup that left half a
    demo directory behind (quit, then close the tmux window). Inside ``signals_held`` it is
    dropped, and the handler is back afterwards."""

    def stale_resume(signum: int, frame: FrameType | None) -> None:
        raise RuntimeError("no running event loop")

    steps: list[str] = []
    before = signal.signal(signal.SIGCONT, stale_resume)
    try:
        with signals_held():
            os.kill(os.getpid(), signal.SIGCONT)
            for step in ("stop", "remove"):
                steps.append(step)
        steps.append("after")
        assert steps == ["stop", "remove", "after"]
        assert signal.getsignal(signal.SIGCONT) is stale_resume
    finally:
        signal.signal(signal.SIGCONT, before)


async def test_the_demo_takes_back_the_suspend_and_resume_handlers_of_its_app() -> None:
    """``run_app`` restores SIGCONT and SIGTSTP as they were before the app, which Textual's
    driver does not: nothing of the app is left to run when the process stops its server."""

    class DriverLikeApp:
        async def run_async(self) -> None:  # what Textual's LinuxDriver does on start
            signal.signal(signal.SIGCONT, lambda signum, frame: None)
            signal.signal(signal.SIGTSTP, lambda signum, frame: None)

    before = {sig: signal.getsignal(sig) for sig in TERMINAL_SIGNALS}
    server = EmbeddedPostgres(prefix="awa-embedded-test-")  # never started: nothing to stop
    try:
        await run_app(cast(AwaApp, DriverLikeApp()), lambda signum: None, server)
        assert {sig: signal.getsignal(sig) for sig in TERMINAL_SIGNALS} == before
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


CHILD = """
from awa_tui.embedded import EmbeddedPostgres, exit_on_signals
with exit_on_signals(), EmbeddedPostgres(prefix="awa-embedded-test-") as server:
    pass
"""


def test_a_signal_inside_pgservers_start_leaves_nothing_behind(tmp_path: Path) -> None:
    """SIGTERM while pgserver's constructor runs initdb: it registered its exit hook already
    and never returned the server, so nothing could unregister the hook, and at exit it took
    pgserver's lock, which made ``awa-*/run/python_PostgresServer/.lockfile`` again inside
    the removed directory (found left in /tmp). The hook does nothing now."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env.pop("XDG_RUNTIME_DIR", None)  # the runtime directory is then inside the removed one
    child = subprocess.Popen([sys.executable, "-c", CHILD], env=env, stderr=subprocess.PIPE)
    try:
        while not any(tmp_path.glob("awa-embedded-test-*/pg")):  # the constructor is next
            assert child.poll() is None, "the child ended before its server started"
            time.sleep(0.005)  # polling a directory the child makes: nothing to wait on
        child.send_signal(signal.SIGTERM)
        _, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == signal_exit_code(signal.SIGTERM), stderr.decode()
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == []
