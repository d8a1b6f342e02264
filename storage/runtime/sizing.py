"""How many jobs a runtime holds and claims at once, chosen as it runs rather than tuned.

The rule: the runtime holds at most ``limit`` jobs (claimed and not yet finished). ``limit``
starts at ``FLOOR`` (64, the old fixed default), **doubles** after a claim that came back full
(the backlog is deeper than what was asked for) while the event loop answered promptly (the
lag probe's timer fired under ``LAG_GROW`` late: ``LagSeen``), and **halves**
when the loop lagged more than ``LAG_SHRINK`` (handlers hog the CPU: more of them would only
wait), never below ``FLOOR`` nor above the ceiling (``AUTO_CEILING``). A user's
``concurrency`` is a hard cap: the ceiling, where the limit starts (the user knows the
handlers), and the floor too when it is below ``FLOOR``. A claim takes the free slots, at
most ``claim_cap`` (the user's ``claim_size``, else ``AUTO_CLAIM``), once half a full claim is
free (or nothing runs), so claims and completion flushes come in big batches.

Why lag: asyncio handlers that await (I/O, sleeps) are cheap to run by the hundred, and more
of them means bigger claim and flush batches, so fewer round trips per job; handlers that
block the loop (CPU work, a blocking driver) gain nothing from company, and each extra one
delays every heartbeat, cancel notice and claimed job behind it. The loop's lag (how late a
timer fires) measures that, whatever the handler does. Why a floor: a claim's and a flush's
round trips leave the loop idle unless enough claimed jobs wait to run meanwhile, so blocking
handlers need a few dozen held to keep the CPU busy (a first version that went down to one
job at a time ran 5 ms CPU handlers at 48 jobs/s, a fixed 64 at 104-134); 64 keeps what the
fixed default did.
"""

from __future__ import annotations

from dataclasses import dataclass

from storage.values.errors import ConfigError

FLOOR = 64
"""The first limit and the lowest one (unless a user cap is lower): the old fixed default."""
AUTO_CEILING = 1024
"""The most jobs a runtime holds without a user cap: two claims of ``AUTO_CLAIM``."""
AUTO_CLAIM = 512
"""The largest claim without a user ``claim_size``: one full completion flush."""
LAG_GROW = 0.05
"""Grow only while timers fire less than 50 ms late."""
LAG_SHRINK = 0.2
"""Halve once a timer fired more than 200 ms late."""
PROBE_SECONDS = 0.05
"""How often the runtime measures its loop's lag."""


@dataclass(frozen=True, slots=True)
class Sizing:
    """What the user fixed: hard caps, never exceeded, and the claim threshold if given."""

    ceiling: int
    claim_cap: int
    threshold: int | None = None
    capped: bool = False
    """The ceiling is the user's ``concurrency``: the limit starts there."""

    @classmethod
    def of(
        cls, concurrency: int | None, claim_size: int | None, claim_threshold: int | None
    ) -> Sizing:
        """The caps for ``start()``'s arguments (``None``: chosen by the runtime)."""
        for name, value in (
            ("concurrency", concurrency),
            ("claim_size", claim_size),
            ("claim_threshold", claim_threshold),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigError(f"{name} must be a whole number of at least 1, or None.")
        ceiling = concurrency or AUTO_CEILING
        return cls(ceiling, claim_size or AUTO_CLAIM, claim_threshold, concurrency is not None)

    @property
    def floor(self) -> int:
        return min(FLOOR, self.ceiling)

    @property
    def start(self) -> int:
        return self.ceiling if self.capped else self.floor

    def to_claim(self, limit: int, held: int) -> int:
        """How many jobs to claim now: none until enough slots are free (a bigger batch costs
        fewer round trips per job), all free slots up to ``claim_cap`` once they are."""
        free = limit - held
        threshold = self.threshold or max(1, min(self.claim_cap, limit) // 2)
        if free <= 0 or (held and free < threshold):
            return 0
        return min(free, self.claim_cap)

    def next_limit(self, limit: int, *, filled: bool, lag: float | None) -> int:
        """The limit after a claim: ``filled`` when it got all it asked for, ``lag`` the worst
        timer lateness seen since the previous claim (``None``: no timer fired meanwhile, so
        nothing says the loop is prompt: no growth)."""
        if lag is not None and lag > LAG_SHRINK:
            return max(self.floor, min(limit, self.ceiling) // 2)
        if filled and lag is not None and lag < LAG_GROW:
            limit *= 2
        return max(self.floor, min(limit, self.ceiling))


class LagSeen:
    """The loop's lag as each claim's sizing sees it: the worst reading since the previous
    claim or, when claims come closer together than the probe's ``PROBE_SECONDS``, the
    latest reading. Before, such a claim saw none and the limit could not grow: claims of
    quick handlers came every few ms, so each doubling waited for a reading to fall between
    two claims (12-16 claims per step; a 20,000-job run claimed up to 40% of its jobs below
    the ceiling; now one or two per step). ``None`` only before the first reading."""

    __slots__ = ("_latest", "_worst")

    def __init__(self) -> None:
        self._worst: float | None = None
        self._latest: float | None = None

    def record(self, late: float) -> None:
        """One reading: how late the probe's timer fired (seconds)."""
        self._worst = late if self._worst is None else max(self._worst, late)
        self._latest = late

    def take(self) -> float | None:
        """The lag for this claim's sizing; readings before it no longer count as worst."""
        worst, self._worst = self._worst, None
        return worst if worst is not None else self._latest
