"""Model prices for the spend meter: USD per token for a model string, from the user's table, else
LiteLLM's bundled price map (offline); the embedded model and the scripted test models ("local/...")
cost nothing. `verifirst.lm.spend` re-exports every name here.
"""
from __future__ import annotations

import os
import threading
from typing import Any

from verifirst.core.errors import InputError
from verifirst.lm.base import is_local

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before any litellm import

PRICE_EXPECTED = 'a [budget.prices] entry, e.g. "MODEL" = {input = 0.15, output = 0.60} (USD per 1M tokens)'


def _endpoint_models(value: Any) -> list[str]:
    """Model strings of a role's spec: a string, {model = ...}, or an endpoint list of either."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        m = value.get("model", "local")
        return [m] if isinstance(m, str) else []
    if isinstance(value, (list, tuple)):
        return [m for one in value for m in _endpoint_models(one)]
    return []


class Prices:
    """USD per token for model strings: the user's table, else LiteLLM's bundled price map
    (offline), and 0 for the embedded model and the scripted test models ("local/...").

    Args:
        table: {model string as the user gives it: {"input": USD per 1M input tokens,
            "output": USD per 1M output tokens}}.
    """

    def __init__(self, table: dict | None = None):
        self.table: dict[str, tuple[float, float]] = {}
        for model, price in (table or {}).items():
            try:
                self.table[str(model)] = (float(price["input"]) / 1e6, float(price["output"]) / 1e6)
            except (TypeError, KeyError, ValueError):
                raise InputError(f"the price of {model!r} is not {{input, output}}", field=f"prices.{model}",
                                 expected="{input = USD per 1M input tokens, output = USD per 1M output tokens}"
                                 ) from None
        self._known: dict[str, tuple[float, float] | None] = {}
        self._lock = threading.Lock()

    def per_token(self, model: str) -> tuple[float, float] | None:
        """(USD per input token, USD per output token), or None when no price is known."""
        hit = self._known.get(model, self)
        if hit is not self:
            return hit  # type: ignore[return-value]
        found = self._look_up(model)
        with self._lock:
            self._known[model] = found
        return found

    def _look_up(self, model: str) -> tuple[float, float] | None:
        if model in self.table:
            return self.table[model]
        provider, _, bare = model.partition("/")
        if bare and bare in self.table:
            return self.table[bare]
        if is_local(model) or provider == "local":  # the embedded model, scripted test models
            return (0.0, 0.0)
        return _litellm_price(model)

    def require(self, models: dict[str, Any]) -> None:
        """Raise InputError naming the first model with no known price.

        Args:
            models: {role: model}; a model may also be {model = ...} or an endpoint list.
        """
        for role, spec in models.items():
            for model in _endpoint_models(spec):
                if self.per_token(model) is None:
                    raise InputError(f"no price known for model {model!r} (role {role}): max_usd needs one",
                                     field="prices", expected=PRICE_EXPECTED)

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        p = self.per_token(model)
        return None if p is None else prompt_tokens * p[0] + completion_tokens * p[1]


def _litellm_price(model: str) -> tuple[float, float] | None:
    """The model's price in LiteLLM's bundled map: the full string, provider/model as LiteLLM
    resolves it, then the name after the provider prefix (as LiteLLM's cost functions try)."""
    import litellm

    cost_map = litellm.model_cost
    names = [model]
    try:
        bare, provider = litellm.get_llm_provider(model)[:2]
        names += [f"{provider}/{bare}", bare]
    except Exception:  # a string LiteLLM cannot route: its part after the first "/" only
        pass
    if "/" in model:
        names.append(model.split("/", 1)[1])
    for name in names:
        info = cost_map.get(name) or cost_map.get(name.lower())
        if isinstance(info, dict) and ("input_cost_per_token" in info or "output_cost_per_token" in info):
            return (float(info.get("input_cost_per_token") or 0.0), float(info.get("output_cost_per_token") or 0.0))
    return None
