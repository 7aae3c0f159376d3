"""What an agent can read: each stored run as Markdown (`panel://runs/{run_id}`, as `panel history
export --format md` writes it) and each panel file of the folder (`panel://panels/{name}`).
`resources/list` gives the latest runs and every panel; the two templates name the rest.

Reading calls no model and writes nothing; the store is opened read-only for each read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote, unquote

from mcp import types
from mcp.shared.exceptions import MCPError

from panel_cli.errors import UserError
from panel_cli.local_files import FileRefused, TextFileRules, read_text_file
from panel_cli.mcp_server.catalog import PanelCatalog
from panel_cli.mcp_server.folders import PanelFolder, quoted
from panel_cli.redact import redact, secret_values
from panel_cli.view import fmt

RUN_TEMPLATE = "panel://runs/{run_id}"
PANEL_TEMPLATE = "panel://panels/{name}"
# The runs `resources/list` gives, newest first.
LATEST_RUNS = 20
# The JSON-RPC error of a resource that is not there (the MCP specification's).
RESOURCE_NOT_FOUND = -32002
_RUN_URI = re.compile(r"panel://runs/([A-Za-z0-9_-]{1,64})")
_PANEL_URI = re.compile(r"panel://panels/([^/?#]{1,600})")
PANEL_FILE = TextFileRules(
    limit=1 << 20, too_big="too large for a panel file", binary="not a panel file", not_utf8="save it as UTF-8"
)


def run_uri(run_id: str) -> str:
    return RUN_TEMPLATE.format(run_id=run_id)


def panel_uri(name: str) -> str:
    return PANEL_TEMPLATE.format(name=quote(name, safe=""))


def templates() -> list[types.ResourceTemplate]:
    return [
        types.ResourceTemplate(
            uri_template=RUN_TEMPLATE,
            name="run",
            description="A stored run as Markdown (panel history export --format md): the question, the answer, "
            "every round and every call. The id may be any unique beginning of one, or last.",
            mime_type="text/markdown",
        ),
        types.ResourceTemplate(
            uri_template=PANEL_TEMPLATE,
            name="panel",
            description="A panel file of the server's panel folder, as written.",
            mime_type="application/yaml",
        ),
    ]


def listed(db: Path, catalog: PanelCatalog) -> list[types.Resource]:
    """The latest runs, then every panel of the folder."""
    from panel_cli.store.reader import TranscriptReader

    with TranscriptReader.open(db) as reader:
        runs = reader.list_runs(LATEST_RUNS)
    resources = [
        types.Resource(
            uri=run_uri(run.id),
            name=f"run {run.id}",
            title=f"{run.protocol}: {fmt.one_line(run.question, 80)}",
            description=f"{run.status}" + (f": {fmt.one_line(run.outcome, 200)}" if run.outcome else ""),
            mime_type="text/markdown",
        )
        for run in runs
    ]
    resources += [
        types.Resource(
            uri=panel_uri(entry.name),
            name=f"panel {entry.name}",
            title=entry.summary() if entry.panel is not None else entry.name,
            mime_type="application/yaml",
        )
        for entry in catalog.panels
    ]
    return resources


def read(uri: str, *, db: Path, folder: PanelFolder, secrets: Sequence[str] = ()) -> types.ReadResourceResult:
    """A run as Markdown or a panel file as written; MCPError for a URI that names neither."""
    written: list[str] = []
    if match := _RUN_URI.fullmatch(uri):
        text, mime = run_markdown(db, match.group(1)), "text/markdown"
    elif match := _PANEL_URI.fullmatch(uri):
        text, mime = panel_text(folder, unquote(match.group(1))), "application/yaml"
        written = written_credentials(text)
    else:
        raise MCPError(
            code=RESOURCE_NOT_FOUND,
            message=f"{quoted(uri)} is no resource here; read panel://runs/ID or panel://panels/NAME.",
        )
    clean = redact(text, [*secret_values(known=written), *secrets])
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=clean)])


def run_markdown(db: Path, run_id: str) -> str:
    from panel_cli.export.markdown import render_markdown
    from panel_cli.export.report import build_report
    from panel_cli.export.transcript import Transcript
    from panel_cli.store.reader import TranscriptReader

    try:
        with TranscriptReader.open(db) as reader:
            transcript = Transcript.load(reader, run_id)
    except UserError as error:
        raise MCPError(code=RESOURCE_NOT_FOUND, message=error.message) from None
    return render_markdown(build_report(transcript))


# A tool server's header that carries a credential, by the words in its name.
_CREDENTIAL_HEADER = re.compile(r"auth|key|token|secret|cookie|session|password", re.IGNORECASE)


def written_credentials(text: str) -> list[str]:
    """The credentials a panel file spells out in its tool servers (a `Bearer …` header, an
    `env` value named like a secret) rather than by `${VAR}` (a reference is left to read):
    the environment's values are scrubbed anyway, these would reach the agent reading the
    file. A file that does not parse holds none that panel would send."""
    from panel_cli.errors import ConfigError
    from panel_cli.located_yaml import parse_yaml
    from panel_cli.redact import named_like_a_secret

    try:
        data = parse_yaml(text, "panel", expand_env=False).data
    except (ConfigError, UserError):
        return []
    tools = data.get("tools") if isinstance(data, dict) else None
    found: list[str] = []
    for server in tools.values() if isinstance(tools, dict) else ():
        if not isinstance(server, dict):
            continue
        for field, secret_name in (("headers", _CREDENTIAL_HEADER.search), ("env", named_like_a_secret)):
            given = server.get(field)
            if isinstance(given, dict):
                found += [
                    value
                    for name, value in given.items()
                    if isinstance(value, str) and "${" not in value and secret_name(str(name))
                ]
    return found


def panel_text(folder: PanelFolder, name: str) -> str:
    try:
        path = folder.file(name)
    except UserError as error:
        raise MCPError(code=RESOURCE_NOT_FOUND, message=error.message) from None
    try:
        return read_text_file(path, PANEL_FILE)
    except FileRefused as refused:
        raise MCPError(code=RESOURCE_NOT_FOUND, message=f"{path}: {refused}.") from None
