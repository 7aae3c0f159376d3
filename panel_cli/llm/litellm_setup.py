"""litellm as panel uses it: imported once, lazily, quietly and offline-safe, with two of its
per-call chores skipped for the gateway's own calls.

litellm is imported only for a run with a member that is not a demo persona (or a check that
needs its tables): its import is seconds of CPU, which a run of personas alone never pays.
After every reply litellm prices it and logs its success for callbacks; the gateway prices
calls itself and registers no callback, so inside `quiet_call` both are skipped. Each skip
reaches one private hook of litellm's; a litellm release that moves either makes calls slower
and nothing else, which tests/llm/test_litellm_hooks.py catches.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from functools import cache
from types import ModuleType
from typing import Any

# Set while the gateway awaits litellm: litellm then skips the work whose result we never read.
_QUIET: ContextVar[bool] = ContextVar("panel_quiet_litellm_call", default=False)
# Set on our wrapper of litellm's cost calculator, so that it is never wrapped twice.
_WRAPPED = "_panel_quiet"


@cache
def load_litellm() -> ModuleType:
    """Import litellm once, quietly and offline-safe; only commands that call models get here.

    Besides the settings, two things make it cheaper (bench/startup.py, bench/overhead.py):
    the import runs without the garbage collector and its objects are then frozen out of
    the collector's way, and litellm's own per-call cost and success logging are skipped
    for the gateway's calls (`quiet_call`). The first call's one-time work (lazy imports, a
    tokenizer for some providers) is left to that call: done here it only delayed the first
    request, while during a run much of it overlaps the wait for the other members' replies."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "True")
    import logging

    # The import builds ~400k objects that live as long as the process. The collector walked
    # the growing heap again and again while they were built (a quarter of the import's
    # time), and every full collection after it walked them all again (half a second per
    # pause, some 15% of a burst of calls). Frozen, they are never walked.
    gc.disable()
    try:
        import litellm
    finally:
        gc.freeze()
        gc.enable()

    litellm.suppress_debug_info = True
    litellm.drop_params = True
    litellm.telemetry = False
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
        logging.getLogger(name).setLevel(logging.ERROR)
    _skip_litellm_bookkeeping()
    # The first call's schema builds warn about TypedDict `ReadOnly` items; litellm filters
    # that warning at import, but a test harness may have reset the filters since.
    warnings.filterwarnings("ignore", message=r".*`ReadOnly` qualifier.*")
    return litellm


def _skip_litellm_bookkeeping() -> None:
    """Skip litellm's per-call cost calculation during the gateway's calls.

    After every reply litellm prices it for `response._hidden_params` (model-info lookups
    through its generalisation rules, then a zero-cost diagnostic): a quarter of its
    Python work per call. The gateway prices calls itself from `litellm.model_cost` and
    never reads litellm's figure, so within `quiet_call` the calculator answers None at
    once. Any other caller in the process keeps litellm's behaviour. Private API: if a
    litellm release moves it, calls take the slow path again, and tests/llm/test_litellm_hooks.py
    fails."""
    try:
        from litellm.litellm_core_utils.litellm_logging import Logging
    except ImportError:
        return
    original = getattr(Logging, "response_cost_calculator", None)
    if original is None or getattr(original, _WRAPPED, False):
        return

    @functools.wraps(original)
    def response_cost_calculator(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _QUIET.get():
            return None
        return original(self, *args, **kwargs)

    setattr(response_cost_calculator, _WRAPPED, True)
    Logging.response_cost_calculator = response_cost_calculator  # type: ignore[method-assign]  # the patch itself: litellm's method, replaced on purpose


@cache
def _litellm_internal_call() -> Callable[[], contextlib.AbstractContextManager[None]] | None:
    """litellm's mark for a nested call whose caller does the logging and billing: litellm
    then skips its success logging for it (building the standard logging payload and a
    background task per call, for callbacks we never register): another tenth of its work.
    Private API, imported here so that importing this module stays free of litellm; a litellm
    release that moves it fails tests/llm/test_litellm_hooks.py."""
    try:
        from litellm._internal_context import internal_sub_call
    except ImportError:  # another litellm release: calls just log as usual
        return None
    return internal_sub_call


@contextlib.contextmanager
def quiet_call() -> Iterator[None]:
    """Around the gateway's own litellm calls: skip the bookkeeping whose results we never read,
    and keep pydantic's serializer warnings off stderr. litellm dumps the provider's reply
    through its own models, so a reply whose content is a list or whose counts are floats
    makes pydantic warn before litellm refuses the reply (which the call then reports). The
    filter is set again each call: a test harness, or anyone, may have reset the filters."""
    warnings.filterwarnings("ignore", message="Pydantic serializer warnings", category=UserWarning)
    token = _QUIET.set(True)
    try:
        internal = _litellm_internal_call()
        if internal is None:
            yield
        else:
            with internal():
                yield
    finally:
        _QUIET.reset(token)


async def close_litellm_clients() -> None:
    """Close litellm's pooled HTTP clients, which otherwise warn about unclosed transports,
    and forget them, so a later gateway in the same process opens fresh ones. They belong
    to the process, not to one gateway; a process that never imported litellm has none."""
    litellm = sys.modules.get("litellm")
    if litellm is None:
        return
    close = getattr(litellm, "close_litellm_async_clients", None)
    if close is not None:
        with contextlib.suppress(Exception):
            await close()
    cache = getattr(litellm, "in_memory_llm_clients_cache", None)
    if cache is not None and hasattr(cache, "flush_cache"):
        cache.flush_cache()
