"""Items without a verdict are counted by cause (no LM output, verifier error, inconclusive), kept
out of pass rates and paired comparisons, and every report (terminal, Markdown, HTML) shows the
same counts in its tables and its footer. Swallowed tracing failures are counted and shown."""
from __future__ import annotations

import io
import re

import dspy
import pytest

from verifirst import api, config, experiment

from verifirst.loop import evaluation as ev
from verifirst.loop.evaluation import Scorer, evaluate
from verifirst.report.html import render
from verifirst.lm import FastJSONAdapter, Models
from verifirst.loop.driver import optimize
from verifirst.optimizers import Budget, EngineContext, compare
from verifirst.programs.bash import BashGenerator
from verifirst.report import footer_lines, markdown, print_report
from verifirst.loop.splits import SplitManifest
from verifirst.core.task import ERROR, FAIL, INCONCLUSIVE, PASS, Item
from verifirst.lm.testing import json_answer, scripted_lm
from verifirst.verifiers.base import Verdict


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    monkeypatch.setattr(ev, "_sleep", lambda s: None)


class MixedVerifier:
    """PASS for `printf hi`; crashes on items named crash*; no observation on items named quiet*."""

    name = "mixed"

    def verify(self, item, candidate):
        if item.id.startswith("crash"):
            raise RuntimeError("fixture vanished")
        if item.id.startswith("quiet"):
            return Verdict.undecided("the gold command has no observable effect")
        ok = candidate == "printf hi"
        return Verdict(float(ok), ok, PASS if ok else "OUTPUT")


def task_fn(messages):
    text = messages[-1]["content"]
    if "#lm" in text:
        return "no JSON here"  # the call succeeds; the answer does not parse: an LM error for the item
    return json_answer(command="printf hi" if "#ok" in text else "echo hi")


def item(iid: str, tag: str) -> Item:
    return Item(iid, {"task": f"say hi {tag}"}, {"command": "printf hi"})


def mixed_items() -> list[Item]:
    return [item("a", "#ok"), item("b", "#no"), item("lm1", "#lm"), item("crash1", "#ok"),
            item("quiet1", "#ok"), item("quiet2", "#no")]


def run_eval(items, **kw):
    with dspy.context(lm=scripted_lm(task_fn), adapter=FastJSONAdapter()):
        return evaluate(BashGenerator(), items, Scorer(MixedVerifier(), "command"), split="val",
                        progress=False, retries=0, **kw)


def test_each_cause_is_counted_apart_and_out_of_pass_rates():
    res = run_eval(mixed_items())
    by = res.by_id()
    assert [by[i].status for i in ("a", "b", "lm1", "crash1", "quiet1", "quiet2")] == \
        [PASS, FAIL, ERROR, ERROR, INCONCLUSIVE, INCONCLUSIVE]
    assert by["lm1"].error_kind == "lm" and by["crash1"].error_kind == "verifier"
    q = by["quiet1"]
    assert q.score is None and q.stage == INCONCLUSIVE and "no observable effect" in q.feedback
    s = res.summary()
    assert (s["n"], s["scored"], s["pass"], s["pass_rate"]) == (6, 2, 1, 0.5)
    assert (s["errors"], s["lm_errors"], s["verifier_errors"], s["inconclusive"]) == (2, 1, 1, 2)
    assert s["stages"] == {PASS: 1, "OUTPUT": 1, ERROR: 2, INCONCLUSIVE: 2}
    assert s["mean_score"] == 0.5


def test_checkpoint_keeps_inconclusive_rows_and_retries_errors(tmp_path):
    ckpt = tmp_path / "val.jsonl"
    run_eval(mixed_items(), checkpoint=ckpt)
    calls = []

    def counting(messages):
        calls.append(messages[-1]["content"])
        return task_fn(messages)

    with dspy.context(lm=scripted_lm(counting), adapter=FastJSONAdapter()):
        again = evaluate(BashGenerator(), mixed_items(), Scorer(MixedVerifier(), "command"), split="val",
                         progress=False, retries=0, checkpoint=ckpt)
    # only the two ERROR items run again; inconclusive verdicts are results, not failures to retry
    assert sorted("#lm" in c for c in calls) == [False, True] and len(calls) == 2
    assert again.summary()["inconclusive"] == 2


def test_compare_pairs_only_items_with_a_verdict_on_both_sides():
    before = run_eval(mixed_items())
    after = run_eval(mixed_items())
    c = compare(before, after)
    assert c["paired_n"] == 2 and (c["before_pass"], c["after_pass"]) == (1, 1)


def test_a_failing_row_hook_is_counted_not_silent():
    def hook(item, row):
        if item.id == "b":
            raise ConnectionError("tracking store went away")

    res = run_eval(mixed_items(), on_row=hook)
    assert res.hook_failures == 1 and "ConnectionError: tracking store went away" in res.hook_error
    assert res.summary()["hook_failures"] == 1 and len(res.rows) == 6


def test_tracker_counts_feedback_it_could_not_attach(tmp_path):
    from verifirst.tracking import Tracker

    tr = Tracker(tmp_path / "wd", autolog=False)
    tr.start("t")
    try:
        hook = tr.feedback_hook(None, "val")
        hook.pending.append(("tr-does-not-exist", "a", run_eval(mixed_items()[:1]).rows[0]))
        assert tr.attach_feedback(hook) == 0
    finally:
        tr.finish()
    assert tr.failures >= 1 and "tr-does-not-exist" in tr.first_failure
    rep = {"tracking_failures": {"count": tr.failures, "first": tr.first_failure}}
    assert any(line.startswith(f"Tracking: {tr.failures} trace") for line in footer_lines(rep))
    assert footer_lines({"tracking_failures": {"count": 0, "first": None}}) == []


def mixed_report(tmp_path) -> dict:
    items = mixed_items() + [item("v_ok", "#ok"), item("t_ok", "#ok")]  # a split without a verdict fails the run
    manifest = SplitManifest(train=["a", "b"], val=["lm1", "crash1", "v_ok"], test=["quiet1", "quiet2", "t_ok"], seed=0,
                             ratios=(0.34, 0.33, 0.33))
    with dspy.context(lm=scripted_lm(task_fn), adapter=FastJSONAdapter()):
        res = optimize(BashGenerator(), Scorer(MixedVerifier(), "command"), items, manifest, None, Budget(),
                       EngineContext(tmp_path), progress=False)
    rep = res.report
    rep["usage_this_run"] = {"calls": 6, "lm_calls": 6, "cache_hits": 0, "errors": 0, "prompt_tokens": 10,
                             "completion_tokens": 5}
    return rep


def test_tables_and_footer_agree_in_every_report(tmp_path):
    rep = mixed_report(tmp_path)
    md = markdown(rep)
    head = next(line for line in md.splitlines() if line.startswith("| split |"))
    assert "items LM err b/a" in head and "items verifier err b/a" in head and "inconclusive b/a" in head
    val = next(line for line in md.splitlines() if line.startswith("| val |")).split(" | ")
    test = next(line for line in md.splitlines() if line.startswith("| test |")).split(" | ")
    assert val[-3:] == ["1/1", "1/1", "0/0 |"] and test[-1] == "2/2 |"
    footer = ("before: 1 with no LM output, 1 verifier errors, 2 inconclusive; "
              "after: 1 with no LM output, 1 verifier errors, 2 inconclusive")
    assert footer in md
    # model calls that raised are another count, and say so: never a bare "0 errors" under the table
    assert "0 calls raised at the model or provider" in md and not re.search(r"\b0 errors\b", md)
    buf = io.StringIO()
    from rich.console import Console

    print_report(rep, Console(file=buf, width=300))
    term = buf.getvalue()
    assert footer in term and "0 calls raised at the model or provider" in term
    page = render(rep, {})
    assert footer in page and "items verifier err b / a" in page and "inconclusive b / a" in page


def test_report_with_lm_errors_through_an_experiment(tmp_path):
    """Every answer but each split's first is malformed (a split with no verdict fails the run): the
    table's LM column and the footer both say those items, while the model calls themselves all
    succeeded (0 raised)."""
    from verifirst.lm import current_split
    from verifirst.lm.testing import json_answer

    calls: dict = {}

    def first_answer_only(messages):
        calls[current_split()] = calls.get(current_split(), 0) + 1
        return json_answer(command="printf hi") if calls[current_split()] == 1 else "Sure! The command is printf hi"

    exp = config.from_dict({
        "experiment": {"name": "all-malformed", "workdir": str(tmp_path / "wd"), "seed": 0},
        "suite": {"name": "bash-builtin", "limit": 6}, "program": {"name": "bash-generator"},
        "verifier": {"name": "exact"}, "splits": {"ratios": [0.34, 0.33, 0.33]},
        "optimizer": {"name": "none"}, "models": {"task": "local"}, "tracking": {"enabled": False}})
    models = Models(task=scripted_lm(first_answer_only, name="malformed"))
    out = api.run(exp, run_dir=tmp_path / "run", progress=False, models=models, echo=lambda m: None)
    md = (tmp_path / "run" / "report.md").read_text()
    sizes = out.report["sizes"]
    for split in ("train", "val", "test"):
        row = next(line for line in md.splitlines() if line.startswith(f"| {split} |")).split(" | ")
        assert row[-3] == f"{sizes[split] - 1}/{sizes[split] - 1}", row
    assert "before: 3 with no LM output, 0 verifier errors, 0 inconclusive" in md
    assert f"{out.report['usage_this_run']['errors']} calls raised at the model or provider" in md
