"""Routing: priority first, then a weighted draw among channels of equal priority."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from parley.pipeline.route import Router
from parley.settings import ChannelSettings


def channel(name: str, priority: int = 0, weight: int = 1, **extra: Any) -> ChannelSettings:
    return ChannelSettings.model_validate(
        {
            "name": name,
            "base_url": f"http://{name}.internal/v1",
            "models": [{"name": "m", "upstream": f"{name}-model"}],
            "priority": priority,
            "weight": weight,
            **extra,
        }
    )


def order(router: Router) -> list[str]:
    return [route.target.channel for route in router.routes("m")]


def test_higher_priority_first_and_each_channel_once() -> None:
    router = Router([channel("low", 0), channel("high", 10), channel("mid", 5)], random.Random(1))
    assert order(router) == ["high", "mid", "low"]
    assert router.routes("m")[0].target.model == "high-model"


def test_an_unserved_model_has_no_route() -> None:
    assert list(Router([channel("a")], random.Random(1)).routes("other")) == []


def test_equal_priorities_are_drawn_by_weight() -> None:
    router = Router(
        [channel("big", weight=3), channel("small", weight=1), channel("backup", priority=-1)],
        random.Random(7),
    )
    firsts = Counter(order(router)[0] for _ in range(4000))
    assert set(firsts) == {"big", "small"}
    assert 0.70 < firsts["big"] / 4000 < 0.80  # 3 to 1
    assert all(order(router)[-1] == "backup" for _ in range(50))


def test_every_order_holds_every_channel_of_the_tier() -> None:
    router = Router([channel(name) for name in "abcd"], random.Random(3))
    orders = {tuple(order(router)) for _ in range(300)}
    assert all(sorted(found) == list("abcd") for found in orders)
    assert len(orders) > 12, "the order is drawn, not fixed"
