"""A small MCP server for the tools demo (configs/tools.yaml): `lookup` finds the sections of
notes.md, beside this file, that share the most words with a query.

panel starts it with the Python that runs panel, so the `mcp` package panel installs is there:
    panel council configs/tools.yaml
Any MCP client can run it too: `python configs/tools/notes_server.py` speaks MCP on stdio.
"""

from __future__ import annotations

import re
from pathlib import Path

from mcp.server.mcpserver import MCPServer

NOTES = Path(__file__).with_name("notes.md")
MOST_SECTIONS = 2
# Words too common to tell one section from another.
COMMON = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "how",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "our",
        "should",
        "the",
        "to",
        "we",
        "what",
        "which",
        "with",
    ]
)

server = MCPServer("notes", instructions="Look up the team's engineering notes.")


def _words(text: str) -> set[str]:
    return {word for word in re.findall(r"[a-z0-9]+", text.lower()) if word not in COMMON}


def _sections() -> list[str]:
    """The notes as sections, each a `## heading` and the paragraphs under it."""
    text = NOTES.read_text(encoding="utf-8")
    return [section.strip() for section in re.split(r"(?m)^(?=## )", text) if section.strip().startswith("## ")]


@server.tool()
def lookup(query: str) -> str:
    """Search the team's engineering notes; returns the sections most relevant to the query."""
    wanted = _words(query)
    scored = sorted(
        ((len(wanted & _words(section)), index, section) for index, section in enumerate(_sections())), reverse=True
    )
    found = [section for score, _, section in scored[:MOST_SECTIONS] if score > 0]
    return "\n\n".join(found) if found else f"No note mentions: {query}"


if __name__ == "__main__":
    server.run()
