"""Agreement among labellers (verifirst.judging.agreement): Krippendorff's α (nominal) with a bootstrap
interval, checked against the `krippendorff` package and a hand-computed case; the per-item
disagreements; and the label policy that decides which items keep which label."""
from __future__ import annotations

import math
import types

import numpy as np
import pytest

import verifirst as vf
from verifirst.core.errors import InputError
from verifirst.judging.agreement import alpha_interval, krippendorff_alpha, select

krippendorff = pytest.importorskip("krippendorff")

N, DISAGREE = 50, set(range(10))  # two labellers disagree on a known 20%


def records() -> list[dict]:
    out = []
    for i in range(N):
        a = "FAIL" if i % 3 == 0 else "PASS"
        b = ("PASS" if a == "FAIL" else "FAIL") if i in DISAGREE else a
        labels = {"alice": a, "bob": b}
        if i < 5:
            labels["carol"] = a  # a third labeller breaks five of the ten disagreements toward alice
        out.append({"id": f"t{i}", "labels": labels})
    return out


def reference_alpha(units: list[list[str]], raters=("alice", "bob", "carol")) -> float:
    codes = {"PASS": 1.0, "FAIL": 0.0}
    data = np.full((3, len(units)), np.nan)
    for j, u in enumerate(units):
        for r, v in enumerate(u):
            data[r, j] = codes[v]
    return krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")


def test_a_hand_computed_alpha():
    # o_aa 2, o_ab = o_ba 1, o_bb 4; n_a 3, n_b 5, n 8: α = 1 − 7·2 / (2·3·5) = 8/15
    assert krippendorff_alpha([["a", "a"], ["a", "b"], ["b", "b"], ["b", "b"]]) == pytest.approx(8 / 15)
    assert krippendorff_alpha([["a", "a"], ["b", "b"]]) == 1.0
    assert math.isnan(krippendorff_alpha([["a", "a"], ["a"]])), "one value occurs: α is undefined"


def test_alpha_and_its_interval_match_the_krippendorff_package():
    recs = records()
    res = vf.label_agreement(recs, n_boot=300, seed=7)
    units = [list(r["labels"].values()) for r in recs]
    assert res["alpha"] == pytest.approx(reference_alpha(units), abs=1e-12)
    two = [[r["labels"]["alice"], r["labels"]["bob"]] for r in recs]
    assert krippendorff_alpha(two) == pytest.approx(reference_alpha(two), abs=1e-12)
    # the interval: the same item resamples, α from the reference at each
    rng = np.random.default_rng(7)
    ref = [reference_alpha([units[j] for j in rng.integers(0, N, N)]) for _ in range(300)]
    lo, hi = np.quantile([v for v in ref if v == v], [0.025, 0.975])
    assert res["alpha_ci"] == pytest.approx([lo, hi], abs=1e-12)
    assert res["alpha_ci"][0] < res["alpha"] < res["alpha_ci"][1]
    assert alpha_interval(units, 300, 7) == res["alpha_ci"]
    assert sorted(d["id"] for d in res["disagreements"]) == sorted(f"t{i}" for i in DISAGREE)
    assert res["n_items"] == N and res["n_pairable"] == N and res["labellers"] == ["alice", "bob", "carol"]


def test_each_policy_selects_the_expected_items():
    recs = records()
    by_id = {r["id"]: r["labels"] for r in recs}
    maj = vf.label_agreement(recs, "majority", n_boot=10)
    assert set(maj["dropped"]) == {f"t{i}" for i in range(5, 10)}, "a 1-1 tie is dropped"
    assert all(maj["selected"][f"t{i}"] == by_id[f"t{i}"]["alice"] for i in range(5)), "2 of 3 win"
    assert len(maj["selected"]) == N - 5
    una = vf.label_agreement(recs, "unanimous", n_boot=10)
    assert set(una["selected"]) == {f"t{i}" for i in range(10, N)}
    assert una["dropped"]["t3"] == "labellers disagree"
    bob = vf.label_agreement(recs, "bob", n_boot=10)
    assert bob["selected"] == {i: labels["bob"] for i, labels in by_id.items()}
    carol, _ = select(by_id, "carol")
    assert set(carol) == {f"t{i}" for i in range(5)}
    single, why = select({"x": {"alice": "PASS"}}, "unanimous")
    assert single == {} and why == {"x": "one label: agreement unknown"}
    with pytest.raises(InputError, match=r"\[policy\].*unknown label policy 'dave'.*alice, bob, carol"):
        vf.label_agreement(recs, "dave")


def _assessment(who: str, value, kind: str = "HUMAN", t: int = 0, name: str = "label"):
    return types.SimpleNamespace(name=name, valid=True, feedback=types.SimpleNamespace(value=value),
                                 source=types.SimpleNamespace(source_type=kind, source_id=who), create_time_ms=t)


def test_mlflow_traces_items_and_bad_records():
    traces = [types.SimpleNamespace(info=types.SimpleNamespace(trace_id=f"tr-{i}", assessments=[
        _assessment("alice", "PASS"), _assessment("bob", "FAIL" if i == 0 else "PASS", t=1),
        _assessment("bob", "PASS", t=0), _assessment("judge", "FAIL", kind="LLM_JUDGE"),
        _assessment("alice", "FAIL", name="other")])) for i in range(5)]
    res = vf.label_agreement(traces, n_boot=10)
    assert res["labellers"] == ["alice", "bob"], "the LLM judge's assessment is no labeller"
    assert [d["id"] for d in res["disagreements"]] == ["tr-0"], "bob's latest assessment counts"
    item = vf.Item(id="i1", inputs={}, gold={"labels": {"alice": "PASS", "bob": "PASS"}})
    assert vf.label_agreement([item], n_boot=5)["selected"] == {"i1": "PASS"}
    with pytest.raises(InputError, match=r"\[labels\].*record 'r1' has no 'labels' mapping"):
        vf.label_agreement([{"id": "r1", "label": "PASS"}])
    with pytest.raises(InputError, match=r"\[records\]"):
        vf.label_agreement([])


def test_the_judges_pi_is_reported_beside_the_humans_alpha():
    from verifirst.core.stats import scotts_pi

    recs = records()
    kept = vf.label_agreement(recs, "unanimous", n_boot=10)["selected"]
    judge = {i: v for i, v in kept.items()}
    judge["t10"] = "PASS" if judge["t10"] == "FAIL" else "FAIL"  # one wrong verdict
    judge["t11"] = None  # one failed call
    res = vf.label_agreement(recs, "unanimous", n_boot=200, verdicts=judge)
    ids = [i for i in kept if i != "t11"]
    assert res["judge"]["n"] == len(kept) - 1
    assert res["judge"]["pi"] == pytest.approx(scotts_pi([kept[i] for i in ids], [judge[i] for i in ids]))
    lo, hi = res["judge"]["pi_ci95"]
    assert lo <= res["judge"]["pi"] <= hi < 1.0 + 1e-9
    assert vf.label_agreement(recs, n_boot=5)["judge"] is None
