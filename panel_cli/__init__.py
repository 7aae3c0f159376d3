"""panel: several language models on a panel, deliberating by a protocol; every run kept in SQLite.

The command line is `panel`. From Python (docs/python.md):

    import panel_cli

    result = panel_cli.run("configs/demo.yaml", "Which database should we start on?")
    print(result.final_answer)

Importing the package costs next to nothing (`panel --help` imports it): each name below is
imported the first time it is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from panel_cli.api import history
    from panel_cli.api.result import RunResult
    from panel_cli.api.runs import RunNotStored, arun, run, stream
    from panel_cli.config import Member, Panel
    from panel_cli.errors import (
        BudgetError,
        ConfigError,
        MissingKeyError,
        OptionError,
        PanelError,
        PanelFileError,
        UnknownOptionError,
        UserError,
    )
    from panel_cli.protocols.gates import GateVerdict
    from panel_cli.runs.ask import Notice
    from panel_cli.store.subscriber import StoreFailure

__all__ = [
    "run",
    "arun",
    "stream",
    "history",
    "Panel",
    "Member",
    "RunResult",
    "GateVerdict",
    "Notice",
    "PanelError",
    "UserError",
    "PanelFileError",
    "ConfigError",
    "MissingKeyError",
    "BudgetError",
    "OptionError",
    "UnknownOptionError",
    "StoreFailure",
    "RunNotStored",
]

# The module each public name comes from; `history` is a module of its own.
_MODULES = {
    "panel_cli.api.runs": ("run", "arun", "stream", "RunNotStored"),
    "panel_cli.api.result": ("RunResult",),
    "panel_cli.config": ("Panel", "Member"),
    "panel_cli.protocols.gates": ("GateVerdict",),
    "panel_cli.runs.ask": ("Notice",),
    "panel_cli.errors": tuple(name for name in __all__ if name.endswith("Error")),
    "panel_cli.store.subscriber": ("StoreFailure",),
}
_HOMES = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    """A public name, imported on first use (PEP 562) and kept."""
    if name == "history":
        value: Any = importlib.import_module("panel_cli.api.history")
    elif name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name]), name)
    elif name == "__version__":
        from importlib.metadata import version

        value = version("panel-cli")
    else:
        raise AttributeError(f"module 'panel_cli' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
