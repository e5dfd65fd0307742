"""The wait between attempts at deleting a clone on its engine: the first wait, doubled
after each further failure, never past the longest."""

from __future__ import annotations

import pytest

from parley.domain.voices import deletion_delay


def test_the_wait_doubles_after_each_failure_up_to_the_longest() -> None:
    waits = [deletion_delay(attempts, 30.0, 3600.0) for attempts in range(1, 10)]
    assert waits == [30.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 3600.0, 3600.0]


@pytest.mark.parametrize("attempts", [0, 1])
def test_the_first_wait_is_never_past_the_longest(attempts: int) -> None:
    assert deletion_delay(attempts, 30.0, 10.0) == 10.0


def test_a_huge_count_of_attempts_stays_at_the_longest() -> None:
    assert deletion_delay(10**9, 0.3, 0.6) == 0.6
