"""``benchmarks._harness.ServerCpu``: a process tree's CPU seconds never go backwards while its
children come and go. A child reaped between the parent's read and the /proc scan used to be
in neither, so a reading taken then was short by that child's CPU (a peers run read 0.0 s of
server CPU for a 2.9 s run whose pool had just closed)."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time

from benchmarks._harness import ServerCpu

# A parent that keeps starting short children, each spending some CPU, and reaping them.
PARENT = """
import subprocess, sys
for _ in range(400):
    subprocess.run([sys.executable, "-c", "sum(range(300_000))"])
"""


def test_a_tree_s_cpu_never_goes_backwards_while_children_are_reaped() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT])
    try:
        tree = ServerCpu(parent.pid)
        readings = [tree.seconds()]
        until = time.monotonic() + 3.0
        while time.monotonic() < until and parent.poll() is None:
            readings.append(tree.seconds())
    finally:
        parent.kill()
        parent.wait()
    drops = [(a, b) for a, b in itertools.pairwise(readings) if b < a]
    assert len(readings) > 5
    assert readings[-1] > readings[0]
    assert drops == [], f"{len(drops)} of {len(readings)} readings went backwards"
