"""Named bearer tokens with a role, read by ``serve`` from ``--tokens FILE``, ``AWA_API_TOKENS``
and ``AWA_API_TOKEN`` (one unnamed write token, named ``api``).

A file is TOML (``.toml``) or JSON (anything else); ``AWA_API_TOKENS`` is the JSON form::

    [[token]]                         {"tokens": [
    name = "ci"                         {"name": "ci", "role": "write", "token": "..."},
    role = "write"                      {"name": "grafana", "role": "read", "sha256": "9f86..."}
    token = "..."                     ]}
    [[token]]
    name = "grafana"
    role = "read"
    sha256 = "9f86d081884c7d65..."    # hex sha256 of the token, so the file holds no secret

Only the sha256 of each token is kept in memory; a caller's token is hashed and compared with
every one (``hmac.compare_digest``, no early exit). A refusal names the entry by its position
and name, never its token.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson

API_TOKEN_NAME = "api"
TOKEN_VARIABLE = "AWA_API_TOKEN"
TOKENS_VARIABLE = "AWA_API_TOKENS"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@:-]{0,63}")
SHA256 = re.compile(r"[0-9a-f]{64}")


class Role(StrEnum):
    READ = "read"
    WRITE = "write"


class TokenFileError(ValueError):
    """The tokens cannot be read; the message says where and why, never a token."""


@dataclass(frozen=True)
class NamedToken:
    name: str
    role: Role
    digest: bytes
    """sha256 of the token."""


def digest_of(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def api_token(token: str) -> NamedToken:
    """``AWA_API_TOKEN``: one write token named ``api``."""
    return NamedToken(API_TOKEN_NAME, Role.WRITE, digest_of(token))


def read_file(path: Path) -> list[NamedToken]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise TokenFileError(f"Cannot read the tokens file {path}: {why}.") from None
    return parse(text, f"the tokens file {path}", toml=path.suffix == ".toml")


def parse(text: str, where: str, *, toml: bool) -> list[NamedToken]:
    """The tokens in ``text`` (TOML with ``[[token]]`` tables, or JSON ``{"tokens": [...]}``
    or a bare list); ``where`` names the source in refusals."""
    try:
        data: Any = tomllib.loads(text) if toml else orjson.loads(text)
    except (tomllib.TOMLDecodeError, orjson.JSONDecodeError) as exc:
        # Both parsers name a line and column, never the text there.
        raise TokenFileError(f"{where} is not valid {'TOML' if toml else 'JSON'}: {exc}.") from None
    entries = data.get("token", data.get("tokens")) if isinstance(data, dict) else data
    if not isinstance(entries, list) or not entries:
        shape = "[[token]] tables" if toml else 'a list or {"tokens": [...]}'
        raise TokenFileError(f"{where} holds no tokens: write {shape} with name, role, token.")
    return [_entry(item, f"{where}, token {i + 1}") for i, item in enumerate(entries)]


def _entry(item: Any, where: str) -> NamedToken:
    if not isinstance(item, dict):
        raise TokenFileError(f"{where} is not a table of name, role and token or sha256.")
    unknown = sorted(set(item) - {"name", "role", "token", "sha256"})
    if unknown:
        raise TokenFileError(f"{where} has unknown keys: {', '.join(map(str, unknown))}.")
    name = item.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise TokenFileError(
            f"{where} needs a name: 1 to 64 letters, digits or _.@:- (not starting with one)."
        )
    where = f"{where} ({name})"
    role = item.get("role")
    if role not in tuple(Role):
        raise TokenFileError(f"{where} needs a role: read or write.")
    token, sha = item.get("token"), item.get("sha256")
    if (token is None) == (sha is None):
        raise TokenFileError(f"{where} needs exactly one of token and sha256.")
    if token is not None:
        if not isinstance(token, str) or not token or not token.isprintable():
            raise TokenFileError(f"{where}: token must be non-empty printable text.")
        return NamedToken(name, Role(role), digest_of(token))
    if not isinstance(sha, str) or not SHA256.fullmatch(sha.lower()):
        raise TokenFileError(f"{where}: sha256 must be 64 hex digits (sha256sum of the token).")
    return NamedToken(name, Role(role), bytes.fromhex(sha))


def combined(*sources: list[NamedToken]) -> list[NamedToken]:
    """Every source's tokens; a name or a token given twice is refused (which one would the
    audit name?)."""
    tokens = [token for source in sources for token in source]
    names: set[str] = set()
    digests: dict[bytes, str] = {}
    for token in tokens:
        if token.name in names:
            raise TokenFileError(f"The token name {token.name} is given twice; names are unique.")
        if token.digest in digests:
            raise TokenFileError(
                f"The tokens {digests[token.digest]} and {token.name} are the same token; give "
                "each caller its own."
            )
        names.add(token.name)
        digests[token.digest] = token.name
    return tokens


def load(path: Path | None, environ: Mapping[str, str]) -> list[NamedToken]:
    """The tokens ``serve`` accepts: the file's, ``AWA_API_TOKENS``'s and ``AWA_API_TOKEN``
    (named ``api``), together; empty when none is given."""
    from_file = read_file(path) if path is not None else []
    listed = environ.get(TOKENS_VARIABLE) or None
    from_env = [] if listed is None else parse(listed, TOKENS_VARIABLE, toml=False)
    single = environ.get(TOKEN_VARIABLE) or None
    return combined(from_file, from_env, [] if single is None else [api_token(single)])
