"""Clone identity, label rules, catalogue files and the coverage rules of voice records."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from parley.domain.voices import (
    Catalogue,
    CatalogueEntry,
    clone_id,
    clone_owner,
    folded,
    valid_label,
    voice_records,
)
from parley.settings import ConfigError, ModelSettings, SpeechOptions
from parley.voices.catalogue import load_catalogue

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "voices"


def test_a_clone_id_names_its_group_and_label() -> None:
    assert clone_id(12, "Anna_2") == "g12__Anna_2"
    assert clone_owner("g12__Anna_2") == 12
    assert clone_owner("g12__with__more") == 12
    for not_a_clone in ("vivian", "g__x", "gx__y", "g12_x", "xg12__y", "M1", "af_heart"):
        assert clone_owner(not_a_clone) is None, not_a_clone


@pytest.mark.parametrize(
    "spelling",
    [
        "G12__ANNA",  # upper case
        "\uff47\uff11\uff12\uff3f\uff3fanna",  # fullwidth g, digits and low lines
        "\U0001d420\u2081\u2082__anna",  # mathematical bold g, subscript digits
        "g12__\u212aate",  # Kelvin sign
        "g12__\u017fam",  # long s
        "g12__\u0130van",  # capital I with a dot
        "g\u200b12__x",  # a zero-width space
        "\u01e712__x",  # g with caron: a mark on a g
        " g12 __x",  # spaces
        "g12__",  # no label: no engine name, still the shape
    ],
)
def test_a_clone_shape_is_judged_on_every_folding_an_engine_may_apply(spelling: str) -> None:
    assert clone_owner(spelling) == 12


def test_folding_gives_a_clone_id_its_lower_case_and_each_spelling_the_engines() -> None:
    assert folded("g12__Anna-2_x") == "g12__anna-2_x"
    assert folded("G12__\u212aATE") == "g12__kate"
    assert folded("g12__\u0130van") == "g12__ivan"
    assert folded("\uff27\uff11\uff12__\u017fAM") == "g12__sam"


def test_a_group_number_longer_than_any_group_s_names_no_group() -> None:
    assert clone_owner("g" + "9" * 200 + "__x") == 0
    assert clone_owner("g" + "0" * 30 + "12__x") == 0
    assert clone_owner("g" + "\u200b" * 300 + "1__x") == 0, "too long to fold: no group's"


def test_a_clone_shaped_name_in_an_engines_roster_is_never_a_builtin() -> None:
    records = voice_records(
        ["vivian", "g3__bert", "G4__Eve"], [], Catalogue(), status_on_every_voice=False
    )
    assert [record["id"] for record in records] == ["vivian"]


@pytest.mark.parametrize("label", ["a", "Anna", "anna-2", "x_y", "9lives", "a" * 48])
def test_labels_that_are_allowed(label: str) -> None:
    assert valid_label(label)


@pytest.mark.parametrize("label", ["", "-a", "_a", "a b", "a/b", "ä", "a" * 49, "a\n"])
def test_labels_that_are_not(label: str) -> None:
    assert not valid_label(label)


def test_a_catalogued_record_carries_categories_and_lang_key() -> None:
    entry = CatalogueEntry("M1", "Mert", lang="tr", category="news", tags=("a",) * 5)
    record = entry.record(ready=True)
    assert record["lang_key"] == "tr" and record["categories"] == ["news"]
    assert record["label_en"] == "Mert" and record["status"] == "ready"
    assert "gender" not in record and "description" not in record


def test_the_example_catalogues_load() -> None:
    pro = load_catalogue(str(EXAMPLES / "qwen3-tts.yaml"))
    fast = load_catalogue(str(EXAMPLES / "supertonic.yaml"))
    assert isinstance(pro, Catalogue) and pro.lang("uncle_fu") == "tr"
    assert set(fast.entries) == {"M1", "F1"}


def test_a_catalogue_problem_names_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "voices.yaml"
    path.write_text("voices:\n  - {id: a, label: A, tags: [one, two]}\n")
    with pytest.raises(ConfigError, match=r"voices\.yaml: voices\.0\.tags"):
        load_catalogue(str(path))
    with pytest.raises(ConfigError, match="cannot read"):
        load_catalogue(str(tmp_path / "missing.yaml"))


def test_speech_settings_are_checked() -> None:
    with pytest.raises(ValidationError, match="per_1k_characters"):
        ModelSettings(name="t", kind="speech", prices={"input_per_1k": "1"})  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="only for kind: speech"):
        ModelSettings(name="c", kind="chat", audio=SpeechOptions())
    with pytest.raises(ValidationError, match="default_quality"):
        SpeechOptions(quality_steps={"high": 8}, default_quality="max")
    with pytest.raises(ValidationError, match="1 to 100"):
        SpeechOptions(quality_steps={"high": 0})
