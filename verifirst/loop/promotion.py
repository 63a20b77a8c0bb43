"""When a calibrated judge prompt may take the champion alias: promotion on validation evidence.

Rules (`--promote-rule`):
- `significant` (default): the paired bootstrap 95% interval of validation Δπ (new − champion,
  the same validation items) lies above zero.
- `better`: the new prompt's validation π is higher by any amount (the earlier rule, explicit).
- `noninferior:MARGIN`: the interval's lower end lies above −MARGIN (e.g. a shorter prompt that is
  no worse by more than MARGIN).

A first champion needs evidence too: its validation π interval (bootstrap over items) lies above
zero and the validation split holds both label classes; otherwise no alias moves.

The smallest detectable Δπ is reported as (1.96 + 0.84) × sd, sd the bootstrap standard error
of Δπ estimated from the 95% interval width (width / 3.92): the difference a two-sided 5% test
would find four times in five at this validation size (the usual minimum-detectable-effect rule).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from verifirst.core.errors import InputError
from verifirst.core.stats import paired_bootstrap, scotts_pi

RULES = ("significant", "better", "noninferior")
Z_ALPHA, Z_POWER = 1.96, 0.84  # two-sided 5% test, 80% power
N_BOOT = 2000


@dataclass(frozen=True)
class PromoteRule:
    """A parsed --promote-rule: kind in RULES, margin for noninferior."""

    kind: str = "significant"
    margin: float = 0.0

    def __str__(self) -> str:
        return f"noninferior:{self.margin:g}" if self.kind == "noninferior" else self.kind


def parse_rule(text: str | PromoteRule | None, field: str = "--promote-rule") -> PromoteRule:
    """A promotion rule from "significant", "better" or "noninferior:0.05".

    Args:
        text: the option's value (None: significant).
        field: the option named in an error.
    """
    if isinstance(text, PromoteRule):
        return text
    raw = (text or "significant").strip().lower()
    kind, _, margin = raw.partition(":")
    expected = "significant | better | noninferior:MARGIN (MARGIN a Δπ from 0 to 1, e.g. 0.05)"
    if kind not in RULES or (kind == "noninferior") != bool(margin):
        raise InputError(f"unknown promotion rule {text!r}", field=field, expected=expected)
    if kind != "noninferior":
        return PromoteRule(kind)
    try:
        m = float(margin)
    except ValueError:
        m = float("nan")
    if not 0 <= m <= 1:
        raise InputError(f"margin {margin!r} is not a number from 0 to 1", field=field, expected=expected)
    return PromoteRule(kind, m)


def detectable_delta(lo: float, hi: float) -> float:
    """The smallest Δπ this validation set could detect, from a 95% bootstrap interval's width.

    Args:
        lo: the interval's lower end.
        hi: the interval's upper end.
    """
    sd = (hi - lo) / (2 * Z_ALPHA)
    return (Z_ALPHA + Z_POWER) * sd


def decide(rule: PromoteRule, y: Sequence[str], champion: Sequence[str], new: Sequence[str],
           n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """Whether the new prompt replaces the champion, on paired validation verdicts.

    Args:
        rule: the promotion rule.
        y: the validation labels.
        champion: the champion's verdicts on the same items.
        new: the new prompt's verdicts.
        n_boot: bootstrap resamples.
        seed: the bootstrap seed.

    Returns:
        {"move", "delta", "ci95", "detectable_delta", "why"}.
    """
    boot = paired_bootstrap(scotts_pi, champion, new, y, n=n_boot, seed=seed)
    mde = detectable_delta(boot.lo, boot.hi)
    if rule.kind == "better":
        move, test = boot.delta > 0, "validation π higher (rule better)"
    elif rule.kind == "significant":
        move, test = boot.lo > 0, "95% interval of Δπ above zero (rule significant)"
    else:
        move, test = boot.lo > -rule.margin, f"95% interval of Δπ above −{rule.margin:g} (rule {rule})"
    why = (f"{'meets' if move else 'does not meet'}: {test}; the smallest Δπ these {len(y)} validation "
           f"items could detect is {mde:.3f}")
    return {"move": bool(move), "delta": boot.delta, "ci95": [boot.lo, boot.hi], "detectable_delta": mde,
            "why": why}


def pi_interval(y: Sequence[str], pred: Sequence[str], n_boot: int = N_BOOT, seed: int = 0) -> tuple[float, float, float]:
    """(π, lower, upper) with a percentile bootstrap 95% interval over items (NaN resamples dropped).

    Args:
        y: labels.
        pred: verdicts.
        n_boot: bootstrap resamples.
        seed: the bootstrap seed.
    """
    y, pred = list(y), list(pred)
    pi = scotts_pi(y, pred)
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(n_boot):
        ix = rng.integers(0, len(y), len(y))
        v = scotts_pi([y[j] for j in ix], [pred[j] for j in ix])
        if not math.isnan(v):
            vals.append(v)
    if not vals:
        return pi, float("nan"), float("nan")
    lo, hi = np.quantile(vals, [0.025, 0.975])
    return pi, float(lo), float(hi)


def first_champion(y: Sequence[str], pred: Sequence[str], n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """Whether a first prompt may become champion: both label classes on validation and a π
    interval above zero.

    Args:
        y: validation labels (items with a verdict).
        pred: the prompt's validation verdicts.
        n_boot: bootstrap resamples.
        seed: the bootstrap seed.

    Returns:
        {"move", "pi", "pi_ci95", "why"}.
    """
    classes = sorted(set(y))
    if len(classes) < 2:
        return {"move": False, "pi": None, "pi_ci95": None,
                "why": f"the validation split holds one label class ({', '.join(classes) or 'none'}): "
                       f"π cannot show agreement beyond chance"}
    pi, lo, hi = pi_interval(y, pred, n_boot, seed)
    move = not math.isnan(lo) and lo > 0
    why = (f"validation π {pi:.3f}, 95% bootstrap [{lo:.3f}, {hi:.3f}] on {len(y)} items "
           f"{'lies above zero' if move else 'does not lie above zero'}")
    return {"move": move, "pi": pi, "pi_ci95": [lo, hi], "why": why}


def read_alias(client, name: str, alias: str):
    """(the alias's current version or None, an error text or None).

    Only "no such alias/prompt" means there is no champion yet; any other error (a server error,
    a timeout) is returned so promotion stops instead of moving the alias.

    Args:
        client: an MlflowClient.
        name: the prompt name.
        alias: the alias.
    """
    try:
        return client.get_prompt_version_by_alias(name, alias), None
    except Exception as e:  # classified below: absence vs failure
        code = str(getattr(e, "error_code", ""))
        text = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
        absent = code == "RESOURCE_DOES_NOT_EXIST" or (
            code == "INVALID_PARAMETER_VALUE" and "alias" in text.lower() and "not found" in text.lower())
        if absent:
            return None, None
        return None, f"{type(e).__name__} {code}: {text}".replace("  ", " ")
