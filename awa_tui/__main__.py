"""``python -m awa_tui`` is ``awa-tui``; ``run`` is also the ``awa-tui`` script's entry point.

The import of the console takes a few tenths of a second; a Ctrl-C meanwhile is one line and
exit 130 like any other, not a traceback of the import.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

EXIT_INTERRUPTED = 130  # awa_tui.errors has it too, but importing that imports the engine


def run() -> int:
    try:
        from awa_tui.cli import main

        code = main()
    except KeyboardInterrupt:
        print("awa-tui: interrupted.", file=sys.stderr)
        code = EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the exit code is decided
    if code == EXIT_INTERRUPTED:
        interrupted_exit()
    return code


def interrupted_exit() -> None:
    """Exit 130 now, past the interpreter's own exit.

    CPython 3.11 keeps a flag, "a KeyboardInterrupt went unhandled", that its exit turns into
    death by SIGINT (-2). An ``exec`` of source text sets it when a Ctrl-C passes through,
    even one caught later (``dataclasses`` builds methods so while the console imports): the
    flag was seen set after ours caught it, and about 1 start in 20 interrupted at 1.5 s ended
    -2. Everything of ours is stopped and removed by now; only the streams need flushing.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed, or the terminal is gone
            stream.flush()
    os._exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    sys.exit(run())
