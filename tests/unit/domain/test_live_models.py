"""The registry serves live models beside the config file's and switches a scheduled
price at its instant, by the clock alone (no refresh)."""

from __future__ import annotations

from parley.domain.models import LiveModel, ModelRegistry, ModelSpec
from parley.domain.pricing import Price

OLD, NEW = Price(input_per_1k=10), Price(input_per_1k=99)
AT = 1_800_000_000.0


def registry(now: list[float]) -> ModelRegistry:
    configured = ModelSpec("cfg", "chat", Price(), aliases=("cfg-alias",))
    return ModelRegistry([configured], {"LLM": "cfg"}, clock=lambda: now[0])


def test_a_scheduled_price_takes_effect_at_its_instant() -> None:
    now = [AT - 10]
    models = registry(now)
    live = ModelSpec("live", "chat", OLD, aliases=("quick",))
    models.use_live([LiveModel(live, ModelSpec("live", "chat", NEW, aliases=("quick",)), AT)])
    assert models.resolve("live").spec.price == OLD  # type: ignore[union-attr]
    now[0] = AT - 0.001
    assert models.resolve("quick").spec.price == OLD  # type: ignore[union-attr]
    now[0] = AT
    assert models.resolve("quick").spec.price == NEW  # type: ignore[union-attr]
    assert models.resolve("live").spec.price == NEW  # type: ignore[union-attr]
    assert [spec.price for spec in models.listed() if spec.name == "live"] == [NEW]


def test_live_models_never_shadow_the_config_file() -> None:
    models = registry([AT])
    models.use_live(
        [
            LiveModel(ModelSpec("cfg", "chat", NEW)),
            LiveModel(ModelSpec("other", "chat", NEW, aliases=("cfg-alias",))),
            LiveModel(ModelSpec("fine", "embedding", NEW)),
        ]
    )
    assert models.resolve("cfg").spec.price == Price()  # type: ignore[union-attr]
    assert models.resolve("other") is None
    assert models.resolve("fine").spec.kind == "embedding"  # type: ignore[union-attr]
    assert models.is_configured("cfg-alias") and not models.is_configured("fine")
    models.use_live([])
    assert models.resolve("fine") is None and models.capabilities() == {"LLM": "cfg"}


def test_a_price_tag_names_every_unit_price_that_is_not_zero() -> None:
    price = Price(input_per_1k=5, per_image=(("1024x1024", "high", 7),))
    assert price.tag == '{"input_per_1k":5,"per_image":{"1024x1024/high":7}}'
    assert Price().tag == "{}"
