"""snodo.supervision.restarts: OTP restart types, backoff with full jitter, restart intensity."""

from __future__ import annotations

import pytest

from snodo.supervision.restarts import (
    Backoff,
    GiveUp,
    RestartAfter,
    RestartPolicy,
    decide,
    over_intensity,
    restarts_in_window,
)


def test_temporary_never_restarts() -> None:
    assert decide(RestartPolicy("temporary"), (), True, 0.0, 0.5) == GiveUp("temporary", 0)


def test_transient_restarts_only_after_an_abnormal_end() -> None:
    policy = RestartPolicy("transient")
    assert decide(policy, (), False, 0.0, 0.5) == GiveUp("normal", 0)
    assert isinstance(decide(policy, (), True, 0.0, 0.5), RestartAfter)


def test_permanent_restarts_after_any_end() -> None:
    assert isinstance(decide(RestartPolicy("permanent"), (), False, 0.0, 0.5), RestartAfter)


def test_the_backoff_grows_by_its_factor_up_to_its_cap_and_jitter_scales_it() -> None:
    backoff = Backoff(initial=0.1, factor=2.0, cap=0.5, jitter=False)
    assert [backoff.delay(n, 0.3) for n in range(1, 6)] == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5])
    jittered = Backoff(initial=0.1, factor=2.0, cap=0.5)
    assert jittered.delay(3, 0.25) == pytest.approx(0.1)
    assert jittered.delay(3, 0.0) == 0.0


def test_each_restart_is_recorded_and_the_attempt_counts_those_in_the_window() -> None:
    policy = RestartPolicy("transient", Backoff(jitter=False), max_restarts=3, restart_window=10.0)
    first = decide(policy, (), True, 100.0, 0.5)
    assert first == RestartAfter(0.1, 1, (100.0,))
    assert isinstance(first, RestartAfter)
    second = decide(policy, first.history, True, 101.0, 0.5)
    assert second == RestartAfter(0.2, 2, (100.0, 101.0))


def test_past_the_intensity_it_gives_up_and_old_restarts_leave_the_window() -> None:
    policy = RestartPolicy("transient", max_restarts=2, restart_window=10.0)
    history = (100.0, 105.0)
    assert decide(policy, history, True, 106.0, 0.5) == GiveUp("intensity", 2)
    later = decide(policy, history, True, 112.0, 0.5)  # 100.0 is more than 10 s ago
    assert isinstance(later, RestartAfter)
    assert later.history == (105.0, 112.0)
    assert restarts_in_window(history, 10.0, 112.0) == (105.0,)
    assert over_intensity(history, 2, 10.0, 106.0)
    assert not over_intensity(history, 2, 10.0, 112.0)


def test_zero_max_restarts_gives_up_at_the_first_end() -> None:
    assert decide(RestartPolicy("permanent", max_restarts=0), (), True, 0.0, 0.5) == GiveUp(
        "intensity", 0
    )


@pytest.mark.parametrize(
    "keywords",
    [
        {"restart": "sometimes"},
        {"max_restarts": -1},
        {"max_restarts": True},
        {"restart_window": 0},
        {"restart_window": "60"},
    ],
)
def test_a_bad_policy_is_refused(keywords: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        RestartPolicy(**keywords)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "keywords", [{"initial": -1.0}, {"factor": 0.5}, {"initial": 2.0, "cap": 1.0}]
)
def test_a_bad_backoff_is_refused(keywords: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**keywords)
