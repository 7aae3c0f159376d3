from __future__ import annotations

from io import StringIO

import pytest
from rich.console import Console


@pytest.fixture
def console() -> Console:
    """A terminal console writing to memory, so a test can read what the live view drew."""
    return Console(file=StringIO(), force_terminal=True, width=120)
