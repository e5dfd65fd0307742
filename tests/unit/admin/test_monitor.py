"""What the channels view shows of a channel's address: never user info or a query."""

from __future__ import annotations

from parley.admin.monitor import ChannelView, health_state
from parley.runtime.health import HealthSnapshot
from parley.settings import ChannelSettings


def test_channel_address_drops_user_info_query_and_fragment() -> None:
    channel = ChannelSettings.model_validate(
        {
            "name": "c",
            "base_url": "https://user:secret@api.example.com/v1?key=abc#frag",
            "api_key": "sk-hidden",
            "models": ["m"],
        }
    )
    view = ChannelView(channel, None).view()
    assert view["base_url"] == "https://api.example.com/v1"
    assert "secret" not in repr(view) and "sk-hidden" not in repr(view) and "abc" not in repr(view)
    assert view["has_api_key"] is True and view["health"]["state"] == "idle"


def test_health_states() -> None:
    def snap(
        errors: int, calls: int, last_error: float | None, last_ok: float | None
    ) -> HealthSnapshot:
        return HealthSnapshot(calls, errors, errors / calls, 1.0, 1, 502, last_error, last_ok)

    assert health_state(None) == "idle"
    assert health_state(snap(0, 10, None, 5.0)) == "healthy"
    assert health_state(snap(1, 10, 4.0, 5.0)) == "degraded"
    assert health_state(snap(6, 10, 6.0, 5.0)) == "failing"
    assert health_state(snap(6, 10, 4.0, 5.0)) == "degraded"  # it answered since
