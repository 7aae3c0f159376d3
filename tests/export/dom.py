"""A small HTML tree for tests: parse a page (the file, or the DOM Chromium dumps) and find
elements with simple selectors (`tag`, `.class`, `#id`, `tag.class`, descendants by spaces)."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass(eq=False)
class Node:
    tag: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[Node | str] = field(default_factory=list)
    parent: Node | None = None

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    @property
    def text(self) -> str:
        return "".join(child if isinstance(child, str) else child.text for child in self.children)

    def elements(self) -> list[Node]:
        found: list[Node] = []
        for child in self.children:
            if isinstance(child, Node):
                found.append(child)
                found += child.elements()
        return found

    def select(self, selector: str) -> list[Node]:
        scopes: list[Node] = [self]
        for step in selector.split():
            matched: list[Node] = []
            for scope in scopes:
                matched += [node for node in scope.elements() if _matches(node, step) and node not in matched]
            scopes = matched
        return scopes

    def one(self, selector: str) -> Node:
        found = self.select(selector)
        assert len(found) == 1, f"{selector}: {len(found)} elements"
        return found[0]


def _matches(node: Node, step: str) -> bool:
    tag, _, rest = step.partition("#") if "#" in step else (step, "", "")
    if rest:
        return (not tag or node.tag == tag) and node.attrs.get("id") == rest
    tag, *classes = step.split(".")
    return (not tag or node.tag == tag) and set(classes) <= node.classes


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document")
        self.current = self.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {name: value or "" for name, value in attrs}, parent=self.current)
        self.current.children.append(node)
        if tag not in VOID:
            self.current = node

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.current.children.append(Node(tag, {name: value or "" for name, value in attrs}, parent=self.current))

    def handle_endtag(self, tag: str) -> None:
        node: Node | None = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data: str) -> None:
        self.current.children.append(data)


def parse(page: str) -> Node:
    builder = _Builder()
    builder.feed(page)
    builder.close()
    return builder.root
