"""Supervision for the runtime's background loops: one mechanism for all of them.

A loop is a ``step`` coroutine run again and again. When a step raises, the supervisor logs one
line (loop, error class, SQLSTATE; never a message, which can quote data), backs off (capped
exponential with jitter) and runs the step again; steps take their connections from the pool,
which replaces dead ones, so the retry runs on a fresh connection. A transient error (the
connection, the server going away, a busy or confused driver) is retried for as long as it
lasts, unless ``give_up_after`` seconds of failures in a row are configured. Any other error is
survived too, but the same class failing ``max_repeats`` times in a row is a bug that retrying
will not fix: the supervisor then reports the runtime failed, loudly, instead of idling on.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import NamedTuple, TypeVar

import asyncpg
from asyncpg.exceptions._base import InternalClientError

from storage.values.errors import ConnectionFailed, DatabaseError, describe
from storage.values.health import Health, HealthState

log = logging.getLogger("storage")

# SQLSTATE classes that pass: connection exceptions, insufficient resources, operator
# intervention (shutdown, cancel), system errors, transaction rollbacks (deadlock, serialization).
_TRANSIENT_CLASSES = ("08", "53", "57", "58", "40")
# Lock not available, object in use, read-only transaction (a fail-over in progress).
_TRANSIENT_STATES = frozenset({"55P03", "55006", "25006"})

Step = Callable[[], Awaitable[None]]
T = TypeVar("T")


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is the driver or the server failing, which a retry can outlast."""
    if isinstance(
        exc,
        OSError | TimeoutError | asyncpg.InterfaceError | InternalClientError | ConnectionFailed,
    ):
        return True
    if isinstance(exc, asyncpg.PostgresError):
        code = str(getattr(exc, "sqlstate", "") or "")
        return code[:2] in _TRANSIENT_CLASSES or code in _TRANSIENT_STATES
    if isinstance(exc, DatabaseError) and isinstance(exc.__cause__, asyncpg.PostgresError):
        # Translated at the boundary (too many clients at connect): judged by the server's code.
        return is_transient(exc.__cause__)
    return False


class Backoff:
    """Capped exponential delays with jitter: half the step fixed, half random."""

    def __init__(self, base: float = 0.05, cap: float = 5.0) -> None:
        self.base = base
        self.cap = cap

    def delay(self, failures: int) -> float:
        ceiling = min(self.cap, self.base * 2.0 ** max(0, failures - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2)  # jitter, not secrets


class Trouble(NamedTuple):
    """A loop failing since ``since`` (or the runtime failed then), and why."""

    since: datetime
    reason: str


class Supervisor:
    """Runs named loops, keeps their health, and calls ``on_fatal`` once when one gives up."""

    def __init__(
        self,
        on_fatal: Callable[[str], None],
        *,
        backoff: Backoff | None = None,
        max_repeats: int = 5,
        give_up_after: float | None = None,
    ) -> None:
        self._on_fatal = on_fatal
        self._backoff = backoff or Backoff()
        self._max_repeats = max_repeats
        self._give_up_after = give_up_after
        self._started_at = datetime.now(UTC)
        self._failing: dict[str, Trouble] = {}  # by loop name, while it keeps failing
        self._failed: Trouble | None = None
        self._stopping = False

    @property
    def failed(self) -> str | None:
        return self._failed.reason if self._failed is not None else None

    @property
    def health(self) -> Health:
        if self._failed is not None:
            return Health(HealthState.FAILED, self._failed.since, self._failed.reason)
        if self._failing:
            since = min(t.since for t in self._failing.values())
            reasons = "; ".join(t.reason for t in self._failing.values())
            return Health(HealthState.DEGRADED, since, reasons)
        return Health(HealthState.RUNNING, self._started_at)

    def stop(self) -> None:
        """Run no further steps. Checked between steps because a step can swallow the
        cancellation that stops it (``asyncio.wait_for`` does when its wait ends at once)."""
        self._stopping = True

    def spawn(self, name: str, step: Step) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(self._run(name, step), name=f"awa-{name}")

    def fail(self, reason: str) -> None:
        """Mark the runtime failed (once) and tell the owner."""
        if self._failed is not None:
            return
        self._failed = Trouble(datetime.now(UTC), reason)
        log.error("runtime failed: %s; it claims no more jobs", reason)
        self._on_fatal(reason)

    async def _run(self, name: str, step: Step) -> None:
        loop = asyncio.get_running_loop()
        failures = repeats = 0
        last: type[BaseException] | None = None
        first_failure = 0.0
        while self._failed is None and not self._stopping:
            try:
                await step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self._stopping:  # a step let finish by a stop: no retry, no wait for one
                    log.warning("%s loop failed while stopping (%s)", name, describe(exc))
                    return
                if not failures:
                    first_failure = loop.time()
                failures += 1
                transient = is_transient(exc)
                repeats = 0 if transient else (repeats + 1 if type(exc) is last else 1)
                last = type(exc)
                reason = f"{name}: {describe(exc)}"
                if repeats >= self._max_repeats:
                    self.fail(f"{reason}, {repeats} times in a row")
                    return
                if (
                    self._give_up_after is not None
                    and loop.time() - first_failure >= self._give_up_after
                ):
                    self.fail(f"{reason}, failing for {self._give_up_after:g}s")
                    return
                delay = self._backoff.delay(failures)
                log.warning("%s loop failed (%s); retrying in %.2fs", name, describe(exc), delay)
                earlier = self._failing.get(name)
                since = earlier.since if earlier is not None else datetime.now(UTC)
                self._failing[name] = Trouble(since, reason)
                await asyncio.sleep(delay)
            else:
                if failures:
                    log.info("%s loop recovered after %d failed attempt(s)", name, failures)
                    self._failing.pop(name, None)
                failures = repeats = 0
                last = None


# Delays between tries of a write that must land (a completion flush, a handler's finalize):
# about 30 s in all, well inside the heartbeat rescue's 60 s.
RETRY_DELAYS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 2.0, 4.0, 4.0, 8.0, 8.0)


async def retry_transient(
    what: str,
    attempt: Callable[[], Awaitable[T]],
    *,
    stop: Callable[[], bool] = lambda: False,
    delays: tuple[float, ...] = RETRY_DELAYS,
) -> T:
    """Run ``attempt`` until it succeeds, retrying transient errors after each of ``delays``.

    ``attempt`` must get its own connection each time (the pool replaces a dead one) and be
    safe to run again after an uncertain commit: every finalize write is guarded by
    ``(job_id, run_lease)``, so a retry that finds its own earlier commit reports it as
    already written instead of writing twice. Any other error, the last one, or any error
    once ``stop()`` is true (the pool is closing: no retry can succeed) is raised.
    """
    for delay in (*delays, None):
        try:
            return await attempt()
        except Exception as exc:
            if delay is None or not is_transient(exc) or stop():
                raise
            log.warning("%s failed (%s); retrying in %.2fs", what, describe(exc), delay)
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")
