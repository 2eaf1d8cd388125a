"""``snodo.log.WarningLimiter``: repeated records of one kind are rate-limited with the count of
what was suppressed (issue 12, item 9: one garbage line must not be one WARNING record). The clock
is injected, so no test sleeps."""

from __future__ import annotations

from typing import Any

from snodo.log import WarningLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_first_five_of_a_kind_pass_then_they_are_suppressed() -> None:
    clock = Clock()
    limiter = WarningLimiter(clock=clock)
    assert [limiter.admit("junk") for _ in range(5)] == [0, 0, 0, 0, 0]
    assert [limiter.admit("junk") for _ in range(100)] == [None] * 100


def test_after_the_interval_one_passes_with_the_suppressed_count() -> None:
    clock = Clock()
    limiter = WarningLimiter(burst=5, interval=10.0, clock=clock)
    for _ in range(5 + 42):
        limiter.admit("junk")
    clock.now += 9.99
    assert limiter.admit("junk") is None  # 43 suppressed now
    clock.now += 0.01
    assert limiter.admit("junk") == 43
    assert limiter.admit("junk") is None  # the next interval starts at the one that passed
    clock.now += 10.0
    assert limiter.admit("junk") == 1


def test_kinds_are_limited_separately() -> None:
    clock = Clock()
    limiter = WarningLimiter(burst=2, clock=clock)
    assert [limiter.admit("a") for _ in range(3)] == [0, 0, None]
    assert [limiter.admit("b") for _ in range(3)] == [0, 0, None]


def test_log_emits_what_passes_with_the_suppressed_count() -> None:
    clock = Clock()
    limiter = WarningLimiter(burst=1, interval=5.0, clock=clock)
    emitted: list[tuple[str, dict[str, Any]]] = []

    def emit(event: str, **fields: Any) -> None:
        emitted.append((event, fields))

    assert limiter.log(emit, "junk", "skipped a line", line=1) is True
    assert limiter.log(emit, "junk", "skipped a line", line=2) is False
    assert limiter.log(emit, "junk", "skipped a line", line=3) is False
    clock.now += 5.0
    assert limiter.log(emit, "junk", "skipped a line", line=4) is True
    assert emitted == [
        ("skipped a line", {"line": 1}),
        ("skipped a line", {"line": 4, "suppressed": 2}),
    ]


def test_summary_reports_each_suppressed_record_once() -> None:
    clock = Clock()
    limiter = WarningLimiter(burst=1, clock=clock)
    for _ in range(4):
        limiter.admit("a")
    limiter.admit("b")
    assert limiter.summary() == {"a": 3}
    assert limiter.summary() == {}
    limiter.admit("a")
    assert limiter.summary() == {"a": 1}
