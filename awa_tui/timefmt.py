"""Times as an on-call engineer reads them: relative to the app's clock, plus exact UTC.

The clock is injected (``make_app(clock=...)``) so screens and snapshots are deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    return datetime.now(UTC)


def _span(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 1:
        return "0s"
    if seconds < 60:
        return f"{int(seconds)}s"
    if seconds < 3600:
        minutes, rest = divmod(int(seconds), 60)
        return f"{minutes}m" if minutes >= 10 or rest == 0 else f"{minutes}m{rest:02d}s"
    if seconds < 86400:
        hours, rest = divmod(int(seconds), 3600)
        minutes = rest // 60
        return f"{hours}h" if minutes == 0 else f"{hours}h{minutes:02d}m"
    days, rest = divmod(int(seconds), 86400)
    return f"{days}d" if rest < 3600 else f"{days}d{rest // 3600}h"


def relative(moment: datetime | None, now: datetime) -> str:
    """``5m ago`` for the past, ``in 3m`` for the future, ``now`` within a second."""
    if moment is None:
        return "-"
    delta = (moment - now).total_seconds()
    if abs(delta) < 1:
        return "now"
    return f"in {_span(delta)}" if delta > 0 else f"{_span(delta)} ago"


def absolute(moment: datetime | None) -> str:
    """``2025-01-02 03:04:05Z`` (UTC, second precision)."""
    if moment is None:
        return "-"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def both(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return "-"
    return f"{absolute(moment)} ({relative(moment, now)})"


def parse_timestamp(value: object) -> datetime | None:
    """Error entries carry RFC 3339 text; anything unparseable reads as unknown."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
