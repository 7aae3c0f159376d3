"""Shared test setup: fake-server fixtures and an isolated, offline environment."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["tests.fakes.fixtures"]


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Keep every test offline, instant and away from the user's real config and data."""
    monkeypatch.setenv("PANEL_DEMO_DELAY", "0")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("LITELLM_OFFLINE_MODE", "True")
    config_dir = tmp_path / "panel-config"
    config_dir.mkdir()
    monkeypatch.setenv("PANEL_CONFIG_DIR", str(config_dir))
    monkeypatch.setenv("PANEL_DB", str(tmp_path / "panel.db"))
