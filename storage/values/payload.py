"""The ready row's payload ``{metadata, tags, errors, progress}`` and its error entries.

Empty parts are omitted, so a plain job carries no payload at all (and stays on the compact
completion path). Error entries follow ADR-048: at most one entry, the latest to record one,
keeps an output; the row handed to a handler has every output stripped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson

Payload = dict[str, Any]


def build_payload(
    *,
    metadata: dict[str, Any] | None = None,
    tags: list[str] | tuple[str, ...] = (),
    errors: list[dict[str, Any]] | None = None,
    progress: Any = None,
) -> Payload | None:
    payload: Payload = {}
    if metadata:
        payload["metadata"] = metadata
    if tags:
        payload["tags"] = list(tags)
    if errors:
        payload["errors"] = errors
    if progress is not None:
        payload["progress"] = progress
    return payload or None


def errors_of(payload: Payload | None) -> list[dict[str, Any]]:
    return list((payload or {}).get("errors") or [])


def takes_general_path(payload: Payload | None, unique_key: str | None) -> bool:
    """Tags, custom metadata, error history or a unique key send a completion down the general
    path."""
    if unique_key is not None or not payload:
        return unique_key is not None
    return bool(payload.get("tags") or payload.get("metadata") or payload.get("errors"))


def error_entry(
    error: str,
    attempt: int,
    at: datetime,
    *,
    terminal: bool = False,
    output_text: str | None = None,
) -> dict[str, Any]:
    entry: dict[str, Any] = {"error": error, "attempt": attempt, "at": at.isoformat()}
    if terminal:
        entry["terminal"] = True
    if output_text is not None:
        entry["output"] = orjson.loads(output_text)
    return entry


def append_error(
    payload: Payload | None, entry: dict[str, Any], *, progress: Any = None
) -> Payload:
    """Append ``entry``; if it carries an output, strip ``output`` from every earlier entry."""
    new: Payload = dict(payload or {})
    errors = errors_of(payload)
    if "output" in entry:
        errors = [{k: v for k, v in e.items() if k != "output"} for e in errors]
    errors.append(entry)
    new["errors"] = errors
    if progress is not None:
        new["progress"] = progress
    return new


def with_progress(payload: Payload | None, progress: Any) -> Payload | None:
    if progress is None:
        return payload
    return {**(payload or {}), "progress": progress}


def dispatch_errors(payload: Payload | None) -> list[dict[str, Any]]:
    """Error history as a handler sees it: failed outputs are reports, not checkpoints."""
    return [{k: v for k, v in e.items() if k != "output"} for e in errors_of(payload)]
