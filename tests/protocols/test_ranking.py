"""Ranking parse, aggregate arithmetic, review order and bias report (docs/protocols.md#council), by hand."""

from __future__ import annotations

import pytest

from panel_cli.protocols.council.ranking import (
    RankedMember,
    ReviewFacts,
    aggregate_rankings,
    bias_report,
    has_ranking,
    parse_ranking,
    review_order,
)

ANON = {"a": "Model A", "b": "Model B", "c": "Model C"}
NAMED = {"gpt-4o": "gpt-4o", "gpt-4o-2": "gpt-4o-2", "claude": "claude"}


def test_comma_list():
    assert parse_ranking("Good work all round.\n\nFINAL RANKING: Model C, Model A, Model B", ANON).ranking == [
        "Model C",
        "Model A",
        "Model B",
    ]


def test_numbered_lines_with_comments_after_the_label():
    text = "FINAL RANKING:\n1. Model B - the clearest, by far\n2) Model C: thin\n3. Model A (too long)"
    assert parse_ranking(text, ANON).ranking == ["Model B", "Model C", "Model A"]


def test_bold_labels_and_a_bold_marker():
    text = "**FINAL RANKING:**\n1. **Model B**\n2. **Model A**\n3. *Model C*"
    assert parse_ranking(text, ANON).ranking == ["Model B", "Model A", "Model C"]


def test_bare_letters_and_mixed_case():
    assert parse_ranking("final ranking: b, A, model c", ANON).ranking == ["Model B", "Model A", "Model C"]
    assert parse_ranking("Final Ranking:\n- c\n- MODEL a\n- Response B.", ANON).ranking == [
        "Model C",
        "Model A",
        "Model B",
    ]


def test_a_label_listed_twice_counts_once_at_its_first_place():
    assert parse_ranking("FINAL RANKING: Model B, Model A, Model B, Model C", ANON).ranking == [
        "Model B",
        "Model A",
        "Model C",
    ]


def test_an_invented_label_is_dropped_and_reported():
    parsed = parse_ranking("FINAL RANKING: Model Q, Model A, the third one", ANON)
    assert parsed.ranking == ["Model A"] and parsed.dropped == ["Model Q", "the third one"]


def test_padding_a_ranking_cannot_push_a_rival_down():
    """A reviewer lists a hundred invented labels before its rival: the rival is still second."""
    padding = ", ".join(f"Model Z{index}" for index in range(100))
    parsed = parse_ranking(f"FINAL RANKING: Model A, {padding}, Model B", {"a": "Model A", "b": "Model B"})
    assert parsed.ranking == ["Model A", "Model B"] and len(parsed.dropped) == 100
    ranked = aggregate_rankings([parsed.ranking], AUTHORS, LABELS)
    assert [(r.name, r.average_rank) for r in ranked] == [("ann", 1.0), ("bob", 2.0)]


def test_a_bare_letter_needs_a_separator_but_a_prefixed_one_does_not():
    text = "FINAL RANKING:\n1. A good one overall\n2. Model B is weaker\n3. C - weakest"
    assert parse_ranking(text, ANON).ranking == ["Model B", "Model C"]


def test_no_marker_is_an_empty_ranking():
    text = "Model A is best, then Model B."
    assert parse_ranking(text, ANON).ranking == [] and not has_ranking(text)


def test_text_after_the_blank_line_is_ignored():
    text = "FINAL RANKING: Model A, Model B\n\nModel C deserves a mention too."
    assert parse_ranking(text, ANON).ranking == ["Model A", "Model B"]


def test_blank_lines_straight_after_the_marker_are_skipped():
    assert parse_ranking("FINAL RANKING:\n\n1. Model C\n2. Model A\n\nThanks.", ANON).ranking == ["Model C", "Model A"]


def test_the_last_marker_wins():
    text = "Answer B said 'FINAL RANKING: Model B, Model A' which is odd.\n\nFINAL RANKING: Model A, Model C"
    assert parse_ranking(text, ANON).ranking == ["Model A", "Model C"]


def test_numbered_items_on_one_line():
    assert parse_ranking("FINAL RANKING: 1. Model B, 2. Model C, 3. Model A", ANON).ranking == [
        "Model B",
        "Model C",
        "Model A",
    ]


def test_member_names_when_not_anonymised_never_confuse_a_prefix():
    text = "FINAL RANKING:\n1. **gpt-4o-2**\n2. Member Claude\n3. gpt-4o"
    assert parse_ranking(text, NAMED).ranking == ["gpt-4o-2", "claude", "gpt-4o"]
    assert parse_ranking("FINAL RANKING: gpt-4o-3, gpt-4o", {"gpt-4o": "gpt-4o"}).ranking == ["gpt-4o"]


AUTHORS = {"Model A": "ann", "Model B": "bob", "Model C": "cy"}
LABELS = {"ann": "Model A", "bob": "Model B", "cy": "Model C"}


def test_average_over_the_reviews_that_list_a_member():
    rankings = [["Model A", "Model B", "Model C"], ["Model B", "Model A"], ["Model B", "Model C", "Model A"]]
    assert aggregate_rankings(rankings, AUTHORS, LABELS) == [
        RankedMember(name="bob", label="Model B", average_rank=(2 + 1 + 1) / 3, count=3),
        RankedMember(name="ann", label="Model A", average_rank=(1 + 2 + 3) / 3, count=3),
        RankedMember(name="cy", label="Model C", average_rank=(3 + 2) / 2, count=2),
    ]


def test_ties_go_to_more_rankings_then_to_the_label():
    # dee: 1 over 1 review; bob: (1 + 3) / 2 = 2 over 2 reviews; ann and cy: 2 over 1 review each.
    authors = {**AUTHORS, "Model D": "dee"}
    labels = {**LABELS, "dee": "Model D"}
    rankings = [["Model B", "Model A"], ["Model D", "Model C", "Model B"]]
    ranked = aggregate_rankings(rankings, authors, labels)
    assert [(r.name, r.average_rank, r.count) for r in ranked] == [
        ("dee", 1.0, 1),
        ("bob", 2.0, 2),
        ("ann", 2.0, 1),
        ("cy", 2.0, 1),
    ]


def test_no_rankings_no_aggregate():
    assert aggregate_rankings([[], []], AUTHORS, LABELS) == []


def test_review_order_is_fixed_without_shuffle_and_drops_own_without_self_review():
    labels = ["Model A", "Model B", "Model C"]
    assert review_order(labels, "ann", "Model A", shuffle=False, seed=None, self_review=True) == labels
    assert review_order(labels, "ann", "Model A", shuffle=False, seed=None, self_review=False) == ["Model B", "Model C"]
    assert review_order(labels, "dee", None, shuffle=False, seed=None, self_review=False) == labels


def test_shuffle_is_per_reviewer_and_replays_from_the_seed():
    labels = [f"Model {c}" for c in "ABCDEFGH"]
    first = {
        name: review_order(labels, name, None, shuffle=True, seed=7, self_review=True) for name in ["ann", "bob", "cy"]
    }
    again = {
        name: review_order(labels, name, None, shuffle=True, seed=7, self_review=True) for name in ["ann", "bob", "cy"]
    }
    assert first == again
    assert all(sorted(order) == labels for order in first.values())
    assert len({tuple(order) for order in first.values()}) > 1
    assert review_order(labels, "ann", None, shuffle=True, seed=8, self_review=True) != first["ann"]


def test_bias_report_counts_own_first_and_shown_first():
    reviews = [
        ReviewFacts(
            own="Model A", shown=["Model A", "Model B"], ranking=["Model A", "Model B"]
        ),  # own first, shown first
        ReviewFacts(own="Model B", shown=["Model A", "Model B"], ranking=["Model A", "Model B"]),  # shown first
        ReviewFacts(own=None, shown=["Model B", "Model A"], ranking=["Model A", "Model B"]),  # neither
        ReviewFacts(own="Model A", shown=["Model B"], ranking=["Model B"]),  # own not shown; shown first
        ReviewFacts(own="Model A", shown=["Model A", "Model B"], ranking=[]),  # no ranking: not counted
    ]
    report = bias_report(reviews)
    assert (report.own_first, report.own_reviews) == (1, 2)
    assert report.own_first_share == pytest.approx(0.5)
    assert (report.shown_first, report.ranked_reviews) == (3, 4)
    assert report.shown_first_share == pytest.approx(0.75)


def test_bias_report_without_reviews_has_no_shares():
    report = bias_report([])
    assert report.own_first_share is None and report.shown_first_share is None


@pytest.mark.parametrize(
    "text",
    [
        "FINAL RANKING: Model C > Model A > Model B",
        "FINAL RANKING: Model C >> Model A >> Model B",
        "FINAL RANKING: C → A → B",
        "FINAL RANKING: Model C; Model A; Model B",
        "FINAL RANKING: 1. Model C 2. Model A 3. Model B",
        "FINAL RANKING: 1) Model C (2) Model A (3) Model B",
        "FINAL RANKING:\n- **Model C**\n- Model A\n- Model B",
        "FINAL RANKING:\n> 1. Model C\n> 2. Model A\n> 3. Model B",
    ],
    ids=[
        "arrows",
        "double-arrows",
        "unicode-arrows",
        "semicolons",
        "numbered-inline",
        "parenthesised",
        "bullets",
        "quoted",
    ],
)
def test_every_list_form_reads_the_whole_ranking(text):
    assert parse_ranking(text, ANON).ranking == ["Model C", "Model A", "Model B"]


def test_a_comment_in_a_numbered_line_is_no_separator():
    text = "FINAL RANKING:\n1. Model B - better > the rest, by far\n2. Model A\n3. Model C"
    assert parse_ranking(text, ANON).ranking == ["Model B", "Model A", "Model C"]
