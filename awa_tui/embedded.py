"""An embedded PostgreSQL (pgserver) that leaves nothing behind, and signals that end it cleanly.

pgserver 0.1.4 shares one server between every process that names the same data directory
(a pid list kept in the directory) and stops it from an ``atexit`` hook, so a process that dies
from a signal leaves its server running, and the hook recreates its lock file in
``XDG_RUNTIME_DIR`` after we removed it. Here one process owns a private temporary directory:
the data directory (and, when the session has none, the runtime directory) live inside it, the
postmaster is stopped by its pid from ``postmaster.pid`` (so a server whose start was interrupted
is stopped too), pgserver's own hook does nothing (``owned_server_class``), and the whole
directory is removed.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, NoReturn

SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""Signals that end the process cleanly: exit code 128 + the signal's number."""
TERMINAL_SIGNALS = (signal.SIGCONT, signal.SIGTSTP)
"""Suspend and resume, whose handlers Textual's driver installs and never takes back. A
hang-up sends SIGCONT with SIGHUP: once the app's loop was gone, the handler raised ("no
running event loop") inside the cleanup and left half a demo directory behind; a Ctrl-Z
would stop the process in the middle of it."""
HELD = (*SIGNALS, signal.SIGINT, *TERMINAL_SIGNALS)
"""What changes nothing while the process leaves (``signals_held``, ``exit_now``)."""
STOP_TIMEOUT = 10.0  # seconds for the shutdown before the postmaster is killed


def signal_exit_code(signum: int) -> int:
    return 128 + signum


@cache
def owned_server_class() -> type[Any]:
    """pgserver's server class, with an exit hook that does nothing.

    Its constructor registers ``_cleanup`` with ``atexit`` before it starts anything; a start
    that fails or is interrupted after that (a signal, initdb failing) never hands us the
    object to unregister, and at the interpreter's exit the hook took pgserver's lock, which
    created the runtime directory and its lock file again inside our removed temporary
    directory: ``awa-demo-*/run/python_PostgresServer/.lockfile`` was found left in /tmp. The
    owner stops the server and removes the directory itself (``EmbeddedPostgres.stop``).
    """
    from pgserver.postgres_server import PostgresServer

    class OwnedServer(PostgresServer):
        def _cleanup(self) -> None:
            return

    return OwnedServer


class EmbeddedPostgres:
    """``with EmbeddedPostgres() as pg: pg.dsn``: started on enter, stopped and removed on exit."""

    def __init__(self, prefix: str = "awa-demo-") -> None:
        self.prefix = prefix
        self.root: Path | None = None
        self.dsn = ""
        self._runtime_set = False
        self._server: Any = None

    @property
    def data_dir(self) -> Path:
        assert self.root is not None
        return self.root / "pg"

    @property
    def pid(self) -> int | None:
        """The postmaster's pid while its ``postmaster.pid`` exists."""
        if self.root is None:
            return None
        try:
            first = (self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0]
        except (FileNotFoundError, NotADirectoryError):
            return None
        return int(first) if first.strip().isdigit() else None

    def start(self) -> str:
        """Initialise and start the server (blocking); returns its DSN."""
        self.root = Path(tempfile.mkdtemp(prefix=self.prefix))
        if not os.environ.get("XDG_RUNTIME_DIR"):
            # pgserver keeps its lock (and long socket paths) there; it reads the variable once,
            # when it is first imported.
            runtime = self.root / "run"
            runtime.mkdir(mode=0o700)
            os.environ["XDG_RUNTIME_DIR"] = str(runtime)
            self._runtime_set = True
        self.data_dir.mkdir()
        self._server = owned_server_class()(self.data_dir.resolve(), cleanup_mode=None)
        self.dsn = str(self._server.get_uri())
        return self.dsn

    def stop(self) -> None:
        """Stop the server and remove everything; safe to call twice and after a failed start.

        The signals that end the process are held off meanwhile (``signals_held``), so they
        cannot cut it short and leave the server running or half its directory behind.
        """
        with signals_held():
            server, self._server = self._server, None
            if server is not None:
                atexit.unregister(server._cleanup)
                type(server)._instances.pop(server.pgdata, None)
            pid = self.pid
            if pid is not None:
                stop_postmaster(pid)
            if self.root is not None:
                for other in processes_inside(self.root):
                    kill_and_wait(other)
                shutil.rmtree(self.root, ignore_errors=True)
                self.root = None
            if self._runtime_set:
                os.environ.pop("XDG_RUNTIME_DIR", None)
                self._runtime_set = False

    def __enter__(self) -> EmbeddedPostgres:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextmanager
def signals_held() -> Iterator[None]:
    """No signal of ``HELD`` changes anything inside the block: the process is leaving.

    Blocking them (``pthread_sigmask``) is not enough: a signal that arrived just before, while
    a C call ran, is already recorded, and Python raises it at its next instruction, inside
    the block. So, in the main thread (the only one Python runs handlers in), their Python
    handlers are ignored too for the block, which drops a recorded one; the exit code was
    decided already. The OS mask covers the other threads.
    """
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in HELD} if main else {}
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)  # one held meanwhile is dropped
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def process_alive(pid: int) -> bool:
    """Running, and not a zombie: the postmaster's parent is init, which may reap it a second
    later (here it does), and a zombie holds no port, socket or file."""
    if not Path("/proc/self/stat").exists():  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def stop_postmaster(pid: int) -> None:
    """Immediate shutdown (SIGQUIT), then a kill.

    The data directory is thrown away, so the shutdown checkpoint of a fast shutdown (SIGINT)
    would only cost time: about 3.7 s after a minute of the demo, against milliseconds.
    """
    for sig, wait in ((signal.SIGQUIT, STOP_TIMEOUT), (signal.SIGKILL, STOP_TIMEOUT)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not process_alive(pid):
                return
            time.sleep(0.01)  # the postmaster is not our child: there is nothing to wait on


def processes_inside(root: Path) -> list[int]:
    """Processes working in ``root`` (their current directory under it), but this one.

    A start cut short leaves them: a Ctrl-C while initdb runs kills initdb, not the
    ``postgres --boot`` or ``--single`` it started, which went on writing the data directory
    after it was removed (a demo directory was found left by the Ctrl-C test). PostgreSQL's
    processes change to their data directory first thing. Without /proc: none are found.
    """
    inside = []
    prefix = f"{root.resolve()}{os.sep}"
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if f"{cwd}{os.sep}".startswith(prefix) and int(entry.name) != os.getpid():
            inside.append(int(entry.name))
    return inside


def kill_and_wait(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_TIMEOUT
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)  # not our child: there is nothing to wait on


def exit_now(server: EmbeddedPostgres, code: int) -> NoReturn:
    """Stop the server, remove its directory and leave at once with ``code``.

    For a ``signal.signal`` handler: it runs in the main thread even while that thread is stuck
    writing to a terminal that is gone (or on Textual's writer queue behind it), where nothing
    else would ever run. So nothing here touches the terminal, and no ``finally``, ``atexit`` hook
    or flush runs after it. Further signals are ignored from the first statement on: a closed
    terminal can send several, and one must not cut the cleanup short. ``stop`` is synchronous,
    takes no lock and is idempotent, so it is safe wherever the main thread was interrupted.
    """
    for sig in HELD:
        signal.signal(sig, signal.SIG_IGN)
    try:
        server.stop()
    finally:
        os._exit(code)


class SeenSignal:
    """The first signal that ends the process, kept after its handler has raised.

    A handler's exception is raised wherever the main thread is, and that can be inside a
    finalizer (an asyncio transport collected after its loop closed), where Python prints
    "Exception ignored in ..." and goes on: a Ctrl-C on the demo while it started was lost that
    way, and the demo ran on. ``raise_if_seen`` at each step's end raises it again."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def note(self, signum: int) -> None:
        """Record ``signum`` if it is the first (the app's loop handles some itself)."""
        if self.signum is None:
            self.signum = signum

    def raise_if_seen(self) -> None:
        """The exit the first signal asked for, if one came and the process is still here."""
        if self.signum == signal.SIGINT:
            raise KeyboardInterrupt
        if self.signum is not None:
            raise SystemExit(signal_exit_code(self.signum))


@contextmanager
def exit_on_signals() -> Iterator[SeenSignal]:
    """SIGTERM and SIGHUP raise ``SystemExit(128 + signum)`` so every ``finally`` runs, and
    SIGINT raises ``KeyboardInterrupt`` (Python's own handler, recorded first).

    Only the first signal counts; later ones are ignored (a closed terminal can send several).
    Yields what was seen: it records a signal handled elsewhere (the app's loop while it runs)
    and raises the first one again where its own raise was lost (``SeenSignal``). Around an
    ``asyncio.run`` put Python's SIGINT handler back (``python_sigint``): asyncio then turns
    Ctrl-C into a cancellation of its main task instead of an exception anywhere in the loop.
    """
    seen = SeenSignal()

    def handler(signum: int, frame: FrameType | None) -> None:
        if seen.signum is not None:
            return
        seen.note(signum)
        seen.raise_if_seen()

    previous = {sig: signal.signal(sig, handler) for sig in (*SIGNALS, signal.SIGINT)}
    try:
        yield seen
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextmanager
def python_sigint(seen: SeenSignal) -> Iterator[None]:
    """Python's own SIGINT handler for the block (an ``asyncio.run``: see ``exit_on_signals``),
    then the recording one again; a signal recorded meanwhile is raised as the block ends."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    seen.raise_if_seen()
