"""The ready row's payload ``{metadata, tags, errors, progress}`` and its error entries.

Empty parts are omitted, so a plain job carries no payload at all (and stays on the compact
completion path). Error entries follow ADR-048: at most one entry, the latest to record one,
keeps an output; the row handed to a handler has every output stripped. An entry for a handler's
exception also keeps its traceback: frames only (``file:line in function``), innermost last, at
most ``MAX_TRACEBACK_BYTES`` of JSON; never locals, args or outputs.
"""

from __future__ import annotations

import os
import sys
import traceback as tb_module
from datetime import datetime
from types import TracebackType
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
    traceback: list[str] | None = None,
) -> dict[str, Any]:
    entry: dict[str, Any] = {"error": error, "attempt": attempt, "at": at.isoformat()}
    if terminal:
        entry["terminal"] = True
    if traceback:
        entry["traceback"] = traceback
    if output_text is not None:
        entry["output"] = orjson.loads(output_text)
    return entry


MAX_TRACEBACK_BYTES = 2048
_MAX_FRAME_CHARS = 240
_ELISION_RESERVE = 32  # room for the "... N earlier frames" line


def traceback_frames(tb: TracebackType | None) -> list[str]:
    """The frames of ``tb`` as ``file:line in function``, outermost first, paths relative to
    the import root that holds them. Bounded: the innermost frames (where the error was raised)
    are kept and, when the list would pass ``MAX_TRACEBACK_BYTES`` as JSON, the outer ones give
    way to one ``... N earlier frames`` line. Reads no locals and no source lines."""
    frames = [
        _frame_text(frame.f_code.co_filename, lineno, frame.f_code.co_qualname)
        for frame, lineno in tb_module.walk_tb(tb)
    ]
    kept: list[str] = []
    size = 2  # the brackets
    for text in reversed(frames):
        cost = len(orjson.dumps(text)) + 1
        if size + cost + _ELISION_RESERVE > MAX_TRACEBACK_BYTES:
            kept.append(f"... {len(frames) - len(kept)} earlier frames")
            break
        kept.append(text)
        size += cost
    kept.reverse()
    return kept


def _frame_text(filename: str, lineno: int | None, name: str) -> str:
    # ``walk_tb`` hands the frame only to read its code's name and file: no locals are read.
    text = f"{_short_path(filename)}:{lineno if lineno is not None else '?'} in {name}"
    if len(text) > _MAX_FRAME_CHARS:
        text = "..." + text[-(_MAX_FRAME_CHARS - 3) :]
    return text


def _short_path(filename: str) -> str:
    """``filename`` relative to the longest ``sys.path`` entry holding it (a module's path as
    it is imported: ``storage/runtime/executor.py``, ``asyncpg/connection.py``). A file under
    no import root (a script run by path) keeps only its name: an absolute path tells where
    someone's home is, not where the code is."""
    best = ""
    for entry in sys.path:
        root = (entry or os.getcwd()).rstrip("/") + "/"  # "" is the current directory
        if len(root) > len(best) and filename.startswith(root):
            best = root
    if best:
        return filename[len(best) :]
    return os.path.basename(filename) if os.path.isabs(filename) else filename


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
