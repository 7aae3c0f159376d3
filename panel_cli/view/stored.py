"""A stored payload read as the event it was, so the views draw one without its event model."""

from __future__ import annotations

from typing import Any


class Stored(dict[str, Any]):
    """A payload read as the event (or the nested object) it was: its fields as attributes, a
    nested object as another `Stored`, and still a dict for what the views read as one (a
    tally's scores, an aggregate ranking's entries). The live view's handlers read events by
    attribute, so a stored run draws as it did live, and the views build their own small
    records (a vote's tally, a warning) this way rather than as pydantic models."""

    def __getattr__(self, name: str) -> Any:
        try:
            return _stored(self[name])
        except KeyError:
            raise AttributeError(name) from None


def _stored(value: Any) -> Any:
    if isinstance(value, dict) and not isinstance(value, Stored):
        return Stored(value)
    if isinstance(value, list):
        return [_stored(item) for item in value]
    return value
