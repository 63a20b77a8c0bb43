"""The cheapest configuration that is not worse, with scripted models priced like gpt-4o-mini and gpt-4o.

The cheap model fails the hard items unless its prompt says to use printf; the dear one needs no
telling. GEPA's scripted reflection either finds the rule (the cheap model with the optimized prompt
is then non-inferior and chosen) or proposes a useless instruction (the dear model is kept, and the
report says no cheaper candidate was non-inferior). Calls are counted at the scripted engines."""
from __future__ import annotations

import json
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy
import pytest

import verifirst as vf
from verifirst.core.errors import InputError
from verifirst.lm.spend import BudgetExceeded
from verifirst.core.task import Item
from verifirst.lm.testing import json_answer, scripted_lm
from verifirst.loop.objective import check_objective, pareto_front
from verifirst.programs.bash import BashGenerator
from verifirst.verifiers.base import Verdict

RULE = "Always answer with printf."
PRICES = {"local/cheap": {"input": 0.15, "output": 0.60}, "local/dear": {"input": 2.50, "output": 10.00}}


class ExactCommand:
    name = "exact"

    def verify(self, item, candidate):
        ok = (candidate or "").strip() == item.gold["command"]
        return Verdict(1.0 if ok else 0.0, ok, "PASS" if ok else "OUTPUT",
                       feedback="" if ok else f"expected `{item.gold['command']}`, got `{candidate}`; use printf")


def cheap_fn(messages):
    told = "printf" in messages[0]["content"]
    hard = "hard" in messages[-1]["content"]
    return json_answer(command="printf hi" if told or not hard else "echo hi")


def dear_fn(messages):
    return json_answer(command="printf hi")


def data(n=24):
    return [{"id": f"i{k}", "task": f"{'hard' if k % 2 else 'easy'} greeting #{k}", "command": "printf hi"}
            for k in range(n)]


def world(rule=RULE, cheap_latency=0.0, dear_latency=0.0):
    cheap = scripted_lm(cheap_fn, name="cheap", latency_s=cheap_latency)
    dear = scripted_lm(dear_fn, name="dear", latency_s=dear_latency)
    refl = scripted_lm(lambda m: json_answer(new_instruction=rule), role="reflection", name="refl")
    return cheap, dear, refl


def _run(tmp_path, objective, *, rule=RULE, cheap_latency=0.0, dear_latency=0.0, reference=False, **kw):
    cheap, dear, refl = world(rule, cheap_latency, dear_latency)
    goal = {"kind": objective, "margin": 0.05, "models": [cheap, dear]}
    if reference:
        goal["reference"] = {"model": dear, "prompt": None}
    res = vf.optimize(BashGenerator(), data(), _Metric(), "gepa", models={"task": cheap, "reflection": refl},
                      budget=vf.Budget(max_metric_calls=30, prices=PRICES), run_dir=tmp_path / "run",
                      workdir=tmp_path / "wd", objective=goal, **kw)
    return res, cheap, dear


class _Metric(ExactCommand):
    pass


def _by_label(section):
    return {c["label"]: c for c in section["candidates"]}


def test_cheap_model_with_the_optimized_prompt_is_chosen_when_non_inferior(tmp_path):
    res, cheap, dear = _run(tmp_path, "cheapest-not-worse", reference=True)
    sec = res.report["objective"]
    cands = _by_label(sec)
    assert sec["chosen"] == "local/cheap · optimized"
    assert sec["reference"] == "local/dear · as given" and sec["reference_given"]
    assert "printf" in json.dumps(res.report["instructions"])
    # the cheap model as given fails the hard half of validation: inferior, its interval below -margin
    given = cands["local/cheap · as given"]
    assert given["splits"]["val"]["pass_rate"] < 0.8 and not given["non_inferior"]
    assert given["val_vs_reference"]["ci95"][0] < -0.05
    opt = cands["local/cheap · optimized"]
    assert opt["non_inferior"] and opt["val_vs_reference"]["ci95"][0] > -0.05
    # priced from each item's own calls: the cheap model's items cost a fraction of the dear one's
    usd = {k: v["splits"]["val"]["usd_per_item"] for k, v in cands.items()}
    assert 0 < usd["local/cheap · optimized"] < usd["local/dear · as given"] / 5
    assert cands["local/dear · as given"]["splits"]["val"]["tokens_per_item"] > 0
    assert set(cands["local/cheap · optimized"]["splits"]) == {"train", "val", "test"}
    # the test split confirms it: both scored once, Δquality 0 with its interval, cheaper per item
    t = sec["test"]
    assert t["delta_quality"]["delta"] == 0.0 and t["delta_quality"]["ci95"] == [0.0, 0.0]
    assert t["delta_quality"]["mcnemar_p"] == 1.0
    assert t["delta_usd_per_item"] < 0
    assert t["chosen"]["pass_rate"] == 1.0 and t["reference"]["pass_rate"] == 1.0
    ledger = [json.loads(x) for x in (tmp_path / "wd" / "test_ledger.jsonl").read_text().splitlines()]
    assert len(ledger) == 2  # chosen and reference, once each; the models' optimizer runs never scored test
    assert (tmp_path / "run" / "report.html").exists()


def test_dear_model_is_kept_when_no_cheaper_candidate_is_non_inferior(tmp_path):
    res, cheap, dear = _run(tmp_path, "cheapest-not-worse", rule="Answer briefly.")
    sec = res.report["objective"]
    assert sec["chosen"].startswith("local/dear") and sec["chosen_is_reference"]
    assert sec["verdict"].startswith("No cheaper candidate was non-inferior")
    assert not any(c["non_inferior"] for c in sec["candidates"] if c["model"] == "local/cheap")
    assert "test" in sec and sec["test"]["delta_quality"]["paired_n"] == len(res.manifest.test)
    assert res.report["models"]["task"] == "local/dear"


def test_latency_axis_chooses_the_fastest_non_inferior(tmp_path):
    """Same world, the cheap model slow and the dear one fast: the latency axis keeps the dear model
    that the cost axis would have replaced."""
    res, _, _ = _run(tmp_path, "fastest-not-worse", cheap_latency=0.03)
    sec = res.report["objective"]
    cands = _by_label(sec)
    assert sec["axis"] == "latency_p50_s"
    assert cands["local/cheap · optimized"]["non_inferior"]
    assert cands["local/cheap · optimized"]["splits"]["val"]["latency_p50_s"] >= 0.03
    # both perfect on validation: the reference is the slower of the two, the rule takes the faster
    assert sec["reference"] == "local/cheap · optimized" and sec["chosen"] == "local/dear · as given"
    assert sec["test"]["delta_latency_p50_s"] < -0.02 and sec["test"]["delta_usd_per_item"] > 0
    assert sec["test"]["delta_quality"]["delta"] == 0.0


@pytest.mark.parametrize("value, margin, field", [
    ("cheapest", 0.02, "objective.kind"),
    ("cheapest-not-worse", 0, "objective.margin"),
    ("cheapest-not-worse", 1.0, "objective.margin"),
    ("fastest-not-worse", -0.1, "objective.margin"),
    ("cheapest-not-worse", None, "objective.margin"),
    ("quality", 0.02, "objective.margin"),
])
def test_bad_objectives_are_refused(value, margin, field):
    with pytest.raises(InputError) as e:
        check_objective(value, margin)
    assert e.value.field == field


def test_margin_zero_says_why():
    with pytest.raises(InputError, match="proven better"):
        check_objective("cheapest-not-worse", 0)


def test_a_model_without_a_price_is_refused_before_anything_is_written(tmp_path):
    cheap, dear, refl = world()
    with pytest.raises(InputError, match="no price known for model 'openai/no-such-model-x'"):
        vf.optimize(BashGenerator(), data(), _Metric(), "gepa", models={"task": cheap, "reflection": refl},
                    budget=vf.Budget(max_metric_calls=30, prices=PRICES), run_dir=tmp_path / "run",
                    workdir=tmp_path / "wd", objective={"kind": "cheapest-not-worse", "margin": 0.02,
                                                        "models": [cheap, "openai/no-such-model-x"]})
    assert not (tmp_path / "run").exists() and not (tmp_path / "wd").exists()


def test_pareto_front():
    pts = [(1.0, 0.9), (0.5, 0.9), (0.2, 0.5), (0.6, 0.4), (0.2, None)]
    assert pareto_front(pts) == [False, True, True, False, False]


def test_your_own_pair_is_scored_as_given_and_can_be_chosen(tmp_path):
    """The reflection cannot fix the cheap model, but the user's own prompt for it can: the rule chooses
    the user's pair (cheaper than the dear model, non-inferior) over the dear reference."""
    cheap, dear, refl = world("Answer briefly.")
    goal = {"kind": "cheapest-not-worse", "margin": 0.05, "models": [dear],
            "candidates": [{"model": cheap, "prompt": "Use printf for every greeting."}],
            "reference": {"model": dear, "prompt": None}}
    res = vf.optimize(BashGenerator(), data(), _Metric(), "gepa", models={"task": dear, "reflection": refl},
                      budget=vf.Budget(max_metric_calls=30, prices=PRICES), run_dir=tmp_path / "run",
                      workdir=tmp_path / "wd", objective=goal)
    sec = res.report["objective"]
    mine = _by_label(sec)["local/cheap · yours 1"]
    assert mine["source"] == "yours" and set(mine["splits"]) == {"train", "val", "test"}
    assert sec["chosen"] == "local/cheap · yours 1" and mine["non_inferior"]
    assert res.program.predictors()[0].signature.instructions == "Use printf for every greeting."
    assert not (tmp_path / "run" / "candidates" / "local-cheap").exists()  # scored as given: no optimizer run


def test_cached_calls_are_priced_as_if_sent_and_said_so(tmp_path):
    from verifirst.lm import configure_cache
    from verifirst.lm.call_costs import ItemCosts
    from verifirst.lm.spend import Prices

    old = dspy.cache
    try:
        configure_cache(tmp_path / "cache")
        lm = scripted_lm(dear_fn, name="dear", cache=True, latency_s=0.02)
        prog = BashGenerator()
        seen = ItemCosts(Prices(PRICES))
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            with seen.scope("sent"):
                prog(task="easy greeting #1")
            with seen.scope("again"):
                prog(task="easy greeting #1")
        sent, again = seen.item("sent"), seen.item("again")
        assert lm.engine.calls == 1  # the second came from the cache
        assert sent["cached"] == 0 and again["cached"] == 1 and again["estimated"] == 0
        assert again["usd"] == sent["usd"] > 0 and again["tokens"] == sent["tokens"]
        assert again["latency_s"] == sent["latency_s"] >= 0.02  # the latency it took when sent
        fresh = ItemCosts(Prices(PRICES))  # a cache hit this process never saw sent: estimated, no latency
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), fresh.scope("hit"):
            prog(task="easy greeting #1")
        hit = fresh.item("hit")
        assert hit["cached"] == 1 and hit["estimated"] == 1 and hit["latency_s"] == 0.0
        assert abs(hit["tokens"] - sent["tokens"]) <= 0.5 * sent["tokens"]  # characters / 4
        summary = fresh.summary(["hit"])
        assert summary["note"] == "cached calls priced as if sent" and summary["estimated_calls"] == 1
    finally:
        dspy.cache = old


def test_one_spend_cap_for_every_model():
    from verifirst.loop.objective_run import remaining

    b = vf.Budget(max_usd=1.0, max_lm_calls=100, prices=PRICES)
    left = remaining(b, {"usd": 0.25, "lm_calls": 40, "tokens": 9, "wall_s": 3.0})
    assert (left.max_usd, left.max_lm_calls, left.max_tokens) == (0.75, 60, None)
    assert remaining(vf.Budget(max_metric_calls=30), {"usd": 5}).max_usd is None
    with pytest.raises(BudgetExceeded, match="spent by the earlier models' runs"):
        remaining(b, {"usd": 1.0})


def test_without_a_given_reference_the_best_on_validation_is_it(tmp_path):
    """Both the dear model and the cheap one with the optimized prompt are perfect on validation: the
    reference is the dearer of them, and the rule replaces it by the cheaper."""
    res, _, _ = _run(tmp_path, "cheapest-not-worse")
    sec = res.report["objective"]
    assert not sec["reference_given"]
    assert sec["reference"] == "local/dear · as given" and sec["chosen"] == "local/cheap · optimized"
    assert sec["test"]["delta_usd_per_item"] < 0 and sec["test"]["delta_quality"]["paired_n"] == len(res.manifest.test)


def test_a_price_is_needed_only_when_cost_is_the_objective():
    from verifirst.loop.objective import check_prices
    from verifirst.lm.spend import Prices

    unpriced = {"models": ["openai/no-such-model-x", "local/cheap"], "margin": 0.1}
    check_prices(check_objective({"kind": "fastest-not-worse", **unpriced}), None, Prices(PRICES))
    with pytest.raises(InputError, match="no price known for model 'openai/no-such-model-x'") as e:
        check_prices(check_objective({"kind": "cheapest-not-worse", **unpriced}), None, Prices(PRICES))
    assert e.value.field == "budget.prices"
