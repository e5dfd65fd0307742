"""Go-style reset durations, and configuration errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from parley.limits.base import Decision, Window
from parley.limits.headers import go_duration, rate_limit_headers, retry_headers
from parley.settings import ConfigError, Settings, load_settings


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (0.012, "12ms"),
        (0.0001, "1ms"),
        (1, "1s"),
        (1.5, "1.5s"),
        (59.9994, "1m0s"),
        (360, "6m0s"),
        (3723.5, "1h2m3.5s"),
    ],
)
def test_go_durations(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_headers_only_for_limited_dimensions() -> None:
    decision = Decision(allowed=True, requests=Window(10, 9, 6.0))
    assert rate_limit_headers(decision) == {
        "x-ratelimit-limit-requests": "10",
        "x-ratelimit-remaining-requests": "9",
        "x-ratelimit-reset-requests": "6s",
    }
    assert retry_headers(0.2) == {"retry-after": "1", "retry-after-ms": "200"}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "parley.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("server: {port: abc}", "server.port: Input should be a valid integer"),
        ("server: [1]", "server: Input should be"),
        ("nonsense: 1", "nonsense: Extra inputs are not permitted"),
        (
            "channels: [{name: a, base_url: 'http://x', models: [ghost]}]",
            "channel `a` serves `ghost`, which is not declared under models",
        ),
        ("channels: [{name: a, base_url: 'ftp://x', models: []}]", "channels.0.base_url"),
        ("channels: [{name: a, base_url: 'http://', models: []}]", "must name a host"),
        (
            "channels: [{name: a, base_url: 'http://x', api_key: '${KEY}', models: []}]",
            "channels.0.api_key: must not hold a line break",
        ),
        ("database: {url: 'mysql://x'}", "database.url: must start with sqlite://"),
        ("limits: {backend: redis}", "limits.backend is redis but no redis section is set"),
        ("capabilities: {LLM_CHAT: ghost}", "capability `LLM_CHAT` names unknown model"),
        ("server: {host: '${NOT_SET_ANYWHERE}'}", "server.host: environment variable NOT_SET"),
        ("server: {port: 1\n  bad: [", "not valid YAML at line"),
        (
            "models: [{name: e, kind: embedding, prices: {per_search_unit: '0.002'}}]",
            "only a kind: rerank model is priced per_search_unit",
        ),
        ("- just\n- a list", "the top level must be a mapping"),
    ],
)
def test_config_errors_are_one_line_naming_the_field(
    tmp_path: Path, text: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as problem:
        load_settings(write(tmp_path, text), {"KEY": "sk-pasted-with-newline\n"})
    message = str(problem.value)
    assert expected in message
    assert "\n" not in message


def test_a_short_admin_token_is_refused_without_being_shown(tmp_path: Path) -> None:
    path = write(tmp_path, "admin: {token: 'hunter2x'}")
    with pytest.raises(ConfigError) as problem:
        load_settings(path, {})
    message = str(problem.value)
    assert "admin.token: must be at least 16 characters" in message
    assert "hunter2x" not in message
    with pytest.raises(ConfigError, match=r"admin\.token"):
        load_settings(None, {"PARLEY_ADMIN_TOKEN": "x" * 15})
    assert load_settings(None, {"PARLEY_ADMIN_TOKEN": "x" * 16}).admin.token == "x" * 16
    assert load_settings(None, {"PARLEY_ADMIN_TOKEN": ""}).admin.token == ""  # off
    # an admin command leaves an unset reference as written, and never uses it
    unset = write(tmp_path, "admin: {token: '${ADM}'}")
    assert load_settings(unset, {}, secrets=False).admin.token == "${ADM}"


def test_environment_references_and_overrides(tmp_path: Path) -> None:
    path = write(tmp_path, "server: {host: '${HOST}'}\ndatabase: {url: 'sqlite:///a.db'}")
    settings = load_settings(path, {"HOST": "0.0.0.0", "PARLEY_DATABASE_URL": "sqlite:///b.db"})
    assert settings.server.host == "0.0.0.0"
    assert settings.database.url == "sqlite:///b.db"


def test_no_file_is_an_empty_gateway_on_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings(None, {})
    assert settings == Settings()
    assert settings.database.url == "sqlite:///./parley.db"
    assert settings.channels == ()


def test_the_example_config_is_valid() -> None:
    example = Path(__file__).parents[2] / "parley.example.yaml"
    settings = load_settings(
        example,
        {
            "PARLEY_ADMIN_TOKEN": "t" * 16,
            "VLLM_API_KEY": "k",
            "OPENAI_API_KEY": "k",
            "ANTHROPIC_API_KEY": "k",
        },
    )
    assert {"chat-large", "claude-sonnet", "vision-small", "tts-pro", "stt-large"} <= {
        model.name for model in settings.models
    }
    assert settings.capabilities["LLM_CHAT"] == "chat-large"


def test_a_bedrock_channel_takes_its_credentials_from_the_aws_variables(tmp_path: Path) -> None:
    config = tmp_path / "parley.yaml"
    config.write_text(
        "channels:\n"
        "  - name: aws\n    type: bedrock\n    models: [claude]\n"
        "  - name: pinned\n    type: bedrock\n    models: [claude]\n"
        "    aws: {region: eu-west-3, access_key_id: AKIACONFIGURED, secret_access_key: s}\n"
        "models:\n  - name: claude\n"
    )
    environ = {
        "AWS_REGION": "us-west-2",
        "AWS_ACCESS_KEY_ID": "ASIAFROMENVIRONMENT",
        "AWS_SECRET_ACCESS_KEY": "env/secret",
        "AWS_SESSION_TOKEN": "token",
    }
    settings = load_settings(config, environ)
    aws, pinned = settings.channels
    assert aws.base_url == "https://bedrock-runtime.us-west-2.amazonaws.com"
    assert aws.aws is not None and aws.aws.access_key_id == "ASIAFROMENVIRONMENT"
    assert (aws.aws.secret_access_key, aws.aws.session_token) == ("env/secret", "token")
    assert "env/secret" not in repr(aws)
    assert pinned.base_url == "https://bedrock-runtime.eu-west-3.amazonaws.com"
    assert pinned.aws is not None and pinned.aws.session_token is None  # never mixed
    with pytest.raises(ConfigError, match=r"channels.0.aws.region: a bedrock channel needs"):
        load_settings(config, {})
    with pytest.raises(ConfigError, match=r"channels.0.aws.access_key_id: Field required"):
        load_settings(config, {"AWS_REGION": "us-east-1"})
    config.write_text(
        "channels:\n  - name: az\n    base_url: https://x.openai.azure.com\n"
        "    azure: {api_version: '2024-10-21'}\n    models: [gpt]\n"
        "models:\n  - name: gpt\n"
    )
    with pytest.raises(ConfigError, match="azure is for channels of type azure-openai"):
        load_settings(config, {})
