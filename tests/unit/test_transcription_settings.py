"""The settings of speech-to-text: model abilities, the upload cap, the decode budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from parley.audio.budget import DecodeBudget
from parley.domain.transcripts import TranscriptionAbilities
from parley.pipeline.services import model_specs, probe_pool
from parley.settings import ConfigError, Settings, load_settings


def write(tmp_path: Path, config: dict[str, Any]) -> Path:
    path = tmp_path / "parley.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_abilities_default_to_every_format_without_translation_or_streaming() -> None:
    settings = Settings.model_validate({"models": [{"name": "stt", "kind": "transcription"}]})
    (spec,) = model_specs(settings, created=0)
    assert spec.transcription == TranscriptionAbilities()
    assert spec.transcription.describe() == {
        "translate": False,
        "stream": False,
        "formats": ["json", "text", "srt", "vtt", "verbose_json"],
    }


def test_declared_abilities_reach_the_model() -> None:
    options = {"translate": True, "stream": True, "formats": ["json", "text"]}
    settings = Settings.model_validate(
        {"models": [{"name": "stt", "kind": "transcription", "transcription": options}]}
    )
    (spec,) = model_specs(settings, created=0)
    assert spec.transcription == TranscriptionAbilities(True, True, ("json", "text"))


def test_a_chat_model_has_no_transcription_abilities() -> None:
    (spec,) = model_specs(Settings.model_validate({"models": [{"name": "c"}]}), created=0)
    assert spec.transcription is None


@pytest.mark.parametrize(
    ("model", "problem"),
    [
        ({"kind": "chat", "transcription": {}}, "only for kind: transcription"),
        ({"kind": "transcription", "transcription": {"formats": []}}, "at least one"),
        ({"kind": "transcription", "transcription": {"formats": ["diarized_json"]}}, "formats"),
        ({"kind": "transcription", "transcription": {"stream": "often"}}, "stream"),
    ],
)
def test_bad_abilities_are_a_config_error(
    tmp_path: Path, model: dict[str, Any], problem: str
) -> None:
    path = write(tmp_path, {"models": [{"name": "stt", **model}]})
    with pytest.raises(ConfigError, match=problem):
        load_settings(path, {})


def test_the_upload_cap_is_configurable_and_positive(tmp_path: Path) -> None:
    assert Settings().server.max_audio_bytes == 26_214_400
    path = write(tmp_path, {"server": {"max_audio_bytes": 0}})
    with pytest.raises(ConfigError, match=r"server\.max_audio_bytes"):
        load_settings(path, {})


def test_the_decode_budget_and_the_probe_pool_come_from_the_audio_section(
    tmp_path: Path,
) -> None:
    pool = probe_pool(Settings())
    assert pool.budget == DecodeBudget(7200.0, 2.0, 20.0)
    assert pool.budget.most_cpu == 42.0
    pool.close()
    config = {"audio": {"max_seconds": 600, "decode_cpu_seconds": 1, "threads_per_group": 2}}
    settings = load_settings(write(tmp_path, config), {})
    assert (settings.audio.max_seconds, settings.audio.threads_per_group) == (600, 2)
    path = write(tmp_path, {"audio": {"threads": 0}})
    with pytest.raises(ConfigError, match=r"audio\.threads"):
        load_settings(path, {})
