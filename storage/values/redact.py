"""Passwords out of everything a person or a log sees: DSNs, error messages, titles.

``redact_dsn`` masks the password of a DSN in every form libpq and asyncpg take
(``user:pass@`` in a URL, ``?password=`` in its query, ``password=`` in a key/value string);
``redact_secrets`` masks those forms anywhere in a text, and also the literal password of a
given DSN and of ``PGPASSWORD`` wherever it occurs (driver messages sometimes echo them).
Neither ever raises: a DSN too malformed to parse is still masked, by patterns, not a parser.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import unquote

MASK = "***"
MIN_LITERAL = 4

# scheme://[userinfo@]rest: the userinfo ends at the last "@" before the path, query or fragment.
_URL = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<netloc>[^/?#\s]*)")
# ?password=... / &sslpassword=... in a URL's query.
_QUERY = re.compile(r"(?i)(?P<key>[?&](?:ssl)?password=)[^&#\s]*")
# password=... / password = '...' in a key/value connection string.
_KEY_VALUE = re.compile(
    r"(?i)(?P<key>(?<![?&\w])(?:ssl)?password\s*=\s*)(?:'(?:[^'\\]|\\.)*'?|[^\s'&]+)"
)


def _mask_netloc(match: re.Match[str]) -> str:
    netloc = match["netloc"]
    at = netloc.rfind("@")
    if at < 0:
        return match.group(0)
    userinfo = netloc[:at]
    colon = userinfo.find(":")
    if colon < 0:
        return match.group(0)
    return f"{match['scheme']}{userinfo[:colon]}:{MASK}{netloc[at:]}"


def _mask_patterns(text: str) -> str:
    text = _URL.sub(_mask_netloc, text)
    text = _QUERY.sub(lambda m: m["key"] + MASK, text)
    return _KEY_VALUE.sub(lambda m: m["key"] + MASK, text)


def dsn_passwords(dsn: str | None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The literal passwords ``dsn`` and ``PGPASSWORD`` carry (raw and URL-decoded)."""
    env = os.environ if environ is None else environ
    found: list[str] = []
    if env.get("PGPASSWORD"):
        found.append(env["PGPASSWORD"])
    if dsn:
        for match in _URL.finditer(dsn):
            userinfo = match["netloc"][: max(match["netloc"].rfind("@"), 0)]
            if ":" in userinfo:
                found.append(userinfo.split(":", 1)[1])
        for pattern in (_QUERY, _KEY_VALUE):
            for match in pattern.finditer(dsn):
                found.append(match.group(0)[len(match["key"]) :].strip("'"))
    decoded = [unquote(secret) for secret in found]
    # Longest first, so a password that contains another is masked whole.
    return sorted({s for s in found + decoded if s}, key=len, reverse=True)


def redact_secrets(
    text: str, dsn: str | None = None, environ: Mapping[str, str] | None = None
) -> str:
    """``text`` with every DSN password form masked, and the passwords of ``dsn`` and
    ``PGPASSWORD`` masked wherever they appear literally (those of at least
    ``MIN_LITERAL`` characters: a shorter one would mask ordinary words)."""
    text = _mask_patterns(text)
    for secret in dsn_passwords(dsn, environ):
        if len(secret) >= MIN_LITERAL and secret != MASK:
            text = text.replace(secret, MASK)
    return text


def redact_dsn(dsn: str | None) -> str:
    """The DSN with any password replaced, for messages and the console's title bar."""
    if not dsn:
        return "(libpq environment)"
    return _mask_patterns(dsn)
