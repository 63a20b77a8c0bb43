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


from verifirst.core.errors import InputError
from verifirst.core.stats import paired_bootstrap, pi_interval, scotts_pi
from typing import Any, Callable

from verifirst.judge.options import held_out_pi, judge_section
from verifirst.tracking import Tracker

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
    pi = scotts_pi(y, pred)
    lo, hi = pi_interval(y, pred, n_boot, seed, skip_undefined=True)  # core.stats: the one implementation
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


CHAMPION = "champion"


def _val_pi(y: list, pred: list) -> float:
    return scotts_pi(list(y), list(pred))


def promote(tracker: Tracker, name: str, version: int, report: dict,
            rescore: Callable[[str, float | None], dict[str, str | None]] | None = None,
            alias: str = CHAMPION, rule=None, robustness: Callable[[str, Any], dict] | None = None) -> dict:
    """Move `alias` (default `champion`) to this version only on validation evidence against the alias's
    current version, paired on the same validation items (verifirst.judge.promotion: rule, first champion,
    detectable Δπ); test π is reported and never decides. An error reading the alias moves nothing.

    A current version calibrated on another split is not comparable (its prompt may have been chosen
    on this run's validation items); one that names no split (written by hand) is re-scored.

    Args:
        tracker: the run's Tracker (its MLflow client holds the registry).
        name: the registered prompt name.
        version: the version this run registered.
        report: the calibration report (split_digest; its judge section's validation labels and
            verdicts, test).
        rescore: (prompt text, threshold) -> verdict per validation item id, running a prompt with
            this run's judge LM on this run's validation items; it scores the current champion.
        alias: the alias to move.
        rule: a verifirst.judge.promotion.PromoteRule (default: significant).
        robustness: (champion text, threshold) -> verifirst.judging.robustness.compare(); a refusal keeps the alias.

    Returns:
        {"moved", "decided_on": "validation", "reason", "val_pi", "champion_val_pi", "pi" (test π,
        reported only), ...}.
    """
    client = tracker.client
    val = judge_section(report).get("validation") or {}
    labels = val.get("labels") or {}
    mine = (val.get("verdicts") or {}).get("calibrated") or {}
    rule = parse_rule(rule)
    out: dict[str, Any] = {"moved": False, "decided_on": "validation", "pi": held_out_pi(report),
                           "val_pi": val.get("pi"), "alias": alias, "rule": str(rule)}
    cur, error = read_alias(client, name, alias)
    if error is not None:
        return {**out, "error": error, "reason": f"the {alias} alias could not be read ({error}); "
                                                 f"promotion stopped, the alias did not move"}
    if not labels or not any(v is not None for v in mine.values()):
        return {**out, "reason": "no validation verdicts to decide on (test π never decides)"}
    if cur is None:
        ids = [i for i in labels if mine.get(i) is not None]
        first = first_champion([labels[i] for i in ids], [mine[i] for i in ids])
        out.update({"val_pi_ci95": first["pi_ci95"], "paired_n": len(ids)})
        if not first["move"]:
            return {**out, "reason": f"no first {alias}: {first['why']} (decided on validation)"}
        client.set_prompt_alias(name, alias, version)
        return {**out, "moved": True, "reason": f"first {alias}: {first['why']} (decided on validation)"}
    if int(cur.version) == int(version):
        return {**out, "reason": f"v{version} is already the {alias} (decided on validation)"}
    tags = dict(getattr(cur, "tags", {}) or {})
    if tags.get("split_digest") not in (None, "", report["split_digest"]):
        return {**out, "reason": f"{alias} v{cur.version} was calibrated on another split "
                                 f"({tags.get('split_digest')}): its validation items are not this run's; "
                                 f"not comparable (decided on validation)"}
    if rescore is None:
        return {**out, "reason": f"the {alias} cannot be re-scored on this run's validation items"}
    th = tags.get("threshold")
    theirs = rescore(cur.template, None if th in (None, "", "None") else float(th))
    ids = [i for i in labels if mine.get(i) is not None and theirs.get(i) is not None]
    if not ids:
        return {**out, "reason": f"{alias} v{cur.version} got no validation verdict (LM errors)"}
    y = [labels[i] for i in ids]
    a, b = [theirs[i] for i in ids], [mine[i] for i in ids]
    d = decide(rule, y, a, b)
    gate = robustness(cur.template, None if th in (None, "", "None") else float(th)) if robustness else None
    out.update({"robustness": gate} if gate else {})
    lo, hi = d["ci95"]
    pm, pt = _val_pi(y, b), _val_pi(y, a)
    out.update({"val_pi": pm, "champion_val_pi": pt, "paired_n": len(ids), "excluded": len(labels) - len(ids),
                "val_pi_delta_ci95": [lo, hi], "champion_version": int(cur.version),
                "detectable_delta": d["detectable_delta"]})
    cmp = (f"validation π {pm:.3f} vs {alias} v{cur.version} {pt:.3f} on the same {len(ids)} validation "
           f"items (Δ {d['delta']:+.3f}, 95% paired bootstrap [{lo:+.3f}, {hi:+.3f}]); {d['why']}; "
           f"decided on validation, test π reported only")
    if d["move"] and gate and gate["refuse"]:
        return {**out, "reason": f"refused by the robustness gate: {gate['reason']}; {cmp}"}
    if d["move"]:
        client.set_prompt_alias(name, alias, version)
        return {**out, "moved": True, "reason": f"beats ({rule}): {cmp}"}
    return {**out, "reason": f"does not beat ({rule}): {cmp}"}
