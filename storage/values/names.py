"""The one name rule: queue-storage schema names, and the kind and queue names PostgreSQL stores.

Schema names are interpolated into SQL and into names derived from them, so only a lower-case
unquoted identifier passes, and only one short enough that every derived name still fits in
PostgreSQL's identifier limit (63 bytes; longer names are silently truncated, so two schemas
would share a name, and ``pg_notify`` refuses a longer channel outright). The derived names are
the notification channels below (``'awa_callback_' || schema``, ``'awa_cancel_' || schema``,
``'awa_ready_' || schema``);
sequences, partitions and indexes live inside the schema and advisory locks use
``hashtext(schema)``, so none of those grows with the name. The longest derived name is the
callback channel, hence ``SCHEMA_NAME_MAX_LENGTH = 63 - len("awa_callback_") = 50``.
The SQL installer applies the same rule (``awa.check_queue_storage_schema_name``, migration
v003); ``tests/storage/values/test_names.py`` holds the two to each other.

Kind and queue names are stored as text: PostgreSQL cannot store a NUL character, and a lone
surrogate has no UTF-8 encoding, so both are refused before anything is sent, as is an empty
name.
"""

from __future__ import annotations

import re

from storage.values.errors import InvalidName

IDENTIFIER_MAX_BYTES = 63  # NAMEDATALEN - 1
CHANNEL_PREFIXES = {"callback": "awa_callback_", "cancel": "awa_cancel_", "ready": "awa_ready_"}
SCHEMA_NAME_MAX_LENGTH = IDENTIFIER_MAX_BYTES - max(map(len, CHANNEL_PREFIXES.values()))
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]*")  # used with fullmatch: no trailing newline


def check_schema_name(schema: str) -> str:
    """``schema`` if it is a queue-storage schema name every derived name can be built from."""
    if not isinstance(schema, str) or _SCHEMA_NAME.fullmatch(schema) is None:
        raise InvalidName(
            f"Schema name {schema!r} is not allowed: use lower-case letters, digits and "
            "underscores, starting with a letter or an underscore."
        )
    if len(schema) > SCHEMA_NAME_MAX_LENGTH:
        raise InvalidName(
            f"Schema name {schema!r} is {len(schema)} characters long; at most "
            f"{SCHEMA_NAME_MAX_LENGTH} are allowed, so that its notification channels "
            f"({CHANNEL_PREFIXES['callback']}<schema>) fit PostgreSQL's 63-byte names."
        )
    if schema.startswith("pg_"):
        raise InvalidName(
            f"Schema name {schema!r} is not allowed: PostgreSQL reserves names starting with pg_."
        )
    return schema


def channel(name: str, schema: str) -> str:
    """The notification channel ``name`` ("callback", "cancel", "ready") of a schema."""
    return CHANNEL_PREFIXES[name] + schema


def unstorable(value: str) -> str | None:
    """Why PostgreSQL cannot store ``value`` as text (a NUL, a lone surrogate), or None."""
    nul = value.find("\x00")
    if nul >= 0:
        return f"a NUL character at position {nul}"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate at position {exc.start}, which has no UTF-8 encoding"
    return None


def check_stored_name(value: str, what: str) -> str:
    """``value`` if PostgreSQL can store it as text; ``what`` says which name it is ("Kind")."""
    if not isinstance(value, str):
        raise InvalidName(f"{what} name must be a string, not {type(value).__name__}.")
    if not value:  # '' would be stored, and then match nothing anybody meant
        raise InvalidName(f"{what} name must not be empty.")
    reason = unstorable(value)
    if reason is not None:
        raise InvalidName(f"{what} name {value!r} cannot be stored: it contains {reason}.")
    return value
