"""What the store's readers ask of a row: its columns by name, and their names.

A `sqlite3.Row` gives both, and so does a dict (a test's, or one a reader builds). A row is no
`Mapping`, though: its `in` and its iteration look at its values, not its columns' names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol


class RowLike(Protocol):
    def __getitem__(self, column: str, /) -> Any: ...

    def keys(self) -> Iterable[str]: ...
