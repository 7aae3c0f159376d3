"""`panel mcp`'s server in process, driven by the MCP SDK's own client (`mcp.Client`, whose
`session` is a `ClientSession`) over the SDK's in-memory transport: the tools and their schemas,
a run's result, every refusal (and that it starts nothing), resources, history and progress.
The same server over stdio and HTTP, as a real process, is tests/mcp_server/test_processes.py."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import shutil
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from panel_cli.mcp_server.folders import quoted
from panel_cli.mcp_server.server import PanelServer, ServerSettings
from panel_cli.protocols import registry
from panel_cli.protocols.registry import names
from tests.fakes.openai_server import FakeOpenAIServer, responder
from tests.helpers import write_panel
from tests.protocols.test_registry import ECHO as TOY

PROTOCOLS = ["confer", "council", "decide", "delphi", "ensemble", "orchestrate", "supervise", "vote"]


def settings_for(panels: Path, tmp_path: Path, **changes: Any) -> ServerSettings:
    return ServerSettings(panels=panels, db=tmp_path / "mcp.db", **changes)


@contextlib.asynccontextmanager
async def connected(settings: ServerSettings) -> AsyncIterator[Client]:
    async with Client(PanelServer(settings).lowlevel()) as client:
        yield client


def stored_runs(db: Path) -> list[tuple[str, str]]:
    """(id, status) of every run in the store; none when it was never created."""
    if not db.exists():
        return []
    with contextlib.closing(sqlite3.connect(db)) as con:
        return con.execute("SELECT id, status FROM runs ORDER BY started_at").fetchall()


async def tools_by_name(client: Client) -> dict[str, Any]:
    listed = await client.session.list_tools()
    return {tool.name: tool for tool in listed.tools}


def text_of(result: Any) -> str:
    (content,) = result.content
    return str(content.text)


# -- the tools ----------------------------------------------------------------------------------


async def test_every_protocol_is_a_tool_beside_list_panels_and_history(panels: Path, tmp_path: Path) -> None:
    async with connected(settings_for(panels, tmp_path)) as client:
        tools = await tools_by_name(client)

    assert list(tools) == [*PROTOCOLS, "list_panels", "history"]
    assert list(names()) == PROTOCOLS
    confer = tools["confer"]
    assert confer.description.startswith("Every member answers, then votes anonymously")
    assert "Panels: demo (confer: sage, skeptic, pragmatist, engineer)." in confer.description
    assert "at most $1 " in confer.description
    assert confer.output_schema["properties"]["run_id"] == {"title": "Run Id", "type": "string"}
    assert tools["history"].annotations.read_only_hint is True


async def test_each_option_is_typed_and_bounded_as_its_spec_declares(panels: Path, tmp_path: Path) -> None:
    async with connected(settings_for(panels, tmp_path, max_cost=0.25)) as client:
        tools = await tools_by_name(client)

    vote = tools["vote"].input_schema
    assert vote["required"] == ["question", "panel"]
    assert vote["additionalProperties"] is False
    assert vote["properties"]["panel"]["enum"] == ["vote"]
    assert vote["properties"]["options"]["type"] == "array"
    assert vote["properties"]["options"]["items"]["type"] == "string"
    assert {key: vote["properties"]["quorum"][key] for key in ("type", "minimum", "maximum")} == {
        "type": "integer",
        "minimum": 1,
        "maximum": 1_000_000,
    }
    assert vote["properties"]["threshold"]["type"] == "number"
    assert vote["properties"]["max_cost"]["maximum"] == 0.25
    confer = tools["confer"].input_schema["properties"]
    assert (confer["max_rounds"]["minimum"], confer["max_rounds"]["maximum"]) == (1, 50)
    assert confer["no_convergence"]["type"] == "boolean"
    assert confer["question"]["maxLength"] == 100_000
    assert "attach" not in confer  # no --files folder, no attachments


# The toy protocol of tests/protocols/test_registry.py, its option bounded.
ECHO = dataclasses.replace(
    TOY,
    options=(
        registry.CommandOption(
            name="times",
            flag="--times",
            help="How many times each member answers.",
            kind="int",
            field="times",
            minimum=1,
            maximum=4,
        ),
    ),
)


@pytest.fixture
def echo_protocol() -> Iterator[registry.ProtocolSpec]:
    registry.register(ECHO)
    try:
        yield ECHO
    finally:
        registry.unregister("echo")


async def test_a_registered_protocol_gets_its_tool_and_runs(echo_protocol, panels: Path, tmp_path: Path) -> None:
    members = "".join(f"  - name: {name}\n    model: demo/{name}\n" for name in ("sage", "skeptic"))
    (panels / "echoes.yaml").write_text(f"protocol: echo\nmembers:\n{members}", encoding="utf-8")
    async with connected(settings_for(panels, tmp_path)) as client:
        tools = await tools_by_name(client)
        result = await client.call_tool("echo", {"question": "Again?", "panel": "echoes", "times": 3})
        refused = await client.call_tool("echo", {"question": "Again?", "panel": "echoes", "times": 5})

    schema = tools["echo"].input_schema
    assert schema["properties"]["times"] == {
        "type": "integer",
        "description": "How many times each member answers.",
        "minimum": 1,
        "maximum": 4,
    }
    assert schema["properties"]["panel"]["enum"] == ["echoes"]
    assert "Panels: echoes (echo: sage, skeptic)." in tools["echo"].description
    assert result.structured_content["final_answer"] == "sage echoes: Again?"
    assert result.structured_content["calls"] == 6
    assert (refused.is_error, text_of(refused)) == (True, "times: must be at most 4.")


# -- a run -------------------------------------------------------------------------------------


async def test_confer_on_a_demo_panel_returns_its_json_result_and_its_answer(panels: Path, tmp_path: Path) -> None:
    settings = settings_for(panels, tmp_path)
    async with connected(settings) as client:
        result = await client.call_tool("confer", {"question": "Tabs or spaces?", "panel": "demo", "max_rounds": 2})

    envelope = result.structured_content
    assert result.is_error is False
    assert (envelope["protocol"], envelope["question"], envelope["reached_answer"]) == (
        "confer",
        "Tabs or spaces?",
        True,
    )
    assert envelope["cost_basis"] == "simulated" and envelope["cost"] == 0.0
    assert envelope["calls"] == envelope["calls_by_status"]["answered"] == 8  # 4 members x (answer + 1 vote)
    assert envelope["converged"] is True and envelope["winner"] in ("sage", "skeptic", "pragmatist", "engineer")
    answer, footer = text_of(result).rsplit("\n\n", 1)
    assert answer == envelope["final_answer"]
    assert footer == (
        f"— panel demo (confer: sage, skeptic, pragmatist, engineer) · 8 calls · simulated, free · run {envelope['run_id']}"
    )
    assert stored_runs(settings.db) == [(envelope["run_id"], "finished")]


async def test_a_run_without_an_answer_is_an_error_result_that_keeps_its_envelope(panels: Path, tmp_path: Path) -> None:
    async with connected(settings_for(panels, tmp_path)) as client:
        result = await client.call_tool(
            "vote",
            {
                "question": "Which database should a five-person startup build on?",
                "panel": "vote",
                "method": "unanimous",
            },
        )

    envelope = result.structured_content
    assert result.is_error is True
    assert envelope["reached_answer"] is False and envelope["final_answer"] is None
    assert envelope["failure_reason"].startswith("the votes are split (")
    assert text_of(result).startswith(f"No answer: {envelope['failure_reason']} (run {envelope['run_id']}).")


async def test_progress_is_sent_as_calls_end(panels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PANEL_DEMO_DELAY", "0.01")  # the calls end apart, so none is merged with the next
    seen: list[tuple[float, str | None]] = []

    async def progressed(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async with connected(settings_for(panels, tmp_path)) as client:
        result = await client.call_tool(
            "confer", {"question": "Tabs?", "panel": "demo", "max_rounds": 1}, progress_callback=progressed
        )

    assert result.is_error is False
    progresses = [progress for progress, _ in seen]
    assert progresses == sorted(set(progresses)) and progresses[-1] == 8.0
    messages = [message for _, message in seen]
    assert messages[-1] == "confer vote round 1: 4 of 4 calls"
    assert any(message is not None and message.startswith("confer answer: ") for message in messages)


# -- refusals: one sentence, isError, nothing started --------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "sentence"),
    [
        ({"question": "Q", "panel": "../x"}, "panel: '../x' is not a panel this tool runs; choose one of: demo."),
        (
            {"question": "Q", "panel": "/etc/passwd"},
            "panel: '/etc/passwd' is not a panel this tool runs; choose one of: demo.",
        ),
        ({"question": "Q", "panel": "vote"}, "panel: 'vote' is not a panel this tool runs; choose one of: demo."),
        ({"question": "Q"}, "panel is required."),
        (
            {"question": "Q", "panel": "demo", "model": "openai/x"},
            "'model' is not an argument of this tool; its arguments:",
        ),
        ({"question": "Q", "panel": "demo", "max_rounds": True}, "max_rounds: must be an integer."),
        ({"question": "Q", "panel": "demo", "max_rounds": 0}, "max_rounds: must be at least 1."),
        ({"question": "Q", "panel": "demo", "max_cost": 2}, "max_cost: must be at most 1."),
        ({"question": "Q" * 100_001, "panel": "demo"}, "question: must be at most 100,000 characters long."),
        ({"question": " \n", "panel": "demo"}, "question: it is blank."),
        (
            {"question": "Q", "panel": "demo", "members": "sage,nobody"},
            "'nobody' is not a member of panel 'demo' (members: sage, skeptic, pragmatist, engineer).",
        ),
    ],
)
async def test_a_request_outside_the_rules_is_refused_and_starts_nothing(
    panels: Path, tmp_path: Path, arguments: dict[str, Any], sentence: str
) -> None:
    settings = settings_for(panels, tmp_path)
    async with connected(settings) as client:
        result = await client.call_tool("confer", arguments)

    assert result.is_error is True and result.structured_content is None
    assert text_of(result).startswith(sentence)
    assert stored_runs(settings.db) == []


async def test_a_symlink_out_of_the_folder_is_no_panel(panels: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.yaml"
    shutil.copy(panels / "demo.yaml", outside)
    (panels / "escape.yaml").symlink_to(outside)
    (panels / "alias.yaml").symlink_to(panels / "demo.yaml")  # a symlink inside the folder is a panel
    settings = settings_for(panels, tmp_path)
    async with connected(settings) as client:
        tools = await tools_by_name(client)
        result = await client.call_tool("confer", {"question": "Q", "panel": "escape"})

    assert tools["confer"].input_schema["properties"]["panel"]["enum"] == ["alias", "demo"]
    assert text_of(result) == "panel: 'escape' is not a panel this tool runs; choose one of: alias, demo."
    assert stored_runs(settings.db) == []


async def test_an_unknown_tool_is_a_protocol_error(panels: Path, tmp_path: Path) -> None:
    async with connected(settings_for(panels, tmp_path)) as client:
        with pytest.raises(MCPError, match="Unknown tool: 'shell'"):
            await client.call_tool("shell", {"command": "id"})


async def test_a_run_over_the_cap_is_refused_with_its_estimate(
    fake_server: FakeOpenAIServer, panels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-for-the-fake")
    write_panel(panels / "priced.yaml", fake_server, ["gpt", "claude"], "protocol: confer", model="openai/gpt-4o")
    settings = settings_for(panels, tmp_path, max_cost=0.0001)
    async with connected(settings) as client:
        result = await client.call_tool("confer", {"question": "How should we architect auth?", "panel": "priced"})

    assert result.is_error is True
    assert re.fullmatch(
        r"This run would cost \$0\.\d{4} to \$\d\.\d{4} \(4 to 8 calls, by panel estimate\), "
        r"more than the cap of \$0\.0001 a run; nothing was started\.",
        text_of(result),
    )
    assert fake_server.requests == [] and stored_runs(settings.db) == []


async def test_a_key_in_an_answer_never_reaches_the_agent(
    fake_server: FakeOpenAIServer, panels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "fake-key-for-this-test"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    fake_server.default(responder(lambda request: f"The key is {key}."))
    write_panel(panels / "leaky.yaml", fake_server, ["a", "b"], "protocol: ensemble", "mode: fanout")
    settings = settings_for(panels, tmp_path, allow_unknown_prices=True)
    async with connected(settings) as client:
        result = await client.call_tool("ensemble", {"question": "Which key?", "panel": "leaky"})

    assert result.is_error is False
    assert key not in text_of(result) and key not in str(result.structured_content)
    assert "[redacted]" in text_of(result)


# -- the default panel ----------------------------------------------------------------------------


async def test_the_folder_default_panel_runs_when_none_is_named(panels: Path, tmp_path: Path) -> None:
    shutil.copy(panels / "demo.yaml", panels / "default.yaml")
    async with connected(settings_for(panels, tmp_path)) as client:
        tools = await tools_by_name(client)
        result = await client.call_tool("confer", {"question": "Q", "max_rounds": 1})

    assert tools["confer"].input_schema["required"] == ["question"]
    assert tools["vote"].input_schema["required"] == ["question", "panel"]  # default.yaml is confer's
    assert result.is_error is False and result.structured_content["calls"] == 8


async def test_the_users_default_panel_runs_when_the_folder_has_none(panels: Path, tmp_path: Path) -> None:
    members = "".join(f"  - name: {name}\n    model: demo/{name}\n" for name in ("sage", "skeptic", "engineer"))
    (tmp_path / "panel-config" / "defaults.yaml").write_text(f"members:\n{members}", encoding="utf-8")
    async with connected(settings_for(panels, tmp_path)) as client:
        result = await client.call_tool("council", {"question": "Q"})

    assert result.is_error is False
    assert "— panel defaults (council: sage, skeptic, engineer)" in text_of(result)


# -- attachments ----------------------------------------------------------------------------------


async def test_attachments_come_only_from_the_files_folder(
    fake_server: FakeOpenAIServer, panels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-for-the-fake")
    files = tmp_path / "files"
    (files / "notes").mkdir(parents=True)
    (files / "notes" / "brief.md").write_text("The launch is on Tuesday.", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("not for the models", encoding="utf-8")
    (files / "leak.txt").symlink_to(tmp_path / "secret.txt")
    write_panel(panels / "fanout.yaml", fake_server, ["a"], "protocol: ensemble", "mode: fanout")
    settings = settings_for(panels, tmp_path, files=files, allow_unknown_prices=True)
    async with connected(settings) as client:
        attached = await client.call_tool(
            "ensemble", {"question": "When?", "panel": "fanout", "attach": ["notes/brief.md"]}
        )
        refused = {
            entry: text_of(await client.call_tool("ensemble", {"question": "Q", "panel": "fanout", "attach": [entry]}))
            for entry in ("leak.txt", "../secret.txt", str(tmp_path / "secret.txt"), "missing.md")
        }

    assert attached.is_error is False
    (request,) = fake_server.requests
    assert "The launch is on Tuesday." in str(request.messages)
    for entry, refusal in refused.items():
        assert refusal == f"attach: {quoted(entry)} is not a file in {files}; give a path inside that folder."
    assert len(stored_runs(settings.db)) == 1


async def test_without_a_files_folder_attach_is_no_argument(panels: Path, tmp_path: Path) -> None:
    async with connected(settings_for(panels, tmp_path)) as client:
        result = await client.call_tool("confer", {"question": "Q", "panel": "demo", "attach": ["x.md"]})

    assert text_of(result).startswith("'attach' is not an argument of this tool")


# -- resources, list_panels, history -------------------------------------------------------------


async def test_a_run_reads_back_as_markdown_and_a_panel_as_written(panels: Path, tmp_path: Path) -> None:
    async with connected(settings_for(panels, tmp_path)) as client:
        result = await client.call_tool("confer", {"question": "Tabs or spaces?", "panel": "demo", "max_rounds": 1})
        run_id = result.structured_content["run_id"]
        listed = await client.list_resources()
        templates = await client.list_resource_templates()
        run = await client.read_resource(f"panel://runs/{run_id}")
        panel = await client.read_resource("panel://panels/demo")
        with pytest.raises(MCPError, match="No run has the id 'nosuchrun'"):
            await client.read_resource("panel://runs/nosuchrun")
        with pytest.raises(MCPError, match="is not a panel in"):
            await client.read_resource("panel://panels/..%2Fsecret")
        with pytest.raises(MCPError, match="is no resource here"):
            await client.read_resource("file:///etc/passwd")

    uris = [str(resource.uri) for resource in listed.resources]
    assert uris == [f"panel://runs/{run_id}", "panel://panels/demo", "panel://panels/vote"]
    assert [template.uri_template for template in templates.resource_templates] == [
        "panel://runs/{run_id}",
        "panel://panels/{name}",
    ]
    (markdown,) = run.contents
    assert markdown.mime_type == "text/markdown"
    assert markdown.text.startswith("# panel confer · demo\n\n> Tabs or spaces?")
    assert f"- **run:** `{run_id}`" in markdown.text
    assert panel.contents[0].text == (panels / "demo.yaml").read_text(encoding="utf-8")


async def test_list_panels_gives_members_protocol_and_estimate(panels: Path, tmp_path: Path) -> None:
    (panels / "broken.yaml").write_text("members: [", encoding="utf-8")
    async with connected(settings_for(panels, tmp_path)) as client:
        result = await client.call_tool("list_panels", {})

    entries = {entry["name"]: entry for entry in result.structured_content["panels"]}
    assert list(entries) == ["broken", "demo", "vote"]
    demo = entries["demo"]
    assert demo["protocol"] == "confer" and [m["name"] for m in demo["members"]] == [
        "sage",
        "skeptic",
        "pragmatist",
        "engineer",
    ]
    assert demo["estimate"]["calls_low"] == 8 and demo["estimate"]["calls_high"] == 16  # 1 round moving nothing, else 3
    assert demo["estimate"]["cost"] == "simulated, free" and demo["uri"] == "panel://panels/demo"
    assert entries["broken"]["problem"].startswith(f"{panels / 'broken.yaml'}")
    assert "demo (confer: sage, skeptic, pragmatist, engineer): 8 to 16 calls, simulated, free" in text_of(result)


async def test_history_finds_runs_as_history_list_does(panels: Path, tmp_path: Path) -> None:
    async with connected(settings_for(panels, tmp_path)) as client:
        first = await client.call_tool("confer", {"question": "Tabs or spaces?", "panel": "demo", "max_rounds": 1})
        await client.call_tool("vote", {"question": "Which database?", "panel": "vote"})
        everything = await client.call_tool("history", {})
        found = await client.call_tool("history", {"search": "tabs"})
        votes = await client.call_tool("history", {"protocol": "vote", "limit": 1})
        refused = await client.call_tool("history", {"limit": 0})

    assert [run["protocol"] for run in everything.structured_content["runs"]] == ["vote", "confer"]
    (tabs,) = found.structured_content["runs"]
    assert tabs["run_id"] == first.structured_content["run_id"] and tabs["status"] == "finished"
    assert tabs["uri"] == f"panel://runs/{tabs['run_id']}"
    assert [run["question"] for run in votes.structured_content["runs"]] == ["Which database?"]
    assert text_of(refused) == "limit: must be at least 1."


async def test_a_panel_read_as_a_resource_hides_the_credentials_it_spells_out(panels: Path, tmp_path: Path) -> None:
    """A tool server's token written into the file reaches no agent; a `${VAR}` reference and
    the headers that carry no credential are left to read."""
    (panels / "tooled.yaml").write_text(
        (panels / "demo.yaml").read_text(encoding="utf-8")
        + "tools:\n  docs:\n    url: https://tools.example/mcp\n    headers:\n"
        + "      Authorization: Bearer literal-123456789\n      X-Api-Key: ${DOCS_KEY}\n"
        + "      Accept: application/json\n  local:\n    command: docs-server\n    env:\n"
        + "      GITHUB_TOKEN: fake-test-gh-0001\n      LOG_LEVEL: debug-verbose\n",
        encoding="utf-8",
    )
    async with connected(settings_for(panels, tmp_path)) as client:
        read = await client.read_resource("panel://panels/tooled")

    text = read.contents[0].text
    assert "literal-123456789" not in text and "fake-test-gh-0001" not in text
    assert "Authorization: [redacted]" in text and "GITHUB_TOKEN: [redacted]" in text
    assert (
        "X-Api-Key: ${DOCS_KEY}" in text and "Accept: application/json" in text and "LOG_LEVEL: debug-verbose" in text
    )


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("name: caf\xe9\n".encode("latin-1"), "line 1 is not UTF-8 text (byte 0xe9); save it as UTF-8."),
        (b"name: x\x00\n", "is a binary file; not a panel file."),
        (b"#" * (1 << 20) + b"\n", "is larger than 1 MiB, too large for a panel file."),
    ],
)
async def test_a_panel_file_that_cannot_be_read_is_one_sentence_naming_it(
    panels: Path, tmp_path: Path, content: bytes, reason: str
) -> None:
    (panels / "broken.yaml").write_bytes(content)
    async with connected(settings_for(panels, tmp_path)) as client:
        with pytest.raises(MCPError) as refused:
            await client.read_resource("panel://panels/broken")

    assert refused.value.error.message == f"{panels / 'broken.yaml'}: {reason}"
