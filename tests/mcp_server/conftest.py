"""What the `panel mcp` tests share: a panel folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import ROOT


@pytest.fixture
def panels(tmp_path: Path) -> Path:
    """A folder holding the shipped demo confer and vote panels, as `demo` and `vote`."""
    folder = tmp_path / "panels"
    folder.mkdir()
    shutil.copy(ROOT / "configs" / "demo.yaml", folder / "demo.yaml")
    shutil.copy(ROOT / "configs" / "vote.yaml", folder / "vote.yaml")
    return folder
