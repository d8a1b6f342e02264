"""The package root is the public API: every error is exported, ``Client``'s methods have
signatures, and the list filter is one checked value."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import pydoc
from dataclasses import FrozenInstanceError, replace
from datetime import UTC, datetime

import pytest

import storage
from storage import AwaError, Client, InvalidFilter, JobState, ListFilter


def _subclasses(cls: type[AwaError]) -> list[type[AwaError]]:
    found: list[type[AwaError]] = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def test_every_error_the_engine_defines_is_exported_from_the_root() -> None:
    for module in pkgutil.walk_packages(storage.__path__, "storage."):
        importlib.import_module(module.name)  # every module's errors are defined
    errors: list[type[AwaError]] = [AwaError, *_subclasses(AwaError)]
    assert len(errors) > 20
    missing = [cls.__name__ for cls in errors if getattr(storage, cls.__name__, None) is not cls]
    assert missing == []
    assert all(cls.__name__ in storage.__all__ for cls in errors)


def test_client_methods_published_from_its_parts_read_as_methods() -> None:
    signature = inspect.signature(Client.browse)
    assert list(signature.parameters)[:2] == ["self", "where"]
    assert "limit" in signature.parameters
    assert Client.browse.__name__ == "browse"
    assert "one snapshot" in (Client.browse.__doc__ or "")
    retry_params = {"self", "job_id", "args", "actor", "reason"}
    assert inspect.signature(Client.retry_job).parameters.keys() == retry_params
    text = pydoc.plain(pydoc.render_doc(Client))
    assert "Delegated object" not in text
    assert "browse(self, where: 'ListFilter | None' = None, /, *" in text


def test_the_list_filter_is_checked_when_built_and_frozen() -> None:
    where = ListFilter.of(state="failed", kind="charge")
    assert where == ListFilter(JobState.FAILED, kind="charge")
    assert hash(where) == hash(ListFilter(JobState.FAILED, kind="charge"))
    with pytest.raises(FrozenInstanceError):
        where.kind = "other"  # type: ignore[misc]
    with pytest.raises(InvalidFilter, match="Unknown job state"):
        ListFilter.of(state="finished")
    with pytest.raises(InvalidFilter, match="contains"):
        ListFilter(search="a\x00b")
    with pytest.raises(InvalidFilter, match="aware datetime"):
        ListFilter(since=datetime(2026, 1, 1))  # noqa: DTZ001 - a naive moment, refused
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(InvalidFilter, match="time range is empty"):
        replace(where, since=moment, before=moment)  # a changed copy is checked too
    assert ListFilter.given(None, {"dlq": True}) == ListFilter(dlq=True)
    assert ListFilter.given(where, {}) is where
    with pytest.raises(InvalidFilter, match="not both"):
        ListFilter.given(where, {"kind": "x"})
