"""Everything the console starts with (built by the CLI or a test; widgets never read env)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class AppSettings:
    dsn: str | None
    schema: str = "awa"
    """The queue-storage schema shown first."""
    schemas: tuple[str, ...] = ()
    """The schemas the picker (``Z``) offers; empty: every installed one."""
    read_only: bool = False
    refresh: float = 2.0
    """Seconds between live refreshes of the browser; 0 starts with live refresh paused."""
    initial_job: int | None = None
    initial_kind: str | None = None
    initial_state: str | None = None
    demo_label: str | None = None
    dsn_label: str | None = None
    """Shown instead of the redacted DSN (tests pin it; the demo names its server)."""
    save_dir: Path = Path()
    editor: str | None = None
    """The command for ctrl+e in the completion form ($VISUAL or $EDITOR, read by the CLI)."""
    actor: str | None = None
    """Who the console's writes are audited as (``--actor``); None: ``default_actor()``."""
