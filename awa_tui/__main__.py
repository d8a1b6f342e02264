"""``python -m awa_tui`` is ``awa-tui``."""

from __future__ import annotations

import sys

from awa_tui.cli import main

sys.exit(main())
