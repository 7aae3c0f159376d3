"""A tool's arguments are hostile input: the schema built from a protocol's spec bounds every one,
and `read_arguments` refuses whatever the schema does not allow, and what JSON Schema cannot say
(NaN, a lone surrogate), with one sentence, a `UserError`."""

from __future__ import annotations

from typing import Any

import pytest

from panel_cli.errors import UserError
from panel_cli.mcp_server.arguments import (
    PanelChoice,
    argument_name,
    given_options,
    option_schema,
    read_arguments,
    tool_schema,
)
from panel_cli.protocols.registry import CommandOption, ProtocolSpec, spec

CHOICE = PanelChoice(names=["demo"], has_default=False, description="The panel.")


def schema_of(protocol: str, *, attachments: bool = False) -> dict[str, Any]:
    return tool_schema(spec(protocol), CHOICE, cap=1.0, attachments=attachments)


def refusal(schema: dict[str, Any], arguments: Any) -> str:
    with pytest.raises(UserError) as refused:
        read_arguments(schema, arguments)
    return refused.value.message


def test_arguments_are_named_after_their_flags() -> None:
    vote = spec("vote")
    assert [argument_name(option) for option in vote.options] == [
        "options",
        "members",
        "method",
        "tie_break",
        "threshold",
        "quorum",
        "timeout",
        "no_match",
        "stop",
        "gate",
    ]
    assert list(schema_of("vote")["properties"]) == [
        "question",
        "panel",
        *[argument_name(option) for option in vote.options],
        "max_cost",
    ]


@pytest.mark.parametrize(
    ("option", "schema"),
    [
        (
            CommandOption(name="n", flag="--n", help="h", kind="int", minimum=2, maximum=9),
            {"type": "integer", "description": "h", "minimum": 2, "maximum": 9},
        ),
        (
            CommandOption(name="n", flag="--n", help="h", kind="int"),
            {"type": "integer", "description": "h", "minimum": -1_000_000, "maximum": 1_000_000},
        ),
        (
            CommandOption(name="x", flag="--x", help="h", kind="float", minimum=0, maximum=1),
            {"type": "number", "description": "h", "minimum": 0, "maximum": 1},
        ),
        (CommandOption(name="t", flag="--t", help="h"), {"type": "string", "description": "h", "maxLength": 1_000}),
        (CommandOption(name="f", flag="--f", help="h", kind="flag"), {"type": "boolean", "description": "h"}),
        (
            CommandOption(name="w", flag="--w", help="h", kind="words"),
            {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 1_000},
                "minItems": 1,
                "maxItems": 100,
                "description": "h",
            },
        ),
    ],
)
def test_each_kind_of_option_has_its_json_type_and_bounds(option: CommandOption, schema: dict[str, Any]) -> None:
    assert option_schema(option, "vote") == schema


def test_an_option_setting_a_choice_field_lists_the_choices() -> None:
    properties = schema_of("vote")["properties"]
    assert properties["method"]["enum"] == [
        "majority",
        "supermajority",
        "unanimous",
        "ranked_choice",
        "weighted",
        "plurality",
        "weighted_plurality",
    ]
    assert properties["tie_break"]["enum"] == ["none", "leader", "first"]  # Optional[Literal[...]]
    assert "enum" not in properties["members"] and "enum" not in schema_of("ensemble")["properties"]["scorer"]
    assert refusal(schema_of("vote"), {"question": "Q", "panel": "demo", "method": "rock"}) == (
        "method: 'rock' is not one of: majority, supermajority, unanimous, ranked_choice, weighted, plurality, "
        "weighted_plurality."
    )


def test_a_default_panel_makes_panel_optional_and_files_add_attach() -> None:
    optional = tool_schema(spec("confer"), PanelChoice(["demo"], True, "d"), cap=1.0, attachments=True)
    assert optional["required"] == ["question"]
    assert optional["properties"]["attach"]["maxItems"] == 20


def test_an_option_named_like_a_common_argument_is_a_programming_error() -> None:
    clash = ProtocolSpec(name="clash", summary="s", options=(CommandOption(name="p", flag="--panel", help="h"),))
    with pytest.raises(ValueError, match=r"protocol clash: option names \['panel'\] are taken by every tool"):
        tool_schema(clash, CHOICE, cap=1.0, attachments=False)


@pytest.mark.parametrize(
    ("arguments", "sentence"),
    [
        (None, "question, panel are required."),
        ({"question": "Q", "panel": "demo", "rm": 1, "sh": 2}, "'rm', 'sh' are not arguments of this tool"),
        ({"question": ["Q"], "panel": "demo"}, "question: must be a string."),
        ({"question": "Q", "panel": "demo", "quorum": 2.5}, "quorum: must be an integer."),
        ({"question": "Q", "panel": "demo", "quorum": 10**30}, "quorum: must be at most 1e+06."),
        ({"question": "Q", "panel": "demo", "options": []}, "options: must hold at least 1 items."),
        ({"question": "Q", "panel": "demo", "options": ["A"] * 101}, "options: must hold at most 100 items."),
        ({"question": "Q", "panel": "demo", "options": ["A", {"b": 1}]}, "options.1: must be a string."),
        ({"question": "Q", "panel": "demo", "method": "x" * 1001}, "method: must be at most 1,000 characters long."),
        ({"question": "Q", "panel": "demo", "max_cost": -1}, "max_cost: must be at least 0."),
        ({"question": "Q", "panel": "demo", "threshold": float("nan")}, "threshold: nan is not a number."),
        ({"question": "Q", "panel": "demo", "max_cost": float("inf")}, "max_cost: must be at most 1."),
        ({"question": "Q\ud800", "panel": "demo"}, "question: not UTF-8 text (it holds a lone surrogate)."),
        ({"question": "Q", "panel": "demo", "options": ["A", "\udce9"]}, "options: not UTF-8 text"),
    ],
)
def test_what_the_schema_forbids_is_one_sentence(arguments: Any, sentence: str) -> None:
    assert refusal(schema_of("vote"), arguments).startswith(sentence)


def test_a_value_nested_5000_deep_is_refused_without_recursing() -> None:
    nested: Any = "x"
    for _ in range(5_000):
        nested = [nested]
    assert refusal(schema_of("vote"), {"question": "Q", "panel": "demo", "options": nested}) == (
        "The arguments are nested deeper than 4 levels; no argument is."
    )
    assert refusal(schema_of("vote"), {"question": "Q", "panel": "demo", "options": [["A"]]}) == (
        "options.0: must be a string."
    )


@pytest.mark.parametrize(
    ("arguments", "sentence"),
    [
        ({"question": "Q", "options": ["A"] * 20_000}, "The arguments hold more than 10,000 values"),
        ({"question": "Q" * 2_000_000}, "The arguments hold more than 1,000,000 characters"),
        ({"question": "Q", "x" * 2_000_000: 1}, "The arguments hold more than 1,000,000 characters"),
    ],
)
def test_a_request_larger_than_any_valid_one_is_refused_before_the_schema(arguments: Any, sentence: str) -> None:
    assert refusal(schema_of("vote"), arguments).startswith(sentence)


def test_a_long_unknown_name_is_quoted_short() -> None:
    sentence = refusal(schema_of("confer"), {"question": "Q", "panel": "demo", "x" * 5_000: 1})
    assert sentence.startswith("'" + "x" * 79 + "…' is not an argument of this tool")


def test_given_options_are_what_the_run_core_reads() -> None:
    arguments = read_arguments(
        schema_of("vote"), {"question": "Q", "panel": "demo", "options": ["A", "B"], "quorum": 3.0, "threshold": 1}
    )
    given = given_options(spec("vote"), arguments)
    assert given["choices"] == ["A", "B"]
    assert given["quorum"] == 3 and isinstance(given["quorum"], int)
    assert given["threshold"] == 1.0 and isinstance(given["threshold"], float)
    assert given["method"] is None
