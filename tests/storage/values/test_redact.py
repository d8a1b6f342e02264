"""Passwords never leave the engine: every DSN form is masked, and a malformed DSN too."""

from __future__ import annotations

import pytest

from storage import ConfigError, redact_dsn, redact_secrets
from storage.db.pool import translate_errors

SECRET = "s3cret-Pw"


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        (f"postgresql://oncall:{SECRET}@db:5432/jobs", "postgresql://oncall:***@db:5432/jobs"),
        (f"postgres://oncall:{SECRET}@[::1]/jobs", "postgres://oncall:***@[::1]/jobs"),
        (
            f"postgresql://oncall@db/jobs?password={SECRET}",
            "postgresql://oncall@db/jobs?password=***",
        ),
        (
            f"postgresql://db/jobs?sslmode=require&password={SECRET}&port=5",
            "postgresql://db/jobs?sslmode=require&password=***&port=5",
        ),
        (
            f"host=db user=oncall password={SECRET} dbname=jobs",
            "host=db user=oncall password=*** dbname=jobs",
        ),
        (f"host=db password = '{SECRET} x' dbname=jobs", "host=db password = *** dbname=jobs"),
        (f"postgresql://oncall:{SECRET}@[::1/jobs", "postgresql://oncall:***@[::1/jobs"),
        ("postgresql://oncall:p%40ss@db/jobs", "postgresql://oncall:***@db/jobs"),
        ("postgresql://db/jobs", "postgresql://db/jobs"),
        (None, "(libpq environment)"),
    ],
)
def test_redact_dsn_masks_every_form(dsn: str | None, shown: str) -> None:
    assert redact_dsn(dsn) == shown


def test_redact_secrets_masks_literal_passwords_and_pgpassword() -> None:
    dsn = "postgresql://oncall:p%40ssw0rd@db/jobs"
    text = f"login for p@ssw0rd failed; env {SECRET}; dsn {dsn}"
    masked = redact_secrets(text, dsn, environ={"PGPASSWORD": SECRET})
    assert "p@ssw0rd" not in masked
    assert "p%40ssw0rd" not in masked
    assert SECRET not in masked
    assert "postgresql://oncall:***@db/jobs" in masked


def test_translated_errors_carry_no_password() -> None:
    dsn = f"postgresql://oncall:{SECRET}@[::1/jobs"
    with pytest.raises(ConfigError) as caught, translate_errors(dsn):
        raise ValueError(f"Invalid IPv6 URL in {dsn}")
    assert SECRET not in caught.value.message
    assert SECRET not in str(caught.value)
    assert "connection string is not valid" in caught.value.message
