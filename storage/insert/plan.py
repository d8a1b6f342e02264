"""What the jobs of one insert call share, validated once, and the per-job part.

``insert_many`` of 100,000 jobs used to read and check its options once per job; a plan reads
them once per call and resolves each args type to its kind and queue once, so the per-job work
is an ``isinstance`` check (when the kind declares an args type) and the JSON text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Protocol

from storage.insert import unique
from storage.insert.enqueue import KeyedJob, NewJob
from storage.values.codec import JsonConversionError, to_json_text, to_json_value
from storage.values.decode import JsonDecodeMismatch, decode_value
from storage.values.errors import ArgsValidationError, AwaError, InvalidOption, UnknownKind
from storage.values.names import check_stored_name
from storage.values.payload import build_payload

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def kind_of(args_type: type) -> str:
    """``SyncInventory`` -> ``sync_inventory``."""
    return _CAMEL.sub("_", args_type.__name__).lower()


class KindSpec(Protocol):
    """What a plan reads of a registered kind (``storage.tasks.TaskSpec`` is one)."""

    @property
    def queue(self) -> str: ...

    @property
    def args_type(self) -> type | None: ...


Resolved = tuple[str, str, "type | None"]
"""An args type's kind, queue and the args type its kind declares (None: any)."""


def _naive_or_type(value: object) -> str:
    return "naive datetime" if isinstance(value, datetime) else type(value).__name__


def _stored_options(metadata: dict[str, Any] | None, tags: Iterable[str]) -> dict[str, Any]:
    """``metadata`` and ``tags`` as JSON stores them, converted and checked by the codec that
    converts args and outputs (NaN and infinity refused: orjson alone writes them as null)."""
    converted: dict[str, Any] = {}
    for name, value in (("metadata", metadata or None), ("tags", list(tags))):
        try:
            converted[name] = to_json_value(value)
        except JsonConversionError as exc:
            raise InvalidOption(f"{name}= cannot be stored: {exc}; nothing was inserted.") from exc
    return converted


class InsertPlan:
    """The options of one insert call: checked here, before any job is built."""

    def __init__(self, specs: Mapping[str, KindSpec], options: Mapping[str, Any]) -> None:
        options = dict(options)
        self._specs = specs
        self.kind: str | None = options.pop("kind", None)
        self.queue: str | None = options.pop("queue", None)
        self.priority: int = options.pop("priority", 2)
        self.max_attempts: int = options.pop("max_attempts", 25)
        self.run_at: datetime | None = options.pop("run_at", None)
        tags = options.pop("tags", ())
        metadata = options.pop("metadata", None)
        self.unique_key: str | Callable[[Any], str] | None = options.pop("unique_key", None)
        states = options.pop("unique_states", None)
        if options:
            raise AwaError(f"Unknown insert option(s): {', '.join(sorted(options))}.")
        if self.kind is not None:
            check_stored_name(self.kind, "Kind")
        if self.queue is not None:
            check_stored_name(self.queue, "Queue")
        if not 1 <= self.priority <= 4:
            raise AwaError(f"Priority must be between 1 (highest) and 4, not {self.priority}.")
        if self.max_attempts < 1:
            raise AwaError(f"max_attempts must be at least 1, not {self.max_attempts}.")
        if self.run_at is not None and (
            not isinstance(self.run_at, datetime) or self.run_at.utcoffset() is None
        ):
            raise InvalidOption(
                "run_at must be a timezone-aware datetime (such as datetime.now(UTC) + "
                f"timedelta(minutes=5)), not a {_naive_or_type(self.run_at)}; nothing was inserted."
            )
        if self.unique_key is None and states is not None:
            raise InvalidOption("unique_states= needs a unique_key=; nothing was inserted.")
        self.states = unique.resolve_states(states) if self.unique_key is not None else ()
        self.payload = build_payload(**_stored_options(metadata, tags))
        self._by_type: dict[type, Resolved] = {}

    def resolve(self, args: Any) -> Resolved:
        """The kind, queue and declared args type for ``args``, once per args type."""
        resolved = self._by_type.get(type(args))
        if resolved is None:
            kind = self.kind
            if kind is None:
                if isinstance(args, dict):
                    raise UnknownKind("A job given as a dict needs kind=...")
                kind = check_stored_name(kind_of(type(args)), "Kind")
            spec = self._specs.get(kind)
            queue = self.queue or (spec.queue if spec else "default")
            resolved = (kind, queue, spec.args_type if spec else None)
            self._by_type[type(args)] = resolved
        return resolved

    def encode(self, args: Any) -> tuple[str, str, bytes]:
        """One job's kind, queue and args as JSON text, its args checked against its kind."""
        kind, queue, args_type = self.resolve(args)
        if args_type is not None and not isinstance(args, args_type):
            try:
                decode_value(args, args_type)
            except (JsonDecodeMismatch, TypeError) as exc:
                raise ArgsValidationError(
                    f"Args for kind {kind!r} do not match {args_type.__name__}: {exc}",
                    path=getattr(exc, "path", None),
                    rule=getattr(exc, "rule", None),
                ) from exc
        try:
            return kind, queue, to_json_text(args)
        except JsonConversionError as exc:
            raise ArgsValidationError(f"Args for kind {kind!r} cannot be stored: {exc}") from exc

    def job(self, args: Any) -> NewJob:
        """One job as ``NewJob`` (``KeyedJob`` with a unique key): staged follow-ups, periodic
        jobs and keyed inserts, which need the job whole."""
        kind, queue, args_json = self.encode(args)
        fields = (kind, queue, args_json, self.priority, self.max_attempts, self.run_at)
        if self.unique_key is None:
            return NewJob(*fields, self.payload)
        key = self.unique_key(args) if callable(self.unique_key) else self.unique_key
        check_stored_name(key, "Unique key")
        return KeyedJob(*fields, self.payload, key, self.states)
