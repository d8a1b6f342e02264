"""Lifecycle events: delivered in process, after commit, best effort; never for a stale outcome."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Literal, get_args

from storage.values.errors import InvalidOption

log = logging.getLogger("storage")

EventName = Literal[
    "started",
    "completed",
    "retried",
    "exhausted",
    "cancelled",
    "waiting_for_callback",
    "rescued",
    "snoozed",
]
"""What happened to the job: ``typing.get_args(EventName)`` lists them."""

EVENT_NAMES: tuple[str, ...] = get_args(EventName)
"""Every event name, for refusing an unknown one in ``on_event(names=...)``."""


@dataclass(frozen=True)
class JobEvent:
    """``output`` is set only on ``completed``: the sealed output, from memory, not re-read."""

    name: EventName
    job_id: int
    kind: str
    queue: str
    output: Any = None


Listener = Callable[[JobEvent], object]


class EventBus:
    def __init__(self) -> None:
        # (listener, kinds, event names): None takes every kind, or every event.
        self._listeners: list[tuple[Listener, frozenset[str] | None, frozenset[str] | None]] = []

    def subscribe(
        self,
        listener: Listener,
        kinds: Collection[str] | None = None,
        names: Collection[str] | None = None,
    ) -> None:
        if names is not None and (unknown := sorted(set(names) - set(EVENT_NAMES))):
            raise InvalidOption(
                f"Unknown event name(s) {', '.join(map(repr, unknown))}; the events are "
                f"{', '.join(EVENT_NAMES)}."
            )
        self._listeners.append(
            (
                listener,
                frozenset(kinds) if kinds is not None else None,
                frozenset(names) if names is not None else None,
            )
        )

    def wants(self, kind: str, name: str | None = None) -> bool:
        """Whether any listener would receive an event of ``kind`` (named ``name``, when
        given): skip building it if not."""
        listeners = self._listeners  # none, usually: answered without building a generator
        return bool(listeners) and any(
            (kinds is None or kind in kinds) and (name is None or names is None or name in names)
            for _, kinds, names in listeners
        )

    def emit(self, event: JobEvent) -> None:
        for listener, kinds, names in self._listeners:
            if (kinds is not None and event.kind not in kinds) or (
                names is not None and event.name not in names
            ):
                continue
            try:
                listener(event)
            except Exception as exc:  # a hook must never break the runtime
                log.warning("event listener failed on %s: %s", event.name, type(exc).__name__)
