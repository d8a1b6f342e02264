"""What the parts of a ``Client`` share, and how ``Client`` exposes their methods.

``Client`` composes its parts (``Operations``, ``KindOperations``, ``MaintenanceOperations``,
``OutputReads``, ``CallbackOperations``, ``Worker``); each part gets the ``Session`` (pool, DSN,
output-column probe, events, metrics) and nothing else of the client. ``Delegated`` publishes a
part's method on ``Client`` under the same name, signature and docstring, so callers see one
object while each concern lives in its own module.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from storage.db.job_metrics import JobMetrics
from storage.db.metrics import OutputMetrics
from storage.db.pool import acquire
from storage.db.schema_probe import OutputColumnsProbe, RuntimesProbe
from storage.ops.leadership import MaintenanceLeader
from storage.values.events import EventBus

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class Session:
    """One client's pool and what every part of it shares."""

    pool: asyncpg.Pool
    dsn: str | None
    probe: OutputColumnsProbe = field(default_factory=OutputColumnsProbe)
    runtimes_probe: RuntimesProbe = field(default_factory=RuntimesProbe)
    events: EventBus = field(default_factory=EventBus)
    metrics: OutputMetrics = field(default_factory=OutputMetrics)
    job_metrics: JobMetrics = field(default_factory=JobMetrics)
    leader: MaintenanceLeader = field(init=False)  # the maintenance lock, kept while leading

    def __post_init__(self) -> None:
        self.leader = MaintenanceLeader(self.pool)

    def connection(
        self, operation: str
    ) -> AbstractAsyncContextManager[PoolConnectionProxy[asyncpg.Record]]:
        """A pooled connection for the public call ``operation``; every failure, including
        the pool's (re)connect, surfaces as an ``AwaError`` naming it."""
        return acquire(self.pool, self.dsn, operation)

    async def outputs_supported(self) -> bool:
        """Whether this schema has the output columns (binary-first probe, cached)."""
        if self.probe.cached:
            return True
        async with self.connection("outputs_supported") as conn:
            return await self.probe.present(conn)


class Delegated(Generic[P, R]):
    """``name = Delegated("part", Part.name)`` in a class body: ``obj.name`` is
    ``obj.part.name``, typed with the part's signature.

    On the class it reads as the part's method: ``__wrapped__``, ``__signature__``, name and
    docstring are the method's (so ``inspect.signature(Client.browse)`` and ``help(Client)``
    show them), and calling it with the object first calls the part's method."""

    __name__: str
    __wrapped__: Callable[Concatenate[Any, P], R]
    __signature__: inspect.Signature

    def __init__(self, part: str, method: Callable[Concatenate[Any, P], R]) -> None:
        self._part = part
        self._name = method.__name__
        functools.update_wrapper(self, method)
        self.__signature__ = inspect.signature(method)

    def __call__(self, obj: object, *args: P.args, **kwargs: P.kwargs) -> R:
        method: Callable[P, R] = getattr(getattr(obj, self._part), self._name)
        return method(*args, **kwargs)

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Self: ...

    @overload
    def __get__(self, obj: object, owner: type[Any] | None = None) -> Callable[P, R]: ...

    def __get__(self, obj: object, owner: type[Any] | None = None) -> Self | Callable[P, R]:
        if obj is None:
            return self
        method: Callable[P, R] = getattr(getattr(obj, self._part), self._name)
        return method
