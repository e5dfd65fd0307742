"""The health check and alert settings: off unless asked for, and refused when they
cannot mean anything."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from parley.settings import AlertSettings, ChannelSettings

CHANNEL: dict[str, Any] = {"name": "c", "base_url": "http://127.0.0.1:1", "models": ["m"]}


def test_health_checks_are_off_by_default() -> None:
    health = ChannelSettings.model_validate(CHANNEL).health
    assert health.interval_seconds is None and health.disable_after is None


@pytest.mark.parametrize(
    "health",
    [
        {"disable_after": 3},  # nothing checks, so nothing could disable
        {"interval_seconds": 0},
        {"interval_seconds": 60, "disable_after": 0},
        {"interval_seconds": 60, "every": 5},
    ],
)
def test_health_settings_that_mean_nothing_are_refused(health: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ChannelSettings.model_validate({**CHANNEL, "health": health})


def test_alert_thresholds_are_shares_kept_in_order() -> None:
    assert AlertSettings(budget_thresholds=(1.0, 0.8, 0.8)).budget_thresholds == (0.8, 1.0)
    with pytest.raises(ValidationError):
        AlertSettings(budget_thresholds=(80,))


@pytest.mark.parametrize(
    "webhook",
    [
        {"url": "ftp://example.com/hook"},
        {"url": "https://example.com/hook", "secret": "short"},
        {"url": "https://example.com/hook", "format": "teams"},
    ],
)
def test_webhooks_that_cannot_be_posted_to_are_refused(webhook: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        AlertSettings.model_validate({"webhooks": [webhook]})
