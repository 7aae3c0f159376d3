"""ensemble's `majority` under `stop: decided`, and what ensemble and council say of confidence
(docs/protocols.md#stopping-early, #confidence)."""

from __future__ import annotations

from panel_cli.protocols.council.engine import NO_CONFIDENCE as COUNCIL_NO_CONFIDENCE
from panel_cli.protocols.council.engine import council
from panel_cli.protocols.ensemble.engine import NO_CONFIDENCE, ensemble, majority_settled, next_majority
from tests.fakes.openai_server import reply
from tests.protocols.conftest import make_panel

ORDER = ["ann", "bob", "cy", "dee"]


def test_two_members_still_to_ask_can_always_outvote_the_pick():
    assert not majority_settled({"ann": 2, "bob": 2, "cy": 2}, ORDER, 2)
    assert majority_settled({"ann": 2, "bob": 2, "cy": 2}, ORDER, 0)


def test_one_left_cannot_when_the_pick_resembles_every_other_and_none_would_pass_it():
    # ann resembles bob and cy; they resemble only ann: one more for either ties ann, listed first.
    assert majority_settled({"ann": 2, "bob": 1, "cy": 1}, ORDER, 1)
    # bob resembles everyone too: one more for bob passes ann.
    assert not majority_settled({"ann": 2, "bob": 2, "cy": 1}, ORDER, 1)
    # the pick resembles not every other response: the last could resemble all but it.
    assert not majority_settled({"ann": 1, "bob": 1, "cy": 0}, ORDER, 1)
    # one response in hand, one to come: a tie, or no resemblance, leaves the first.
    assert majority_settled({"ann": 0}, ORDER, 1)


def test_the_waves_ask_all_but_the_last_first():
    assert next_majority({}, ORDER, 4).size == 3
    assert next_majority({"ann": "x y z", "bob": "p q r"}, ORDER, 1).size == 1


async def test_majority_spares_the_last_member_when_it_could_not_change_the_pick(fake_server, run_protocol):
    fake_server.script("ann-model", reply("use PostgreSQL with a read replica"))
    fake_server.script("bob-model", reply("use PostgreSQL with one read replica"))
    fake_server.script("cy-model", reply("Use Rust for the parser now"))
    panel = make_panel(fake_server, ["ann", "bob", "cy"], mode="majority", stop="decided")
    result, events = await run_protocol(ensemble, panel)

    # ann and bob resemble each other, cy neither: could cy's reply pass ann? Asked: two, then cy.
    assert len(fake_server.requests) == 3 and result.chosen == "ann"
    assert result.stopping is not None and result.stopping.saved_calls == 0

    fake_server.requests.clear()
    panel = make_panel(fake_server, ["ann", "bob"], mode="majority", stop="decided")
    result, events = await run_protocol(ensemble, panel)
    assert [request.model for request in fake_server.requests] == ["ann-model"]
    assert result.chosen == "ann" and result.member_count == 2 and [r.name for r in result.responses] == ["ann"]
    assert result.stopping.saved_calls == 1 and events.of("asking_stopped")[0].not_asked == ["bob"]


async def test_every_mode_says_why_it_has_no_confidence(fake_server, run_protocol):
    fake_server.default(reply("use PostgreSQL"))
    for mode in ("fanout", "race", "majority", "consensus"):
        result, _ = await run_protocol(ensemble, make_panel(fake_server, ["ann", "bob"], mode=mode))
        assert (result.confidence, result.confidence_basis) == (None, NO_CONFIDENCE[mode])


async def test_council_says_why_it_has_no_confidence(fake_server, run_protocol):
    fake_server.default(reply("Fine.\n\nFINAL RANKING:\n1. Model A\n2. Model B"))
    result, _ = await run_protocol(council, make_panel(fake_server, ["ann", "bob"]))
    assert result.final_answer is not None
    assert (result.confidence, result.confidence_basis) == (None, COUNCIL_NO_CONFIDENCE)
