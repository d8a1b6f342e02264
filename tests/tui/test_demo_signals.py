"""SIGTERM, and SIGHUP from a closed terminal, end a running ``python -m awa_tui --demo`` with
its embedded PostgreSQL stopped and nothing left in the temporary directory."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from awa_tui.embedded import process_alive, signal_exit_code, stop_postmaster

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 60.0


def _controlling_tty() -> None:
    """In the child, after setsid: the pty becomes its terminal, so closing it hangs up."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Screen(threading.Thread):
    """Drains the pty (a full pty would block the app) and keeps what it printed."""

    def __init__(self, master: int) -> None:
        super().__init__(daemon=True)
        self.master = master
        self.output = bytearray()
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the child closed its side
                return
            if not chunk:
                return
            self.output.extend(chunk)


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def postmaster_pid(tmp: Path) -> int | None:
    for pid_file in tmp.glob("awa-demo-*/pg/postmaster.pid"):
        first = pid_file.read_text().split("\n", 1)[0]
        if first.isdigit():
            return int(first)
    return None


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_signal_stops_the_demo_and_leaves_nothing(signum: signal.Signals) -> None:
    with tempfile.TemporaryDirectory(prefix="awa-sig-") as tmp_name:
        tmp = Path(tmp_name)
        env = {**os.environ, "TMPDIR": tmp_name, "TERM": "xterm-256color"}
        env.pop("XDG_RUNTIME_DIR", None)  # the demo makes (and removes) its own
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))
        proc = subprocess.Popen(
            # Not the All tab: its crash on a job listed twice is another test's business.
            [sys.executable, "-m", "awa_tui", "--demo", "--refresh", "0.2", "--state", "completed"],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=ROOT,
            env=env,
            start_new_session=True,
            preexec_fn=_controlling_tty,
        )
        os.close(slave)
        screen = Screen(master)
        screen.start()
        open_fds = [master]
        try:
            wait_until(lambda: b"send_email" in screen.output, "the demo's jobs on screen")
            pid = postmaster_pid(tmp)
            assert pid is not None
            assert process_alive(pid)
            if signum is signal.SIGHUP:  # the terminal goes away: the kernel hangs up
                screen.stopped.set()
                screen.join()
                os.close(open_fds.pop())
            else:
                proc.send_signal(signum)
            assert proc.wait(timeout=DEADLINE) == signal_exit_code(signum)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            screen.stopped.set()
            screen.join()
            for fd in open_fds:
                os.close(fd)
        assert not process_alive(pid)
        assert sorted(p.name for p in tmp.iterdir()) == []


def _pending(master: int) -> int:
    """Bytes the child wrote that nobody has read yet."""
    pending: int = struct.unpack("i", fcntl.ioctl(master, termios.FIONREAD, b"\0\0\0\0"))[0]
    return pending


def test_sighup_while_the_terminal_blocks_writes_still_cleans_up() -> None:
    """A terminal that stops reading: once the pty's buffer is full, Textual's writer blocks and
    so does the app's loop behind it; SIGHUP must still stop the server and exit (129)."""
    with tempfile.TemporaryDirectory(prefix="awa-sig-") as tmp_name:
        tmp = Path(tmp_name)
        env = {**os.environ, "TMPDIR": tmp_name, "TERM": "xterm-256color"}
        env.pop("XDG_RUNTIME_DIR", None)
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 200, 0, 0))
        proc = subprocess.Popen(
            [sys.executable, "-m", "awa_tui", "--demo", "--refresh", "0.2", "--state", "completed"],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=ROOT,
            env=env,
            start_new_session=True,
            preexec_fn=_controlling_tty,
        )
        os.close(slave)
        screen = Screen(master)
        screen.start()
        try:
            wait_until(lambda: b"send_email" in screen.output, "the demo's jobs on screen")
            pid = postmaster_pid(tmp)
            assert pid is not None
            screen.stopped.set()  # nobody reads the terminal any more
            screen.join()
            # Keys make the console redraw until the pty is full and the writes block.
            deadline = time.monotonic() + DEADLINE
            stable_since, last = time.monotonic(), -1
            while time.monotonic() < deadline:
                os.write(master, b"\t" if int(time.monotonic() * 10) % 2 else b"j")
                time.sleep(0.1)
                pending = _pending(master)
                if pending != last:
                    stable_since, last = time.monotonic(), pending
                elif time.monotonic() - stable_since > 2.0:
                    break
            else:
                raise AssertionError("the terminal's buffer never filled")
            proc.send_signal(signal.SIGHUP)
            assert proc.wait(timeout=20) == signal_exit_code(signal.SIGHUP)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            screen.stopped.set()
            screen.join()
            os.close(master)
            leaked = postmaster_pid(tmp)
            if leaked is not None:  # a demo killed here leaves its server: not in the next test
                stop_postmaster(leaked)
        assert not process_alive(pid)
        assert sorted(p.name for p in tmp.iterdir()) == []
