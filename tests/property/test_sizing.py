"""The runtime's sizing rule (``storage.runtime.sizing``) as pure decisions.

A claim never asks for more than the free slots or the claim cap; the limit never leaves
``[floor, ceiling]``; it doubles after a full claim while the loop is prompt, halves when the
loop lags, and otherwise holds. Simulated loops show where it settles: at the ceiling when each
job costs the loop microseconds, at the floor when each blocks it for milliseconds.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import ConfigError
from storage.runtime.sizing import (
    AUTO_CEILING,
    AUTO_CLAIM,
    FLOOR,
    LAG_GROW,
    LAG_SHRINK,
    LagSeen,
    Sizing,
)

SETTINGS = settings(max_examples=300, deadline=None)
sizings = st.builds(
    Sizing,
    ceiling=st.integers(1, 4_096),
    claim_cap=st.integers(1, 4_096),
    threshold=st.none() | st.integers(1, 4_096),
)
lags = st.none() | st.floats(0, 10, allow_nan=False)


@SETTINGS
@given(sizings, st.integers(1, 4_096), st.integers(0, 5_000))
def test_a_claim_never_exceeds_the_free_slots_or_the_claim_cap(
    sizing: Sizing, limit: int, held: int
) -> None:
    want = sizing.to_claim(limit, held)
    assert 0 <= want <= max(0, limit - held)
    assert want <= sizing.claim_cap


@SETTINGS
@given(sizings, st.integers(1, 4_096))
def test_an_idle_runtime_always_claims(sizing: Sizing, limit: int) -> None:
    assert sizing.to_claim(limit, 0) == min(limit, sizing.claim_cap)


@SETTINGS
@given(sizings, st.integers(1, 8_192), st.booleans(), lags)
def test_the_limit_stays_between_the_floor_and_the_ceiling(
    sizing: Sizing, limit: int, filled: bool, lag: float | None
) -> None:
    assert 1 <= sizing.floor <= sizing.next_limit(limit, filled=filled, lag=lag) <= sizing.ceiling
    assert sizing.floor <= sizing.start <= sizing.ceiling


def test_the_limit_doubles_after_a_full_claim_while_the_loop_is_prompt() -> None:
    sizing = Sizing(ceiling=200, claim_cap=512)
    assert sizing.next_limit(64, filled=True, lag=LAG_GROW / 2) == 128
    assert sizing.next_limit(128, filled=True, lag=0.0) == 200  # capped


def test_the_limit_holds_on_a_short_claim_a_middling_lag_or_no_lag_seen() -> None:
    sizing = Sizing(ceiling=1_024, claim_cap=512)
    assert sizing.next_limit(64, filled=False, lag=0.0) == 64
    assert sizing.next_limit(64, filled=True, lag=None) == 64
    assert sizing.next_limit(64, filled=True, lag=(LAG_GROW + LAG_SHRINK) / 2) == 64


def test_the_limit_halves_when_the_loop_lags_even_after_a_full_claim() -> None:
    sizing = Sizing(ceiling=1_024, claim_cap=512)
    assert sizing.next_limit(512, filled=True, lag=LAG_SHRINK * 2) == 256
    assert sizing.next_limit(100, filled=False, lag=LAG_SHRINK * 2) == FLOOR
    assert Sizing(ceiling=8, claim_cap=8).next_limit(8, filled=True, lag=LAG_SHRINK * 2) == 8


def test_claims_wait_for_half_a_full_claim_to_be_free_unless_a_threshold_is_given() -> None:
    sizing = Sizing(ceiling=1_024, claim_cap=512)
    assert sizing.to_claim(1_024, 800) == 0  # 224 free, under half of a 512 claim
    assert sizing.to_claim(1_024, 768) == 256
    assert sizing.to_claim(1_024, 100) == 512
    assert sizing.to_claim(64, 40) == 0  # 24 free, under half of the limit
    assert Sizing(1_024, 512, threshold=10).to_claim(1_024, 1_014) == 10


def test_defaults_start_at_the_floor_and_an_explicit_cap_starts_at_itself() -> None:
    auto = Sizing.of(None, None, None)
    assert (auto.ceiling, auto.claim_cap, auto.start) == (AUTO_CEILING, AUTO_CLAIM, FLOOR)
    capped = Sizing.of(8, 3, None)
    assert (capped.ceiling, capped.claim_cap, capped.floor, capped.start) == (8, 3, 8, 8)
    big = Sizing.of(200, None, None)
    assert (big.floor, big.start) == (FLOOR, 200)


@pytest.mark.parametrize("value", [0, -1, 2.5, True, "8"])
def test_a_cap_must_be_a_whole_number_of_at_least_one(value: object) -> None:
    with pytest.raises(ConfigError, match="concurrency must be a whole number"):
        Sizing.of(value, None, None)  # type: ignore[arg-type]


def _settle(sizing: Sizing, loop_seconds_per_job: float, claims: int = 40) -> int:
    """The limit after ``claims`` full claims, each followed by a loop lag of one pass over
    the jobs held (every job costs the loop ``loop_seconds_per_job`` in one go)."""
    limit = sizing.start
    for _ in range(claims):
        limit = sizing.next_limit(limit, filled=True, lag=limit * loop_seconds_per_job)
    return limit


def test_fast_handlers_take_the_limit_to_the_ceiling() -> None:
    assert _settle(Sizing.of(None, None, None), 30e-6) == AUTO_CEILING


@pytest.mark.parametrize("cpu_seconds", [0.005, 0.05, 1.0])
def test_blocking_handlers_bring_the_limit_down_to_the_floor(cpu_seconds: float) -> None:
    assert _settle(Sizing.of(None, None, None), cpu_seconds) == FLOOR
    assert _settle(Sizing.of(512, None, None), cpu_seconds) == FLOOR


def test_a_middling_handler_settles_between_floor_and_ceiling() -> None:
    limit = _settle(Sizing.of(None, None, None), 0.0005)  # 0.5 ms of loop per job
    assert FLOOR < limit < AUTO_CEILING
    assert limit * 0.0005 <= LAG_SHRINK


def test_a_claim_sees_the_worst_reading_since_the_last_or_else_the_latest() -> None:
    seen = LagSeen()
    assert seen.take() is None  # no reading yet: nothing says the loop is prompt
    seen.record(0.001)
    seen.record(0.3)
    seen.record(0.002)
    assert seen.take() == 0.3  # the worst since the previous claim
    assert seen.take() == 0.002  # no reading between two claims: the latest stands
    seen.record(0.01)
    assert seen.take() == 0.01
