"""The fault suite runs engines the way the protocol tests do."""

from tests.protocols.conftest import run_protocol

__all__ = ["run_protocol"]
