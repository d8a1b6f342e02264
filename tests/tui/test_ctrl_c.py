"""Ctrl-C at any moment of ``awa-tui --demo`` starting is one line and exit 130.

SIGINT is sent at several moments after the interpreter is up (it says so, then runs the
console as ``python -m awa_tui`` would): while Python imports the console (where a 40-line
traceback of the import used to be) and while the embedded server starts. The process exits
130, never by the signal itself (-2: it did about 1 run in 20 at 1.5 s, when the Ctrl-C landed
in an ``exec`` of an import), says at most one line of its own (after the "starting" line),
never a traceback, and leaves no directory behind. The moments count from the interpreter
being up, not from the spawn, so a loaded host does not move them into Python's own start.

Textual draws on stderr, so on a fast host the later moments land after the console is up: its
terminal control sequences are taken out before the lines are judged (CI once failed there). A
last case waits for the console to enter the alternate screen, so "Ctrl-C once it is drawn" is
covered on every host, not only on a fast one.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# CSI sequences (cursor, modes, mouse) and OSC sequences (ended by BEL or ST) the console draws.
CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[=>]")
ALTERNATE_SCREEN = b"\x1b[?1049h"


# The child first takes Python's own Ctrl-C handler, as a terminal starts it: launched from a
# shell without job control (a background job of a script), it inherits SIGINT ignored, and
# the tests would hang on a Ctrl-C that changes nothing.
LAUNCH = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.stderr.write('up\\n'); sys.stderr.flush(); "
    "sys.argv = ['awa_tui', '--demo']; runpy.run_module('awa_tui', run_name='__main__')"
)


@pytest.mark.parametrize("after", [0.05, 0.2, 0.5, 1.0, 2.0])
def test_ctrl_c_while_starting_is_one_line_and_130(after: float, tmp_path: Path) -> None:
    child = spawn(tmp_path)
    time.sleep(after)  # the moment is the point of the test: it is not a wait for anything
    child.send_signal(signal.SIGINT)
    assert_one_line_and_130(child, finish(child).decode(), tmp_path)


def test_ctrl_c_once_the_console_is_drawn_is_one_line_and_130(tmp_path: Path) -> None:
    child = spawn(tmp_path)
    assert child.stderr is not None
    stream = child.stderr.fileno()
    seen = b""
    deadline = time.monotonic() + 60
    while ALTERNATE_SCREEN not in seen:
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"the console did not draw within 60 s: {seen[-300:]!r}"
        chunk = os.read(stream, 65536)
        assert chunk, f"the console exited before drawing: {seen[-300:]!r}"
        seen += chunk
    child.send_signal(signal.SIGINT)
    assert_one_line_and_130(child, (seen + finish(child)).decode(), tmp_path)


def spawn(tmp_path: Path) -> subprocess.Popen[bytes]:
    """The demo as ``python -m awa_tui --demo`` runs it, returned once its interpreter is up."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    env.pop("XDG_RUNTIME_DIR", None)
    child = subprocess.Popen(
        [sys.executable, "-c", LAUNCH],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        bufsize=0,  # unbuffered: what follows "up" is read from the pipe itself (select, os.read)
    )
    assert child.stderr is not None
    assert child.stderr.readline() == b"up\n"
    return child


def finish(child: subprocess.Popen[bytes]) -> bytes:
    """The rest of the child's stderr once it exits; one still running after 60 s is ended
    by SIGTERM (which stops its server and removes its directory) and the test fails."""
    try:
        return child.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        child.terminate()
        child.communicate(timeout=60)
        pytest.fail("the demo was still running 60 s after its Ctrl-C")


def assert_one_line_and_130(child: subprocess.Popen[bytes], err: str, tmp_path: Path) -> None:
    lines = [line for line in CONTROL.sub("", err).splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert child.returncode == 130, (child.returncode, err)
    assert len(lines) <= 2, err
    assert all(line.startswith("awa-tui: ") for line in lines), err
    assert not list(tmp_path.glob("awa-demo-*")), "the demo left its directory behind"
