"""Terminal escapes in model and tool text: a reply that writes the clipboard (`ESC]52`), sets
the window title (`ESC]0`) or clears the screen (`ESC[2J`) is shown, stored and exported as
the text around them, on every surface: the live view, plain output, `history show`, replay
and the Markdown export; so is a run stored before panel took them out. A link in an answer
exported as Markdown is live only to a web page."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from panel_cli.untrusted import clean_text
from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, responder, tool_calls
from tests.helpers import cli
from tests.tools.conftest import answer_once, tool_panel
from tests.tools.conftest import run_with_tools as run_with_tools  # the fixture, for this file

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4K\x07"
TITLE = "\x1b]0;owned\x1b\\"
CLEAR = "\x1b[2J\x1b[H"
HOSTILE = (
    f"Use{CLIPBOARD} PostgreSQL{TITLE}.\x07{CLEAR} See [docs](javascript:alert(1)) or [site](https://example.com)."
)
SHOWN = "Use PostgreSQL. See [docs](javascript:alert(1)) or [site](https://example.com)."
TERMINAL = {"TTY_COMPATIBLE": "1", "NO_COLOR": "1"}
# What no surface may ever write: an OSC (but Rich's own hyperlink to a web page, OSC 8, and
# its end), a screen clear, a bell, a C1 control.
OBEYED = re.compile("\x1b\\](?!8;[^;\x1b]*;(?:https://|\x1b))|\x1b\\[2J|\x1b\\[H|\x07|[\x80-\x9f]")


def council_reply(request: RecordedRequest) -> str:
    prompt = str(request.messages[-1]["content"])
    if "[panel-task: council.review]" in prompt:
        labels = re.findall(r"^=== Model ([A-Z]+) \[[0-9a-f]{8}\] ===$", prompt, re.MULTILINE)
        return "FINAL RANKING: " + ", ".join(f"Model {label}" for label in labels)
    return HOSTILE


def council_file(path: Path, server: FakeOpenAIServer) -> Path:
    path.write_text(
        "name: escapes\nprotocol: council\nquestion: which database?\ndefaults: {retries: 0}\nchairman: a\nmembers:\n"
        + "".join(f"  - name: {name}\n    model: openai/{name}\n    api_base: {server.url}\n" for name in ("a", "b"))
    )
    return path


@pytest.fixture
def stored(fake_server, tmp_path) -> tuple[Path, str, str]:
    """A council whose every answer and synthesis is HOSTILE, run off a terminal: the
    database, the run id and what the run printed."""
    fake_server.default(responder(council_reply))
    db = tmp_path / "runs.db"
    ran = cli("council", str(council_file(tmp_path / "p.yaml", fake_server)), "--db", str(db))
    assert ran.exit_code == 0, ran.output
    (run_id,) = sqlite3.connect(db).execute("select id from runs").fetchone()
    return db, run_id, ran.output


def test_the_cleaning_keeps_the_text_and_drops_what_a_terminal_would_obey():
    assert clean_text(HOSTILE) == SHOWN
    assert clean_text("tab\tand\nline\r\nbreaks stay; a bare\rreturn and a \x00 go") == (
        "tab\tand\nline\r\nbreaks stay; a barereturn and a  go"
    )
    assert clean_text("8-bit \x9b2J and \x9d0;title\x9c too") == "8-bit  and  too"


def test_plain_output_and_the_store_never_hold_an_escape(stored):
    db, _, printed = stored
    assert "\x1b" not in printed and SHOWN in printed
    con = sqlite3.connect(db)
    assert not con.execute("select count(*) from texts where body like '%' || char(27) || '%'").fetchone()[0]


def test_the_live_view_draws_no_escape_from_a_reply(fake_server, tmp_path):
    fake_server.default(responder(council_reply))
    ran = cli(
        "council", str(council_file(tmp_path / "p.yaml", fake_server)), "--db", str(tmp_path / "r.db"), env=TERMINAL
    )
    assert ran.exit_code == 0, ran.output
    assert not OBEYED.search(ran.output) and "Use PostgreSQL." in ran.output


@pytest.mark.parametrize("old", [False, True], ids=["cleaned-on-the-way-in", "stored-before-cleaning"])
def test_history_show_replay_and_the_markdown_export_never_write_an_escape(stored, tmp_path, old):
    db, run_id, _ = stored
    if old:  # as a run stored by a panel that kept escapes would read
        with sqlite3.connect(db) as con:
            con.execute("update texts set body = replace(body, 'Use PostgreSQL.', ?)", (HOSTILE.split(" See")[0],))
            assert con.execute("select count(*) from texts where body like '%' || char(27) || '%'").fetchone()[0]
    surfaces = {
        "show": cli("history", "show", run_id, "--db", str(db), "--full", env=TERMINAL),
        "show --plain": cli("history", "show", run_id, "--plain", "--db", str(db)),
        "replay": cli("history", "replay", run_id, "--speed", "max", "--db", str(db), env=TERMINAL),
        "replay --plain": cli("history", "replay", run_id, "--speed", "max", "--plain", "--db", str(db)),
    }
    for name, ran in surfaces.items():
        assert ran.exit_code == 0, (name, ran.output)
        assert not OBEYED.search(ran.output), name
        assert "Use PostgreSQL." in ran.output, name
    exported = tmp_path / "run.md"
    assert cli("history", "export", run_id, "-o", str(exported), "--db", str(db)).exit_code == 0
    markdown = exported.read_text()
    assert "\x1b" not in markdown and "\x07" not in markdown


def test_the_markdown_export_keeps_web_links_and_shows_any_other_as_text(stored, tmp_path):
    db, run_id, _ = stored
    exported = tmp_path / "run.md"
    assert cli("history", "export", run_id, "-o", str(exported), "--db", str(db)).exit_code == 0
    reader = MarkdownIt("commonmark")
    reader.validateLink = lambda _url: True  # as a renderer that trusts every link would
    html = reader.render(exported.read_text())
    links = re.findall(r'href="([^"]*)"', html)
    assert links and all(link.startswith("https://") for link in links)
    assert "javascript:" in html  # still there to read, as text


@pytest.mark.subprocess
async def test_a_tool_result_reaches_the_model_and_the_store_without_escapes(fake_server, run_with_tools):
    fake_server.script("a-model", tool_calls(("echo", {"text": HOSTILE})), responder(lambda _r: "done"))
    result, recorder = await run_with_tools(answer_once, tool_panel(fake_server, ["a"]))

    assert result.final_answer == "done"
    (finished,) = recorder.of("tool_call_finished")
    assert finished.result == SHOWN
    assert not OBEYED.search(str(fake_server.requests[-1].messages))


BIDI = "\u202e\u2066\u202a\u2069"
# A right-to-left override shows `gpj.exe` as `exe.jpg`; the isolates and embeddings reorder too.
SPOOFED = f"Run inv\u202egpj.exe{BIDI[1:]} today."
UNSPOOFED = "Run invgpj.exe today."


def test_bidirectional_controls_reach_no_surface(fake_server, tmp_path):
    """U+202E and its kin (Trojan Source) in a reply and in the question: shown, stored,
    listed, replayed and exported as the text around them, a run stored before this too."""
    fake_server.default(
        responder(lambda request: SPOOFED if "review" not in str(request.messages) else council_reply(request))
    )
    path = council_file(tmp_path / "p.yaml", fake_server)
    path.write_text(path.read_text().replace("question: which database?", f'question: "which {BIDI}database?"'))
    db = tmp_path / "runs.db"
    live = cli("council", str(path), "--db", str(db), env=TERMINAL)
    assert live.exit_code == 0, live.output
    plain = cli("council", str(path), "--db", str(db))
    (run_id,) = sqlite3.connect(db).execute("select id from runs order by started_at desc limit 1").fetchone()
    with sqlite3.connect(db) as con:  # and as a run stored before panel took them out would read
        con.execute("update texts set body = replace(body, ?, ?)", (UNSPOOFED, SPOOFED))
    html = tmp_path / "run.html"
    surfaces = {
        "live": live,
        "plain": plain,
        "list": cli("history", "list", "--db", str(db), env=TERMINAL),
        "list --json": cli("history", "list", "--json", "--db", str(db)),
        "show": cli("history", "show", run_id, "--db", str(db), "--full", env=TERMINAL),
        "replay": cli("history", "replay", run_id, "--speed", "max", "--db", str(db), env=TERMINAL),
        "md": cli("history", "export", run_id, "--format", "md", "--db", str(db)),
        "html": cli("history", "export", run_id, "-o", str(html), "--db", str(db)),
    }
    for name, ran in surfaces.items():
        assert ran.exit_code == 0, (name, ran.output)
        assert not re.search("[\u202a-\u202e\u2066-\u2069]", ran.output), name
    assert UNSPOOFED in surfaces["show"].output and "which database?" in surfaces["md"].output
    assert not re.search("[\u202a-\u202e\u2066-\u2069]", html.read_text(encoding="utf-8"))
    assert clean_text(SPOOFED) == UNSPOOFED
