"""A hang guard for the step-rule tests: Python's ``re`` checks for signals while it backtracks, so an alarm stops
a catastrophic pattern and the test fails at once instead of holding the suite for hours."""
from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

HANG_S = 60  # far above what any of these operations needs; only a hang reaches it


class Hung(AssertionError):
    pass


@contextmanager
def _guard(seconds: int = HANG_S) -> Iterator[None]:
    def stop(signum: int, frame: object) -> None:
        raise Hung(f"still running after {seconds} s: the pattern or the scan is not linear")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def no_hang():
    return _guard
