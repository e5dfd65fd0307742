"""The breaker's rules, on a clock the test moves: what opens it, what it skips, the
probe, the error rate, and the route tried when every one is shut."""

from __future__ import annotations

import random
from typing import Any

import pytest

from parley.errors import UpstreamError, UpstreamRefused, UpstreamTimeout, UpstreamUnreachable
from parley.pipeline.retries import RetryBudget, Tries
from parley.pipeline.route import Route, Router
from parley.runtime.breaker import Breakers
from parley.runtime.circuit import State, Transition
from parley.settings import ChannelSettings, ConfigError, RoutingSettings, load_settings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def channels(**breaker: Any) -> list[ChannelSettings]:
    return [
        ChannelSettings.model_validate(
            {
                "name": name,
                "base_url": f"http://{name}.example/v1",
                "priority": priority,
                "models": ["m", "n"],
                "breaker": breaker,
            }
        )
        for name, priority in (("a", 1), ("b", 0))
    ]


def setup(**breaker: Any) -> tuple[Breakers, Router, Clock, list[Transition]]:
    clock = Clock()
    found = channels(**breaker)
    breakers = Breakers(found, clock)
    seen: list[Transition] = []
    breakers.transitions.append(seen.append)
    return breakers, Router(found, random.Random(1)), clock, seen


def names(routes: Any) -> list[str]:
    return [route.target.channel for route in routes]


def refused(status: int, retry_after: float | None = None) -> UpstreamRefused:
    return UpstreamRefused(
        "failed",
        upstream_status=status,
        retryable=status >= 500 or status == 429,
        retry_after=retry_after,
    )


def route_of(router: Router, channel: str, model: str = "m") -> Route:
    return next(r for r in router.routes(model) if r.target.channel == channel)


def test_five_failures_in_a_row_open_a_breaker_and_skip_its_channel() -> None:
    breakers, router, _, seen = setup()
    a = route_of(router, "a")
    for _ in range(4):
        breakers.failed(a, UpstreamUnreachable("down"))
    assert names(breakers.arrange(router.routes("m"))) == ["a", "b"]
    breakers.failed(a, UpstreamUnreachable("down"))
    assert names(breakers.arrange(router.routes("m"))) == ["b"]
    assert names(breakers.arrange(router.routes("n"))) == ["b"]  # the whole channel
    assert [(t.key, t.state) for t in seen] == [("a", State.OPEN)]


def test_failures_of_calls_under_way_when_it_opened_change_nothing() -> None:
    breakers, router, clock, seen = setup(failures=1, cooldown_seconds=10)
    a = route_of(router, "a")
    breakers.failed(a, UpstreamUnreachable("down"))
    clock.now += 5
    for _ in range(10):
        breakers.failed(a, UpstreamUnreachable("down"))
    assert [(t.state, t.until) for t in seen] == [(State.OPEN, 1010.0)]


def test_a_success_resets_the_run_of_failures() -> None:
    breakers, router, _, _ = setup()
    a = route_of(router, "a")
    for _ in range(4):
        breakers.failed(a, refused(503))
    breakers.succeeded(a)
    for _ in range(4):
        breakers.failed(a, refused(503))
    assert names(breakers.arrange(router.routes("m"))) == ["a", "b"]


def test_a_model_failing_on_its_own_leaves_the_channels_other_models() -> None:
    breakers, router, _, _ = setup(failures=2)
    for _ in range(2):
        breakers.failed(route_of(router, "a", "m"), refused(500))
    assert names(breakers.arrange(router.routes("m"))) == ["b"]
    assert names(breakers.arrange(router.routes("n"))) == ["a", "b"]


@pytest.mark.parametrize("status", [400, 404, 413, 422])
def test_the_callers_own_4xx_is_never_a_failure(status: int) -> None:
    breakers, router, _, seen = setup(failures=1)
    breakers.failed(route_of(router, "a"), refused(status))
    assert seen == []


def test_the_error_rate_over_the_window_opens_it() -> None:
    breakers, router, _, seen = setup(failures=5, window=10, min_calls=10, error_rate=0.5)
    a = route_of(router, "a")
    for _ in range(6):  # the window starts at the first failure
        breakers.succeeded(a)
        breakers.failed(a, refused(502))  # never two in a row
    assert [t.state for t in seen] == [State.OPEN]


def test_after_the_cool_down_one_probe_goes_first_and_its_outcome_decides() -> None:
    breakers, router, clock, seen = setup(failures=1, cooldown_seconds=10)
    a = route_of(router, "a")
    breakers.failed(a, UpstreamTimeout("slow"))
    clock.now += 9
    assert names(breakers.arrange(router.routes("m"))) == ["b"]
    clock.now += 1
    assert names(breakers.arrange(router.routes("m"))) == ["a", "b"]  # the probe, first
    assert names(breakers.arrange(router.routes("m"))) == ["b"]  # one probe at a time
    breakers.failed(a, UpstreamTimeout("slow"))
    assert seen[-1].state == State.OPEN
    clock.now += 10
    assert names(breakers.arrange(router.routes("m"))) == ["a", "b"]
    breakers.succeeded(a)
    assert [t.state for t in seen] == [
        State.OPEN,
        State.HALF_OPEN,
        State.OPEN,
        State.HALF_OPEN,
        State.CLOSED,
    ]
    assert names(breakers.arrange(router.routes("m"))) == ["a", "b"]


def test_a_probe_whose_caller_left_lets_another_through_after_its_lease() -> None:
    breakers, router, clock, _ = setup(failures=1, cooldown_seconds=1)
    breakers.failed(route_of(router, "a"), UpstreamUnreachable("down"))
    clock.now += 1
    assert names(breakers.arrange(router.routes("m"))) == ["a", "b"]
    clock.now += 10 + 60  # connect + first_token: the lease
    assert names(breakers.arrange(router.routes("m"))) == ["a", "b"]


def test_retry_after_is_the_cool_down_up_to_its_cap() -> None:
    breakers, router, clock, seen = setup(failures=1, max_cooldown_seconds=120)
    breakers.failed(route_of(router, "a"), refused(429, retry_after=30))
    assert seen[-1].until == clock.now + 30
    breakers.failed(route_of(router, "b"), refused(429, retry_after=3600))
    assert seen[-1].until == clock.now + 120


def test_when_every_route_is_shut_the_least_recently_failed_is_tried() -> None:
    breakers, router, clock, _ = setup(failures=1)
    breakers.failed(route_of(router, "b"), UpstreamUnreachable("down"))
    clock.now += 1
    breakers.failed(route_of(router, "a"), UpstreamUnreachable("down"))
    routes = router.routes("m")
    assert breakers.arrange(routes) == []
    assert breakers.least_recently_failed(routes).target.channel == "b"


def test_another_instances_transitions_are_applied_once() -> None:
    breakers, router, clock, seen = setup()
    breakers.apply("a", State.OPEN, clock.now + 5, "down elsewhere")
    breakers.apply("a", State.OPEN, clock.now + 5, "down elsewhere")
    assert names(breakers.arrange(router.routes("m"))) == ["b"]
    breakers.apply("a", State.CLOSED, 0.0, "")
    assert names(breakers.arrange(router.routes("m"))) == ["a", "b"]
    breakers.apply("a", State.OPEN, clock.now - 1, "stale")  # cooled down already
    assert [(t.state, t.remote) for t in seen] == [(State.OPEN, True), (State.CLOSED, True)]


def test_a_breaker_can_be_turned_off() -> None:
    breakers, router, _, seen = setup(enabled=False, failures=1)
    breakers.failed(route_of(router, "a"), UpstreamError("broken"))
    assert seen == [] and names(breakers.arrange(router.routes("m"))) == ["a", "b"]


def test_the_retry_budget_allows_a_share_of_the_calls() -> None:
    clock = Clock()
    budget = RetryBudget(
        RoutingSettings(retry_ratio=0.1, min_retries=2, retry_window_seconds=10), clock
    )
    allowed = 0
    for _ in range(100):
        budget.call()
        tries = Tries(4, budget)
        allowed += sum(tries.another() for _ in range(3))
    assert allowed == 2 + 10
    clock.now += 20
    assert Tries(4, budget).another()


def test_a_retry_after_no_connection_is_not_taken_from_the_budget() -> None:
    budget = RetryBudget(RoutingSettings(retry_ratio=0, min_retries=0))
    tries = Tries(3, budget)
    assert tries.another(never_left=True) and tries.another(never_left=True)
    assert not tries.another(never_left=True)  # still bounded by max_attempts
    assert not Tries(3, budget).another()
    assert (budget.granted, budget.refused) == (0, 1)


def test_a_call_makes_at_most_max_attempts() -> None:
    tries = Tries(3)
    assert [tries.another() for _ in range(4)] == [True, True, False, False]


@pytest.mark.parametrize(
    ("fallbacks", "problem"),
    [
        (["nowhere"], "unknown `nowhere`"),
        (["m"], "the model itself"),
        (["e"], "of kind embedding, not chat"),
    ],
)
def test_fallbacks_must_name_other_models_of_the_kind(
    tmp_path: Any, fallbacks: list[str], problem: str
) -> None:
    config = tmp_path / "parley.yaml"
    config.write_text(
        f"models:\n  - {{name: m, fallbacks: {fallbacks}}}\n  - {{name: e, kind: embedding}}\n"
    )
    with pytest.raises(ConfigError, match=problem):
        load_settings(config, {})


def test_leased_probes_wait_for_the_lease_and_the_outcome_spends_it() -> None:
    breakers, router, clock, _ = setup(failures=1, cooldown_seconds=10)
    breakers.leased = True  # shared through Redis: one probe across instances
    a = route_of(router, "a")
    breakers.failed(a, refused(503))
    clock.now += 10
    assert breakers.lease_wanted() == [], "no call wanted the probe yet"
    assert names(breakers.arrange(router.routes("m"))) == ["b"]  # no lease: skipped
    (wanted,) = breakers.lease_wanted()
    assert wanted.key == a.breaker_key
    breakers.grant(wanted.key, clock.now + 5)
    assert breakers.lease_wanted() == []
    assert names(breakers.arrange(router.routes("m"))) == ["a", "b"]  # the probe
    assert names(breakers.arrange(router.routes("m"))) == ["b"]  # one at a time
    breakers.failed(a, refused(503))  # the probe failed: open again, the lease spent
    assert wanted.state == State.OPEN and wanted.lease_until == 0.0
    clock.now += 10
    assert names(breakers.arrange(router.routes("m"))) == ["b"]


def test_unleased_probes_are_each_process_own() -> None:
    breakers, router, clock, _ = setup(failures=1, cooldown_seconds=10)
    a = route_of(router, "a")
    breakers.failed(a, refused(503))
    clock.now += 10
    assert names(breakers.arrange(router.routes("m"))) == ["a", "b"]
    assert breakers.lease_wanted() == []
