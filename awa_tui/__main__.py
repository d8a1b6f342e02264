"""``python -m awa_tui`` is ``awa-tui``; ``run`` is also the ``awa-tui`` script's entry point.

The import of the console takes a few tenths of a second; a Ctrl-C meanwhile is one line and
exit 130 like any other, not a traceback of the import.
"""

from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130  # awa_tui.errors has it too, but importing that imports the engine


def run() -> int:
    try:
        from awa_tui.cli import main
    except KeyboardInterrupt:
        print("awa-tui: interrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED
    return main()


if __name__ == "__main__":
    sys.exit(run())
