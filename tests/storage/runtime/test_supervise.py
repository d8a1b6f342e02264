"""The supervisor's loops (``storage.runtime.supervise``) during a stop: a step that fails
after ``stop()`` ends its loop at once, logged as such, without a backoff wait or a retry (a
stop waits for the maintenance loop's pass, ``RuntimeLoop.stop``)."""

from __future__ import annotations

import logging

import pytest

from storage.runtime.supervise import Backoff, Supervisor


async def test_a_step_failing_after_the_stop_is_not_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    supervisor = Supervisor(lambda _reason: None, backoff=Backoff(base=0.001, cap=0.001))
    calls = 0

    async def step() -> None:
        nonlocal calls
        calls += 1
        supervisor.stop()
        raise OSError("the server went away")

    with caplog.at_level(logging.WARNING, logger="storage"):
        await supervisor.spawn("maintenance", step)
    assert calls == 1
    assert supervisor.failed is None
    messages = [record.getMessage() for record in caplog.records]
    assert messages == ["maintenance loop failed while stopping (OSError)"]
