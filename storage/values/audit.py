"""The audit trail's values: who did an operator write and why (``Audit``), and one recorded
entry as a read returns it (``AuditEntry``).

The actor is a name a person recognises: the console passes ``--actor`` (default
``default_actor()``, the OS user at the host), the HTTP API the caller's token name, Python
code ``actor=`` (the same default). Neither an actor nor a reason may hold text PostgreSQL
cannot store, and both are bounded, so an entry stays small.
"""

from __future__ import annotations

import getpass
import os
import socket
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from storage.values.errors import InvalidOption
from storage.values.names import unstorable

ENQUEUE = "enqueue"
"""The action of an operator's enqueue of a new job (``Client.enqueue_job``)."""
ARGS_DIGEST_ACTIONS = frozenset({ENQUEUE})
"""Actions whose entry carries the size and sha256 of the args they wrote (never the text)."""
MAX_ACTOR_CHARS = 200
MAX_REASON_CHARS = 1000


def default_actor() -> str:
    """``user@host`` of this process (the OS login name, or its uid when it has none)."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry (a bare container)
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def _checked(what: str, value: object, bound: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidOption(f"The {what} must be non-empty text; nothing was changed.")
    if len(value) > bound:
        raise InvalidOption(
            f"The {what} is {len(value):,} characters; at most {bound:,} are kept. "
            "Nothing was changed."
        )
    why = unstorable(value)
    if why is not None:
        raise InvalidOption(f"The {what} contains {why}, so it cannot be stored.")
    return value.strip()


@dataclass(frozen=True)
class Audit:
    """Who asks for a write, and the optional reason they gave (checked when built)."""

    actor: str
    reason: str | None = None

    @classmethod
    def of(cls, actor: str | None = None, reason: str | None = None) -> Audit:
        """``actor`` (None: ``default_actor()``) and ``reason`` (None or blank: none)."""
        name = _checked("actor", default_actor() if actor is None else actor, MAX_ACTOR_CHARS)
        if reason is None or (isinstance(reason, str) and not reason.strip()):
            return cls(name, None)
        return cls(name, _checked("reason", reason, MAX_REASON_CHARS))


def check_actor(actor: str) -> str:
    """``actor`` as the trail keeps it, or ``InvalidOption`` saying why it cannot be kept."""
    return Audit.of(actor).actor


class AuditEntry(BaseModel):
    """One operator write, as recorded in the same transaction as the write.

    ``job_ids`` are the jobs acted on (empty for a queue action, or a bulk action by filter,
    whose ``filter`` says what it matched and ``count`` how many jobs it changed). A manual
    completion carries its output's size in bytes and sha256, never its text; an enqueue its
    args' (``args_size``, ``args_sha256``), never their text; ``original_args`` is set only by
    an edit-and-retry (the args the job had before)."""

    model_config = ConfigDict(frozen=True)

    id: int
    at: datetime
    actor: str
    action: str
    job_ids: list[int] = Field(default_factory=list)
    filter: str | None = None
    count: int = 1
    queue: str | None = None
    reason: str | None = None
    output_size: int | None = None
    output_sha256: str | None = None
    original_args: Any = None
    args_size: int | None = None
    args_sha256: str | None = None

    @classmethod
    def from_stored(cls, values: dict[str, Any]) -> AuditEntry:
        """An entry from its stored columns: an action of ``ARGS_DIGEST_ACTIONS`` keeps its
        args' size and digest in the output columns (the only ones v009 has), named here for
        what they are."""
        if values.get("action") in ARGS_DIGEST_ACTIONS:
            values = dict(values)
            values["args_size"] = values.pop("output_size", None)
            values["args_sha256"] = values.pop("output_sha256", None)
        return cls(**values)
