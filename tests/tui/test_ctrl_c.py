"""Ctrl-C at any moment of ``awa-tui --demo`` starting is one line and exit 130.

SIGINT is sent at several moments after the interpreter is up (it says so, then runs the
console as ``python -m awa_tui`` would): while Python imports the console (where a 40-line
traceback of the import used to be) and while the embedded server starts. The process exits
130, never by the signal itself (-2: it did about 1 run in 20 at 1.5 s, when the Ctrl-C landed
in an ``exec`` of an import), says at most one line of its own (after the "starting" line),
never a traceback, and leaves no directory behind. The moments count from the interpreter
being up, not from the spawn, so a loaded host does not move them into Python's own start.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


LAUNCH = (
    "import runpy, sys; sys.stderr.write('up\\n'); sys.stderr.flush(); "
    "sys.argv = ['awa_tui', '--demo']; runpy.run_module('awa_tui', run_name='__main__')"
)


@pytest.mark.parametrize("after", [0.05, 0.2, 0.5, 1.0, 2.0])
def test_ctrl_c_while_starting_is_one_line_and_130(after: float, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    env.pop("XDG_RUNTIME_DIR", None)
    child = subprocess.Popen(
        [sys.executable, "-c", LAUNCH],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stderr is not None
    assert child.stderr.readline() == "up\n"
    time.sleep(after)  # the moment is the point of the test: it is not a wait for anything
    child.send_signal(signal.SIGINT)
    _out, err = child.communicate(timeout=60)
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert child.returncode == 130, (child.returncode, err)
    assert len(lines) <= 2, err
    assert all(line.startswith("awa-tui: ") for line in lines), err
    assert not list(tmp_path.glob("awa-demo-*")), "the demo left its directory behind"
