"""What a call sends, built from what the engine asked: the member's system prompt, a
follow-up's earlier turns, the run's attachments before the first prompt, the JSON-schema
instructions when the model takes no response schema, the member's settings and key; and the
request's identity (`request_hash`), by which a resumed run finds the replies it already has."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from panel_cli.config import Defaults, Member
from panel_cli.llm.brief import RequestBrief
from panel_cli.llm.request_hash import request_hash
from panel_cli.llm.structured import json_instructions
from panel_cli.models.routes import is_demo


@functools.lru_cache(maxsize=64)
def _instructions(schema: type[BaseModel]) -> str:
    """The JSON-schema prompt for a schema; building the schema costs ~0.7 ms, so once each."""
    return json_instructions(schema)


def api_key(member: Member) -> str | None:
    """The key a member's requests carry: its `api_key_env`'s, else none (litellm reads the
    provider's usual variable), or a placeholder for a keyless OpenAI-compatible endpoint."""
    if member.api_key_env:
        return os.environ.get(member.api_key_env)
    if member.api_base and member.provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
        return "no-key-needed"
    return None


class Requests:
    """A run's request builder: what it adds to every call (`attachments`, a follow-up's
    `prior` turns), and which models take a response schema, asked of litellm once each."""

    def __init__(self, defaults: Defaults, litellm: Callable[[], ModuleType]) -> None:
        self.defaults = defaults
        self.attachments = ""
        self.prior: list[dict[str, Any]] = []
        self._litellm = litellm
        self._native_schema: dict[str, bool] = {}

    def follow(self, turns: Sequence[Mapping[str, Any]]) -> None:
        self.prior = [dict(turn) for turn in turns]

    def native(self, model: str, schema: type[BaseModel] | None) -> bool:
        """Whether a schema goes to the model as a response schema (litellm says it takes one)
        rather than in the prompt; a demo persona is asked in the prompt, as a model without one
        is (its replies carry the same JSON either way)."""
        if schema is None or is_demo(model):
            return False
        if model not in self._native_schema:
            try:
                self._native_schema[model] = bool(self._litellm().supports_response_schema(model=model))
            except Exception:
                self._native_schema[model] = False
        return self._native_schema[model]

    def messages(
        self, member: Member, messages: list[dict[str, Any]], schema: type[BaseModel] | None, native: bool
    ) -> list[dict[str, Any]]:
        """The messages a call sends: system prompt, earlier turns, then the engine's messages,
        the attachments before the first prompt, the JSON instructions after the last."""
        given = [dict(m) for m in messages]
        first_user = next((index for index, message in enumerate(given) if message.get("role") == "user"), None)
        if self.attachments and first_user is not None:
            given[first_user]["content"] = f"{self.attachments}\n\n{given[first_user]['content']}"
        prior = [dict(turn) for turn in self.prior]
        full = ([{"role": "system", "content": member.system}] if member.system else []) + prior + given
        if schema is not None and not native:
            last = full[-1]
            last["content"] = f"{last['content']}\n\n{_instructions(schema)}"
        return full

    def request(
        self, member: Member, messages: list[dict[str, Any]], response_format: type[BaseModel] | None
    ) -> dict[str, Any]:
        """litellm's arguments for a request: never its own retries (the gateway's are the
        call's), the member's settings over the panel's defaults, its endpoint and key."""
        request: dict[str, Any] = {"model": member.model, "messages": messages, "max_retries": 0}
        temperature = member.temperature if member.temperature is not None else self.defaults.temperature
        max_tokens = member.max_tokens or self.defaults.max_tokens
        if temperature is not None:
            request["temperature"] = temperature
        if max_tokens is not None:
            request["max_tokens"] = max_tokens
        if member.api_base:
            request["api_base"] = member.api_base
        key = api_key(member)
        if key:
            request["api_key"] = key
        if response_format is not None:
            request["response_format"] = response_format
        return request

    def identity(
        self,
        member: Member,
        messages: list[dict[str, Any]],
        request: Mapping[str, Any],
        schema: type[BaseModel] | None,
        *,
        stage: str,
        round: int | None,
        about: str | None,
        brief: RequestBrief | None,
    ) -> str:
        """The request's identity (see `request_hash`): what the gateway adds to the engine's
        messages goes in as context, with the engine's messages before its last; that last one,
        the prompt the engine built from its brief, is stood for by the brief when it gave one
        (all the messages go in without one)."""
        context = [{"role": "system", "content": member.system}] if member.system else []
        context += self.prior
        if self.attachments:
            context.append({"role": "attachments", "content": self.attachments})
        context += messages[:-1] if brief is not None else messages
        settings = {**request, "response_format": schema} if schema is not None else request
        return request_hash(
            settings, member=member.name, stage=stage, round=round, about=about, context=context, brief=brief
        )
