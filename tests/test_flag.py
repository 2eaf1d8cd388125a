"""snodo.flag.Flag: the one-way event every connection holds a few of."""

from __future__ import annotations

import threading

from snodo.flag import Flag


def test_a_set_flag_is_seen_without_waiting() -> None:
    flag = Flag()
    assert not flag.is_set()
    flag.set()
    assert flag.is_set()
    assert flag.wait(0)


def test_wait_times_out_on_an_unset_flag() -> None:
    flag = Flag()
    assert flag.wait(0.01) is False
    assert not flag.is_set()


def test_a_waiter_is_woken_by_set_from_another_thread() -> None:
    flag = Flag()
    waiting = threading.Event()
    woke: list[bool] = []

    def waiter() -> None:
        waiting.set()
        woke.append(flag.wait(10.0))

    thread = threading.Thread(target=waiter)
    thread.start()
    assert waiting.wait(10.0)
    flag.set()
    thread.join(10.0)
    assert woke == [True]


def test_many_waiters_all_wake_and_later_waits_return_at_once() -> None:
    flag = Flag()
    results: list[bool] = []
    lock = threading.Lock()
    barrier = threading.Barrier(9)

    def waiter() -> None:
        barrier.wait(10.0)
        outcome = flag.wait(10.0)
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=waiter) for _ in range(8)]
    for thread in threads:
        thread.start()
    barrier.wait(10.0)
    flag.set()
    for thread in threads:
        thread.join(10.0)
    assert results == [True] * 8
    assert flag.wait(0) is True
