"""The top banner: demo label, read-only mode and a lost connection, so nobody mistakes where
they are or how old what they see is."""

from __future__ import annotations

from textual.widgets import Static

from awa_tui.resilience import Guarded


class ModeBanner(Guarded, Static):
    """Hidden unless the console is a demo, read-only, or has lost its connection."""

    DEFAULT_CSS = """
    ModeBanner { height: auto; display: none; padding: 0 1; }
    ModeBanner.-shown { display: block; }
    """

    def show_modes(
        self, demo_label: str | None, read_only_reason: str | None, lost: str | None = None
    ) -> None:
        parts = [lost] if lost else []
        if demo_label:
            parts.append(f"[b]DEMO[/b] {demo_label}")
        if read_only_reason:
            parts.append(f"[b]READ-ONLY[/b] {read_only_reason}")
        self.update("  ·  ".join(parts))
        self.set_class(bool(parts), "-shown")
        self.set_class(bool(read_only_reason), "-read-only")
        self.set_class(bool(demo_label) and not read_only_reason, "-demo")
        self.set_class(bool(lost), "-lost")
