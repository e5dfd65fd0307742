"""Streamed text cut into sentences (``domain.sentences``)."""

from __future__ import annotations

from parley.domain.sentences import LONGEST, Sentences


def test_sentences_come_out_as_their_ends_are_seen() -> None:
    cut = Sentences()
    assert cut.feed("Hello there") == []
    assert cut.feed(".") == []  # the stop needs the space after it
    assert cut.feed(" How are you?! I am") == ["Hello there.", "How are you?!"]
    assert cut.feed(' "fine." Next\nline') == ['I am "fine."', "Next"]
    assert cut.rest() == "line"
    assert cut.rest() == ""


def test_a_number_or_a_name_is_not_an_end() -> None:
    cut = Sentences()
    assert cut.feed("It costs 3.50 at example.com today. ") == [
        "It costs 3.50 at example.com today."
    ]


def test_a_sentence_without_an_end_is_cut_at_a_space() -> None:
    cut = Sentences()
    words = "word " * 100
    found = cut.feed(words)
    assert found and all(len(s) <= LONGEST for s in found)
    assert " ".join([*found, cut.rest()]).split() == words.split()
