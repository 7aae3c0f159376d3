"""Panel files: every error names the file, the line and the field (README.md#a-panel-file)."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from panel_cli.config import (
    Panel,
    load_panel,
    panel_from_members,
    parse_duration,
    parse_panel,
    read_question_file,
    read_question_text,
    resolve_question,
)
from panel_cli.errors import ConfigError, UserError
from panel_cli.located_yaml import MAX_FILE_BYTES, parse_yaml
from panel_cli.models.aliases import load_aliases
from panel_cli.protocols.confer.settings import ConferSettings
from panel_cli.protocols.vote.settings import VoteSettings

MEMBERS = "members:\n  - name: a\n    model: demo/sage\n  - name: b\n    model: demo/skeptic\n"


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_panel(text, "panel.yaml")
    return caught.value.message


def test_full_example_loads():
    panel = parse_panel(
        MEMBERS + "chairman: a\nanonymize: false\ntimeouts: {answer: 90s, review: 5m, synthesis: none}\n"
        "max_rounds: 4\nmethod: supermajority\nthreshold: 0.75\nquorum: 2\noptions: [PostgreSQL, MySQL]\n"
        "defaults: {temperature: 0.7, max_tokens: 1024, retries: 2}\n",
        "panel.yaml",
    )
    assert panel.timeouts.get("answer", 1) == 90 and panel.timeouts.get("review", 1) == 300
    assert panel.timeouts.get("synthesis", 1) is None, "an explicit none means no limit"
    assert panel.timeouts.get("vote", 30) == 30, "an unset stage takes the protocol default"
    assert [c.name for c in panel.chairmen()] == ["a"]
    assert panel.defaults.max_tokens == 1024


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            MEMBERS + "  - name: a\n    model: demo/sage\n",
            "panel.yaml, line 6: members[2].name: duplicate member name 'a'; names must be unique.",
        ),
        (MEMBERS + "colour: blue\n", "panel.yaml, line 6: colour: unknown field."),
        (
            "members:\n  - name: a\n    model: demo/sage\n    temprature: 1\n",
            "panel.yaml, line 4: members[0].temprature: unknown field (did you mean 'temperature'?).",
        ),
        (
            "members:\n  - name: a\n    model: demo/sage\n    temperature: 7\n",
            "panel.yaml, line 4: members[0].temperature: input should be less than or equal to 2.",
        ),
        ("members:\n  - name: a\n", "panel.yaml, line 2: members[0].model: this field is required."),
        (
            MEMBERS + "timeouts: {answer: soon}\n",
            "panel.yaml, line 6: timeouts.answer: 'soon' is not a duration; write it like 90s, 5m, 1h or none.",
        ),
        (
            MEMBERS + "chairman: zed\n",
            "panel.yaml, line 6: chairman: 'zed' is not a member; name a member or give an inline member.",
        ),
        (
            MEMBERS + "method: Borda\n",
            "panel.yaml, line 6: method: input should be 'majority', 'supermajority', 'unanimous', 'ranked_choice', "
            "'weighted', 'plurality' or 'weighted_plurality'.",
        ),
        (MEMBERS + "members: []\n", "panel.yaml, line 6: members: this key appears twice."),
        ("", "panel.yaml: the file is empty; a panel needs at least 'members'."),
        ("- a\n- b\n", "panel.yaml, line 1: a panel file is a mapping of fields such as 'members' and 'question'."),
    ],
)
def test_error_messages_name_file_line_and_field(text, expected):
    assert error_of(text) == expected


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("max_rounds: true", "max_rounds"),
        ("quorum: yes", "quorum"),
        ("threshold: false", "threshold"),
        ("defaults: {max_tokens: true}", "defaults.max_tokens"),
        ("defaults: {temperature: true}", "defaults.temperature"),
        ("concurrency: {openai: true}", "concurrency.openai"),
    ],
)
def test_a_truth_value_is_no_number(line, field):
    """YAML reads `true` and `yes` as booleans, and pydantic would take one for 1: a field
    that wants a number refuses it, as a duration does."""
    assert error_of(f"{MEMBERS}{line}\n") == f"panel.yaml, line 6: {field}: write a number, not true or false."


def test_a_members_truth_value_is_no_number():
    text = "members:\n  - name: a\n    model: demo/sage\n    weight: true\n"
    assert error_of(text) == "panel.yaml, line 4: members[0].weight: write a number, not true or false."
    assert parse_panel(MEMBERS + "until_convergence: false\n", "panel.yaml").model_extra == {
        "until_convergence": False
    }, "a field that wants a truth value still takes one"


def test_counting_rules_are_read_in_any_case():
    panel = parse_panel(MEMBERS + "method: Weighted-Plurality\ntie_break: FIRST\ntally: Log_Odds\n", "panel.yaml")
    vote, confer = VoteSettings.of(panel), ConferSettings.of(panel)
    assert (vote.method, vote.tie_break, confer.tally) == ("weighted_plurality", "first", "log_odds")
    defaults = parse_panel(MEMBERS, "panel.yaml")
    vote, confer = VoteSettings.of(defaults), ConferSettings.of(defaults)
    assert (vote.method, vote.tie_break, confer.tally) == ("majority", None, "confidence")
    assert error_of(MEMBERS + "tie_break: coin\n") == (
        "panel.yaml, line 6: tie_break: input should be 'none', 'leader' or 'first'."
    )
    assert error_of(MEMBERS + "tally: count\n") == (
        "panel.yaml, line 6: tally: input should be 'confidence', 'votes' or 'log_odds'."
    )


def test_unknown_demo_persona_points_at_the_model_line():
    assert error_of("members:\n  - name: a\n    model: demo/oracle\n").startswith(
        "panel.yaml, line 3: members[0].model: unknown demo persona 'oracle'"
    )


def test_env_vars_are_expanded(monkeypatch):
    monkeypatch.setenv("PANEL_TEST_BASE", "http://127.0.0.1:9999/v1")
    panel = parse_panel("members:\n  - name: a\n    model: openai/x\n    api_base: ${PANEL_TEST_BASE}\n", "panel.yaml")
    assert panel.members[0].api_base == "http://127.0.0.1:9999/v1"


def test_unset_env_var_is_an_error_with_its_line(monkeypatch):
    monkeypatch.delenv("PANEL_TEST_UNSET", raising=False)
    message = error_of("members:\n  - name: a\n    model: openai/x\n    system: ${PANEL_TEST_UNSET}\n")
    assert message == "panel.yaml, line 4: members[0].system: environment variable PANEL_TEST_UNSET is not set."


def test_shipped_aliases_resolve_with_their_endpoint():
    panel = parse_panel("members:\n  - name: g\n    model: gpt-4o\n  - name: l\n    model: llama\n", "p.yaml")
    assert panel.members[0].model == "openai/gpt-4o" and panel.members[0].api_base is None
    assert panel.members[1].model == "ollama/llama3.1" and panel.members[1].api_base == "http://localhost:11434"


def test_user_aliases_extend_and_override(tmp_path, monkeypatch):
    config = tmp_path / "cfg"
    config.mkdir()
    (config / "aliases.yaml").write_text(
        "gpt-4o: openai/gpt-4o-2024-11-20\nlocal:\n  model: openai/qwen\n  api_base: http://127.0.0.1:8000/v1\n"
    )
    monkeypatch.setenv("PANEL_CONFIG_DIR", str(config))
    panel = parse_panel("members:\n  - name: g\n    model: gpt-4o\n  - name: q\n    model: local\n", "p.yaml")
    assert panel.members[0].model == "openai/gpt-4o-2024-11-20"
    assert (panel.members[1].model, panel.members[1].api_base) == ("openai/qwen", "http://127.0.0.1:8000/v1")


def test_member_api_base_wins_over_the_alias():
    panel = parse_panel("members:\n  - name: l\n    model: llama\n    api_base: http://gpu-box:11434\n", "p.yaml")
    assert panel.members[0].api_base == "http://gpu-box:11434"


def test_backup_chairmen_and_inline_chairman():
    panel = parse_panel(MEMBERS + "chairman: [b, {name: judge, model: demo/engineer}]\n", "p.yaml")
    assert [c.name for c in panel.chairmen()] == ["b", "judge"]


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("5m", 300), ("1h", 3600), ("250ms", 0.25), (12, 12), ("none", None)]
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


def test_demo_replaces_every_model():
    panel = parse_panel(
        "members:\n  - name: g\n    model: gpt-4o\n  - name: c\n    model: claude\n", "p.yaml"
    ).as_demo()
    assert [m.model for m in panel.members] == ["demo/sage", "demo/skeptic"]
    assert all(m.api_base is None for m in panel.members)


def test_missing_file_is_one_sentence(tmp_path):
    with pytest.raises(UserError, match=r"nope.yaml: no such file\."):
        load_panel(tmp_path / "nope.yaml")


def test_file_name_becomes_the_panel_name(tmp_path):
    file = tmp_path / "db-choice.yaml"
    file.write_text(MEMBERS)
    assert load_panel(file).name == "db-choice"


def test_callable_members_adds_an_inline_chairman_once() -> None:
    panel = parse_panel(
        "members:\n  - {name: a, model: demo/sage}\n  - {name: b, model: demo/skeptic}\n"
        "chairman:\n  - a\n  - {name: judge, model: openai/gpt-4o, api_key_env: JUDGE_KEY}\n"
    )
    assert [m.name for m in panel.callable_members()] == ["a", "b", "judge"]


# Several problems at once -------------------------------------------------------------------


def test_every_problem_is_listed_one_line_each():
    text = (
        "members:\n  - name: a\n    model: demo/sage\n    tempreature: 1\n"
        "  - name: b\n    model: demo/skeptic\n    temperature: 9\ncolour: blue\n"
    )
    assert error_of(text).splitlines() == [
        "panel.yaml, line 4: members[0].tempreature: unknown field (did you mean 'temperature'?).",
        "panel.yaml, line 7: members[1].temperature: input should be less than or equal to 2.",
        "panel.yaml, line 8: colour: unknown field.",
    ]


def test_walk_and_validation_problems_are_listed_together(monkeypatch):
    monkeypatch.delenv("PANEL_TEST_UNSET", raising=False)
    text = MEMBERS + "max_rounds: 2\nmax_rounds: 3\nquestion: ${PANEL_TEST_UNSET}\nseed: many\n"
    assert error_of(text).splitlines() == [
        "panel.yaml, line 7: max_rounds: this key appears twice.",
        "panel.yaml, line 8: question: environment variable PANEL_TEST_UNSET is not set.",
        "panel.yaml, line 9: seed: input should be a valid integer, unable to parse string as an integer.",
    ]


@pytest.mark.parametrize(
    ("chairman", "expected"),
    [
        (
            "{name: judge, modle: openai/x}",
            [
                "panel.yaml, line 6: chairman.model: this field is required.",
                "panel.yaml, line 6: chairman.modle: unknown field (did you mean 'model'?).",
            ],
        ),
        (
            "[a, {name: judge, modle: openai/x}]",
            [
                "panel.yaml, line 6: chairman[1].model: this field is required.",
                "panel.yaml, line 6: chairman[1].modle: unknown field (did you mean 'model'?).",
            ],
        ),
        (
            "[a, zed]",
            ["panel.yaml, line 6: chairman[1]: 'zed' is not a member; name a member or give an inline member."],
        ),
    ],
)
def test_a_union_reports_only_the_branch_that_was_meant(chairman, expected):
    assert error_of(MEMBERS + f"chairman: {chairman}\n").splitlines() == expected


def test_every_duplicate_member_is_reported():
    text = MEMBERS + "  - name: a\n    model: demo/sage\n  - name: b\n    model: demo/sage\n"
    assert error_of(text).splitlines() == [
        "panel.yaml, line 6: members[2].name: duplicate member name 'a'; names must be unique.",
        "panel.yaml, line 8: members[3].name: duplicate member name 'b'; names must be unique.",
    ]


def test_config_error_keeps_the_first_problem_in_its_fields():
    with pytest.raises(ConfigError) as caught:
        parse_panel(MEMBERS + "colour: blue\nmax_rounds: 0\n", "panel.yaml")
    error = caught.value
    assert (error.file, error.line, error.field, error.problem) == ("panel.yaml", 6, "colour", "unknown field")
    assert len(error.problems) == 2


# YAML syntax: where the broken construct starts, and where the parser gave up ---------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'name: x\nmembers:\n  - name: a\n    model: demo/sage\nquestion: "hello\nmax_rounds: 3\n',
            "q.yaml, line 5: not valid YAML: the quote opened here is never closed (the parser reached the end of the file).",
        ),
        (
            "name: x\nmembers:\n  - [a, b\nquestion: hi\n",
            "q.yaml, line 3: not valid YAML: the '[' opened here is never closed (the parser gave up at line 4).",
        ),
        (
            "members:\n  - name: a\n   model: x\n",
            "q.yaml, line 2: not valid YAML: line 3 does not fit the block that starts here; check its indentation.",
        ),
        (
            "members:\n  - name: 'a\n    model: x\n",
            "q.yaml, line 2: not valid YAML: the quote opened here is never closed (the parser reached the end of the file).",
        ),
        (
            "members: {a: 1\n",
            "q.yaml, line 1: not valid YAML: the '{' opened here is never closed (the parser reached the end of the file).",
        ),
        ("members: [\n", "q.yaml, line 1: not valid YAML: the file ends inside a '[' or '{' that is never closed."),
        ("members:\n\t- a\n", "q.yaml, line 2: not valid YAML: a tab cannot indent YAML; use spaces."),
        (
            MEMBERS + "question: a: b\n",
            "q.yaml, line 6: not valid YAML: ': ' cannot appear here; put quotes around a value that contains ': '.",
        ),
        ("a: &x 1\nb: &x 2\n", "q.yaml, line 2: not valid YAML: the anchor &x is defined twice (first at line 1)."),
        (
            MEMBERS + "question: *x\n",
            "q.yaml, line 6: not valid YAML: the alias *x is used before an anchor &x defines it.",
        ),
        (
            MEMBERS + "---\nname: b\n",
            "q.yaml, line 6: not valid YAML: a second YAML document starts here; a file holds one.",
        ),
        (
            MEMBERS + "question: a\x00b\n",
            "q.yaml, line 6: not valid YAML: the character #x0000 is not allowed in a YAML file.",
        ),
    ],
)
def test_syntax_errors_name_the_line_where_the_construct_starts(text, expected):
    with pytest.raises(ConfigError) as caught:
        parse_panel(text, "q.yaml")
    assert caught.value.message == expected
    assert 1 <= caught.value.line <= len(text.splitlines())


def test_no_mutation_of_a_panel_file_ends_in_anything_but_a_located_config_error():
    base = Path("configs/question.yaml").read_text()
    pieces = [*"[]{}:-'\"&*!|>#%@`,?\n\t ", "\x00", "${X}", "<<: ", "!!python/", "&a", "*a", "- - -"]
    rng = random.Random(7)
    for _ in range(1500):
        text = list(base)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(text))
            if rng.random() < 0.5:
                text.insert(at, rng.choice(pieces))
            else:
                text[at] = rng.choice(pieces)
        mutated = "".join(text)
        try:
            parse_panel(mutated, "m.yaml")
        except ConfigError as exc:
            lines = [problem.line for problem in exc.problems if problem.line is not None]
            assert all(1 <= line <= len(mutated.splitlines()) for line in lines), exc.message


# Hostile files ---------------------------------------------------------------------------------

LAUGHS = "".join(
    f"{name}: &{name} [{', '.join([f'*{previous}'] * 9) if previous else ', '.join(['lol'] * 9)}]\n"
    for previous, name in zip([None, *"abcdefgh"], "abcdefghi", strict=True)
)


def test_billion_laughs_is_refused_at_the_alias_that_crosses_the_budget():
    assert len(LAUGHS.encode()) < 600
    with pytest.raises(ConfigError) as caught:
        parse_panel(LAUGHS, "laughs.yaml")
    assert caught.value.message == (
        "laughs.yaml, line 5: the alias *d takes the values repeated through aliases past 10000, the most a file may repeat."
    )


@pytest.mark.parametrize("text", ["a: &a [*a]\n", "a: &a {b: *a}\n"])
def test_an_alias_inside_its_own_value_is_refused(text):
    assert (
        error_of(text) == "panel.yaml, line 1: the alias *a is used inside the value it names, which would never end."
    )


def test_aliases_cannot_nest_past_the_depth_limit():
    text = "a: &a " + "[" * 90 + "]" * 90 + "\nb: " + "[" * 20 + "*a" + "]" * 20 + "\n"
    assert error_of(text) == "panel.yaml, line 2: values are nested more than 100 levels deep here."


@pytest.mark.parametrize("levels", [2000, 100_000])
@pytest.mark.parametrize("opener", ["[", "{a: ", "- "])
def test_deep_nesting_is_refused_before_the_composer_recurses(opener, levels):
    assert error_of(opener * levels + "x\n") == "panel.yaml, line 1: values are nested more than 100 levels deep here."


def test_deep_block_indentation_is_refused_at_the_line_that_goes_too_deep():
    text = "".join("  " * level + "-\n" for level in range(300))
    assert error_of(text) == "panel.yaml, line 101: values are nested more than 100 levels deep here."


def test_the_depth_limit_is_exactly_a_hundred_levels():
    assert parse_yaml("[" * 100 + "]" * 100, "p.yaml").data is not None
    with pytest.raises(ConfigError, match="nested more than 100 levels"):
        parse_yaml("[" * 101 + "]" * 101, "p.yaml")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("!custom x", "question: the tag '!custom' is not supported; a panel file holds plain YAML values."),
        (
            "!!python/object:os.system x",
            "question: the tag '!!python/object:os.system' is not supported; a panel file holds plain YAML values.",
        ),
        (
            "!!python/object/apply:os.system [echo]",
            "question: the tag '!!python/object/apply:os.system' is not supported; a panel file holds plain YAML values.",
        ),
        ("!!set {a: null}", "question: the tag '!!set' is not supported; a panel file holds plain YAML values."),
        ("2024-13-45", "question: '2024-13-45' cannot be read as a date; put it in quotes to keep it as text."),
        ("!!int abc", "question: 'abc' cannot be read as an integer; put it in quotes to keep it as text."),
    ],
)
def test_only_plain_yaml_values_are_accepted(value, expected):
    assert error_of(MEMBERS + f"question: {value}\n") == f"panel.yaml, line 6: {expected}"


def test_a_file_with_too_many_values_is_refused_while_it_is_read():
    text = MEMBERS + "options: [" + "0, " * 60_000 + "0]\n"
    assert (
        error_of(text)
        == "panel.yaml, line 6: the file holds more than 50000 values by here, far more than a panel needs."
    )


def test_a_long_list_of_problems_ends_with_a_count():
    lines = error_of(MEMBERS + "".join(f"extra{index}: x\n" for index in range(60))).splitlines()
    assert len(lines) == 51
    assert lines[0] == "panel.yaml, line 6: extra0: unknown field."
    assert lines[-1] == "panel.yaml: and 10 more problems."


def test_a_key_must_be_a_plain_name_and_the_other_fields_are_still_checked():
    assert error_of(MEMBERS + "? [a, b]\n: c\nmax_rounds: 0\n").splitlines() == [
        "panel.yaml, line 6: a key must be a plain name, not a list or a mapping.",
        "panel.yaml, line 8: max_rounds: input should be greater than or equal to 1.",
    ]


def test_merge_keys_share_fields_between_members():
    panel = parse_panel(
        "members:\n  - &base {name: a, model: demo/sage, temperature: 0.2}\n  - {<<: *base, name: b}\n", "p.yaml"
    )
    assert [(m.name, m.model, m.temperature) for m in panel.members] == [
        ("a", "demo/sage", 0.2),
        ("b", "demo/sage", 0.2),
    ]
    assert panel.line_of(("members", 1, "name")) == 3


def test_a_panel_file_over_the_size_limit_is_refused_before_parsing(tmp_path):
    file = tmp_path / "big.yaml"
    file.write_bytes(MEMBERS.encode() + b"# padding\n" * (MAX_FILE_BYTES // 10))
    with pytest.raises(ConfigError) as caught:
        load_panel(file)
    assert caught.value.message == f"{file}: the file is larger than 1 MiB, too big for a panel file."


def test_a_panel_file_that_is_not_utf8_names_the_line_of_the_first_bad_byte(tmp_path):
    file = tmp_path / "latin.yaml"
    file.write_bytes(MEMBERS.encode() + "question: café?\n".encode("latin-1"))
    with pytest.raises(ConfigError) as caught:
        load_panel(file)
    assert caught.value.message == f"{file}, line 6: the file is not UTF-8 text (byte 0xe9); save it as UTF-8."


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    file = tmp_path / "bom.yaml"
    file.write_bytes(b"\xef\xbb\xbf" + MEMBERS.encode())
    assert load_panel(file).member_names == ["a", "b"]


def test_a_folder_is_not_a_panel_file(tmp_path):
    with pytest.raises(UserError, match=r"is a folder, not a panel file\.$"):
        load_panel(tmp_path)


@pytest.mark.parametrize("typed", ["question.yaml", "examples/question.yaml"])
def test_a_missing_panel_file_points_at_the_one_in_configs(tmp_path, monkeypatch, typed):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "question.yaml").write_text(MEMBERS)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as caught:
        load_panel(typed)
    assert caught.value.message == f"{typed}: no such file (there is configs/question.yaml)."


# question and question_file ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            "question: Why?\nquestion_file: q.md\n",
            "panel.yaml, line 7: question_file: give 'question' or 'question_file', not both.",
        ),
        (
            "question_file: q.md\nquestion: Why?\n",
            "panel.yaml, line 7: question: give 'question' or 'question_file', not both.",
        ),
    ],
)
def test_question_and_question_file_together_point_at_the_second(fields, expected):
    assert error_of(MEMBERS + fields) == expected


def question_panel(tmp_path: Path, name: str = "q.md") -> tuple[Path, Panel]:
    panel_file = tmp_path / "panel.yaml"
    panel_file.write_text(MEMBERS + f"question_file: {name}\n")
    return panel_file, load_panel(panel_file)


def test_question_file_resolves_against_the_panel_folder(tmp_path, monkeypatch):
    panel_file, panel = question_panel(tmp_path)
    (tmp_path / "q.md").write_text("\n  From the file?\n")
    monkeypatch.chdir("/")
    assert read_question_file(panel, panel_file.parent) == "From the file?"


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda path: None, "q.md: no such file."),
        (lambda path: path.mkdir(), "q.md: is a folder, not a file."),
        (
            lambda path: path.write_bytes(b"Line one\nCaf\xe9?\n"),
            "q.md: line 2 is not UTF-8 text (byte 0xe9); save it as UTF-8.",
        ),
        (
            lambda path: path.write_bytes(b"x" * (MAX_FILE_BYTES + 1)),
            "q.md: is larger than 1 MiB, too big for a question.",
        ),
        (lambda path: path.write_text(" \n\n"), "q.md: the file is empty."),
    ],
)
def test_question_file_problems_are_located_at_the_field(tmp_path, make: Callable[[Path], None], problem):
    panel_file, panel = question_panel(tmp_path)
    make(tmp_path / "q.md")
    with pytest.raises(ConfigError) as caught:
        read_question_file(panel, panel_file.parent)
    assert caught.value.message == f"{panel_file}, line 6: question_file: {problem}"


def test_question_text_refuses_a_device_without_reading_it():
    with pytest.raises(ConfigError) as caught:
        read_question_text(Path("/dev/zero"), file="p.yaml", line=3)
    assert caught.value.message == (
        "p.yaml, line 3: question_file: /dev/zero: is not a regular file (a pipe, a device or a socket); put the question in a file."
    )


class Stdin:
    """A stand-in for the CLI's stdin reader that records whether it was read."""

    def __init__(self, text: str | None) -> None:
        self.text, self.calls = text, 0

    def __call__(self) -> str | None:
        self.calls += 1
        return self.text


def test_question_sources_in_order(tmp_path: Path):
    (tmp_path / "q.md").write_text("From the file?\n")
    from_file = parse_panel(MEMBERS + "question_file: q.md\n", "p.yaml")
    with_question = parse_panel(MEMBERS + "question: From the panel?\n", "p.yaml")
    bare = parse_panel(MEMBERS, "p.yaml")
    assert resolve_question(with_question, tmp_path, "From -q?", Stdin("From stdin?")) == "From -q?"
    assert resolve_question(with_question, tmp_path, None, Stdin("From stdin?")) == "From the panel?"
    assert resolve_question(from_file, tmp_path, None, Stdin("From stdin?")) == "From the file?"
    assert resolve_question(bare, tmp_path, None, Stdin(" From stdin?\n")) == "From stdin?"
    assert resolve_question(with_question, tmp_path, "-", Stdin("Forced stdin?")) == "Forced stdin?"


def test_stdin_is_read_only_when_no_other_source_gives_a_question(tmp_path: Path):
    (tmp_path / "q.md").write_text("From the file?\n")
    for panel, given in [
        (parse_panel(MEMBERS + "question: From the panel?\n", "p.yaml"), None),
        (parse_panel(MEMBERS + "question_file: q.md\n", "p.yaml"), None),
        (parse_panel(MEMBERS, "p.yaml"), "From -q?"),
    ]:
        stdin = Stdin("never read")
        resolve_question(panel, tmp_path, given, stdin)
        assert stdin.calls == 0


@pytest.mark.parametrize("piped", [None, "", "  \n"])
def test_dash_q_dash_needs_something_on_stdin(piped):
    with pytest.raises(UserError) as caught:
        resolve_question(parse_panel(MEMBERS + "question: Q?\n", "p.yaml"), None, "-", Stdin(piped))
    assert caught.value.message == "-q -: nothing was piped on stdin."


@pytest.mark.parametrize("piped", [None, " \n"])
def test_no_question_anywhere_is_one_sentence(piped):
    with pytest.raises(UserError) as caught:
        resolve_question(parse_panel(MEMBERS, "p.yaml"), None, None, Stdin(piped))
    assert (
        caught.value.message
        == "No question: give one with -q, as 'question' or 'question_file' in the panel file, or on stdin."
    )


# Aliases -----------------------------------------------------------------------------------------


def user_aliases(monkeypatch, tmp_path: Path, text: str) -> Path:
    config = tmp_path / "alias-config"
    config.mkdir()
    file = config / "aliases.yaml"
    file.write_text(text)
    monkeypatch.setenv("PANEL_CONFIG_DIR", str(config))
    return file


def test_a_broken_alias_file_matters_only_to_a_panel_with_a_short_name(tmp_path, monkeypatch):
    file = user_aliases(monkeypatch, tmp_path, "gpt-4o: [openai/gpt-4o\n")
    panel = parse_panel("members:\n  - {name: a, model: demo/sage}\n  - {name: b, model: openai/x}\n", "p.yaml")
    assert [m.model for m in panel.members] == ["demo/sage", "openai/x"]
    with pytest.raises(ConfigError) as caught:
        parse_panel("members:\n  - {name: a, model: gpt-4o}\n", "p.yaml")
    assert (
        caught.value.message
        == f"{file}, line 1: not valid YAML: the '[' opened here is never closed (the parser reached the end of the file)."
    )


def test_an_alias_file_that_is_a_folder_is_refused_by_name(tmp_path, monkeypatch):
    config = tmp_path / "alias-config"
    (config / "aliases.yaml").mkdir(parents=True)
    monkeypatch.setenv("PANEL_CONFIG_DIR", str(config))
    with pytest.raises(UserError, match=r"aliases\.yaml: is a folder, not a file of aliases\.$"):
        load_aliases()


def test_load_aliases_lists_every_problem_of_the_user_file(tmp_path, monkeypatch):
    file = user_aliases(
        monkeypatch,
        tmp_path,
        "fast: openai/gpt-4o-mini\nlocal:\n  model: openai/qwen\n  api_bsae: http://127.0.0.1:8000\n"
        "openai/gpt: openai/gpt-4o\nodd: 12\nsecret:\n  model: openai/x\n  api_base: http://me:hunter2@box/v1\n",
    )
    with pytest.raises(ConfigError) as caught:
        load_aliases()
    assert caught.value.message.splitlines() == [
        f"{file}, line 4: local.api_bsae: unknown field (did you mean 'api_base'?).",
        f"{file}, line 5: openai/gpt: an alias is a short name without '/'; a name with a provider prefix is a model id already.",
        f"{file}, line 6: odd: an alias is a model id, or a mapping with 'model' and optionally 'api_base'.",
        f"{file}, line 9: secret.api_base: a user or password in the URL is not supported; put the key in an environment variable and name it with api_key_env.",
    ]
    assert "hunter2" not in caught.value.message


def test_a_valid_user_alias_file_still_extends_the_table(tmp_path, monkeypatch):
    user_aliases(monkeypatch, tmp_path, "# mine\nfast: openai/gpt-4o-mini\n")
    assert load_aliases()["fast"].model == "openai/gpt-4o-mini"
    assert load_aliases()["claude"].model.startswith("anthropic/")


# What a parsed panel remembers -----------------------------------------------------------------------


def test_a_parsed_panel_keeps_its_file_lines_and_expanded_values(monkeypatch):
    monkeypatch.setenv("PANEL_TEST_BASE", "http://127.0.0.1:9999/v1")
    monkeypatch.setenv("PANEL_TEST_SYSTEM", "Be brief.")
    panel = parse_panel(
        "members:\n  - name: a\n    model: openai/x\n    api_base: ${PANEL_TEST_BASE}\n"
        "  - name: b\n    model: demo/sage\n    system: ${PANEL_TEST_SYSTEM} ${PANEL_TEST_BASE}\n",
        "p.yaml",
    )
    for copy in (panel, panel.model_copy(update={"max_rounds": 5}), panel.as_demo()):
        assert copy.source_file == "p.yaml"
        assert copy.expanded_values == ["http://127.0.0.1:9999/v1", "Be brief."]
        assert copy.line_of(("members", 1, "system")) == 7
        assert copy.line_of(("members", 1, "temperature")) == 5, "an absent field takes the line of what contains it"


def test_with_members_moves_the_lines_with_the_members():
    panel = parse_panel(MEMBERS + "  - name: c\n    model: demo/engineer\n", "p.yaml")
    subset = panel.with_members(["c", "a"])
    assert subset.member_names == ["c", "a"]
    assert (subset.line_of(("members", 0, "model")), subset.line_of(("members", 1, "model"))) == (7, 3)
    assert subset.source_file == "p.yaml"


def test_a_panel_from_members_has_no_file():
    panel = panel_from_members(["demo/sage", "demo/skeptic"])
    assert (panel.source_file, panel.expanded_values, panel.line_of(("members", 0))) == (None, [], None)


# Credentials in URLs, and members named twice ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "field", "line"),
    [
        (
            MEMBERS + "  - name: c\n    model: openai/x\n    api_base: http://user:hunter2@host/v1\n",
            "members[2].api_base",
            8,
        ),
        (MEMBERS + "chairman: {name: j, model: openai/x, api_base: 'https://hunter2@host'}\n", "chairman.api_base", 6),
        (MEMBERS + "  - name: c\n    model: openai/x\n    api_base: ${PANEL_TEST_URL}\n", "members[2].api_base", 8),
        (
            MEMBERS + "  - name: c\n    model: openai/x\n    api_base: user:hunter2@host:8000\n",
            "members[2].api_base",
            8,
        ),
    ],
)
def test_credentials_in_api_base_are_refused_without_echoing_them(monkeypatch, text, field, line):
    monkeypatch.setenv("PANEL_TEST_URL", "http://me:hunter2@box:8000/v1")
    message = error_of(text)
    assert message == (
        f"panel.yaml, line {line}: {field}: a user or password in the URL is not supported; "
        "put the key in an environment variable and name it with api_key_env."
    )
    assert "hunter2" not in message


def test_an_at_sign_in_the_path_of_api_base_is_fine():
    panel = parse_panel("members:\n  - {name: a, model: openai/x, api_base: 'http://host/v1/@team'}\n", "p.yaml")
    assert panel.members[0].api_base == "http://host/v1/@team"


@pytest.mark.parametrize("option", ["--agents", "--members"])
def test_with_members_refuses_a_name_given_twice(option):
    panel = parse_panel(MEMBERS, "p.yaml")
    with pytest.raises(UserError) as caught:
        panel.with_members(["a", "b", "a"], option)
    assert caught.value.message == f"{option}: 'a' is given twice."


def test_repeated_model_ids_stay_legal_in_a_panel_from_members():
    panel = panel_from_members(["demo/sage", "demo/sage", "demo/sage"], ["demo/sage"])
    assert panel.member_names == ["demo/sage", "demo/sage-2", "demo/sage-3"]
    assert [c.name for c in panel.chairmen()] == ["demo/sage"]


@pytest.mark.parametrize("role", ["chairman", "critic", "planner"])
def test_an_inline_role_may_not_take_a_members_name(role):
    text = f"{MEMBERS}{role}:\n  name: a\n  model: demo/sage\n"
    assert (
        error_of(text)
        == f"panel.yaml, line 7: {role}.name: 'a' is a member's name; an inline member needs a name of its own."
    )
