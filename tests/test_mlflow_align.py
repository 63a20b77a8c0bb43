"""MLflow make_judge + Judge.align(SIMBA) anchor over our Items, served by a scripted engine."""
from __future__ import annotations

import json
import os
import random
import re

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")

import pytest

from verifirst.core.errors import InputError, LeakageError
from verifirst.judge.mlflow_align import (
    JUDGE_NAME, MIN_TRACES, _mlflow_at, align_anchor, judge_instructions, log_outcome_traces, render_view)
from verifirst.loop.splits import SplitManifest
from verifirst.core.task import Item

RULE = "RULE: FAIL when the code contains BUG."


class RuleFollowingEngine:
    """Answers MLflow's judge prompt by the rules present in it (FAIL on BUG only once RULE is
    in the prompt, else PASS); SIMBA's OfferFeedback prompt with RULE as advice, GEPA's
    reflection with the current instructions plus RULE, MemAlign's distillation with RULE as
    the one guideline. At
    temperature > 0 a verdict flips now and then, the sampling variance SIMBA needs."""

    supports_response_schema = True

    def __init__(self, flip: float = 0.15, seed: int = 0, judge_text: str | None = None):
        self.rng = random.Random(seed)
        self.flip = flip
        self.judge_text = judge_text
        self.calls = 0
        self.prompts: list[str] = []

    def complete(self, req):
        from dspy.lm15 import Message, Response, TextPart, Usage

        self.calls += 1
        system = str(req.system or "")
        user = "\n".join(m.text or "" for m in req.messages)
        self.prompts.append(system + "\n" + user)
        if "module_advice" in system:
            adv = {"discussion": "the worse run missed the BUG marker", "module_advice": {"self": RULE}}
            text = json.dumps(adv) if req.config.response_format else (
                f"[[ ## discussion ## ]]\n{adv['discussion']}\n\n[[ ## module_advice ## ]]\n"
                f"{json.dumps(adv['module_advice'])}\n\n[[ ## completed ## ]]")
        elif "distill a list of guidelines" in user:  # MemAlign's semantic memory
            text = json.dumps({"guidelines": [{"guideline_text": RULE, "source_trace_ids": [0]}]})
        elif "`new_instruction`" in system:  # GEPA's reflection (DSPy ProposeInstruction)
            current = re.search(r"\[\[ ## current_instruction ## \]\]\n(.*?)\n\n\[\[ ## ", user, re.S).group(1)
            ans = {"new_instruction": f"{current}\n{RULE}"}
            text = json.dumps(ans) if req.config.response_format else (
                f"[[ ## new_instruction ## ]]\n{ans['new_instruction']}\n\n[[ ## completed ## ]]")
        elif self.judge_text is not None:
            text = self.judge_text
        else:
            code = user.split("code:", 1)[-1]
            verdict = "FAIL" if RULE in system and "BUG" in code else "PASS"
            if (req.config.temperature or 0) > 0 and self.rng.random() < self.flip * req.config.temperature:
                verdict = "FAIL" if verdict == "PASS" else "PASS"
            text = json.dumps({"result": verdict, "rationale": "by the rules in the prompt"})
        return Response(id=None, model="rules", message=Message.assistant([TextPart(text)]), finish_reason="stop",
                        usage=Usage(input_tokens=len(system + user) // 4 + 1, output_tokens=len(text) // 4 + 1))


def outcome_items(n: int, prefix: str) -> list[Item]:
    return [Item(f"{prefix}{i}", {"task": f"task {prefix}{i}",
                                  "code": f"def f{i}(x):\n    return x + {i}" + ("  # BUG" if i % 2 == 0 else "")},
                 {"label": "FAIL" if i % 2 == 0 else "PASS"}) for i in range(n)]


def test_instructions_get_the_inputs_variable_once():
    assert "{{ inputs }}" in judge_instructions("Judge the code.")
    mine = "Judge {{ inputs }} strictly."
    assert judge_instructions(mine) == mine
    assert render_view({"task": "t", "code": "c", "x": 1}, ["task", "code"]) == "task:\nt\n\ncode:\nc"


@pytest.fixture(scope="module")
def store_uri(tmp_path_factory) -> str:
    """One sqlite tracking store for the module (creating one runs MLflow's migrations, ~5-10 s)."""
    return f"sqlite:///{tmp_path_factory.mktemp('anchor-store') / 'mlflow.db'}"


def test_pointing_mlflow_at_a_store_for_a_block_puts_the_callers_settings_back(store_uri):
    """The anchors' and the aligner tests' `_mlflow_at`: MLflow's set_experiment writes MLFLOW_EXPERIMENT_ID into
    the process environment (a later call of the caller would log into that experiment of another store)."""
    from test_aligner import mlflow_process_state

    before = mlflow_process_state()
    with _mlflow_at(store_uri, "anchor-block"):
        inside = mlflow_process_state()
    assert inside["env"].get("MLFLOW_EXPERIMENT_ID") and inside["tracking_uri"] == store_uri
    assert mlflow_process_state() == before


def test_traces_map_to_what_align_consumes(store_uri):
    """MLflow's own converter reads our traces back as labelled examples with the view."""
    import mlflow
    from mlflow.genai.judges import make_judge
    from mlflow.genai.judges.optimizers.dspy_utils import trace_to_dspy_example

    before = mlflow.get_tracking_uri()
    items = outcome_items(2, "tr")
    with _mlflow_at(store_uri, "anchor-test"):
        traces = log_outcome_traces(items, ["task", "code"])
    assert mlflow.get_tracking_uri() == before
    judge = make_judge(name=JUDGE_NAME, instructions=judge_instructions("Judge."), model="openai:/x")
    for it, tr in zip(items, traces):
        (ex,) = trace_to_dspy_example(tr, judge)
        assert ex.result == it.gold["label"].lower()
        assert ex["inputs"] == render_view(it.inputs, ["task", "code"])


def test_guard_refuses_test_items_before_any_model_call(tmp_path):
    eng = RuleFollowingEngine()
    train, test = outcome_items(4, "tr"), outcome_items(2, "te")
    m = SplitManifest([it.id for it in train], [], [it.id for it in test], 0, (0.5, 0.0, 0.5))
    with pytest.raises(LeakageError):
        align_anchor(train + test[:1], test[1:], engine=eng, manifest=m, workdir=tmp_path)
    with pytest.raises(InputError, match="both train and test"):
        align_anchor(train + test[:1], test, engine=eng, workdir=tmp_path)
    bad = [Item("x", {"task": "t", "code": "c"}, {"label": "maybe"})]
    with pytest.raises(InputError, match="PASS/FAIL"):
        align_anchor(bad, test, engine=eng, workdir=tmp_path)
    assert eng.calls == 0


def test_too_few_traces_still_scores_the_unaligned_judge(tmp_path):
    train, test = outcome_items(MIN_TRACES - 1, "tr"), outcome_items(3, "te")
    res = align_anchor(train, test, engine=RuleFollowingEngine(), workdir=tmp_path)
    assert "at least 10" in res.metadata["align_error"]
    assert res.verdicts["mlflow_unaligned"] == {"te0": "PASS", "te1": "PASS", "te2": "PASS"}
    assert "mlflow_simba" not in res.verdicts


def test_unparseable_judge_answer_is_an_error_not_a_fail(tmp_path):
    res = align_anchor(outcome_items(2, "tr"), outcome_items(2, "te"),
                       engine=RuleFollowingEngine(judge_text="I think it is fine"), workdir=tmp_path)
    assert res.verdicts["mlflow_unaligned"] == {"te0": None, "te1": None}
    assert set(res.errors["mlflow_unaligned"]) == {"te0", "te1"}


def test_compare_judges_pairs_on_one_item_set():
    from verifirst.benchmarks.studies.judge_anchor import compare_judges

    labels = {f"i{k}": ("FAIL" if k % 2 == 0 else "PASS") for k in range(20)}
    ours = dict(labels)
    ours["i0"] = None  # an LM error: left out of every row, not a FAIL
    anchor = {i: "PASS" for i in labels}
    rep = compare_judges(labels, {"calibrated": ours, "mlflow_simba": anchor}, "calibrated", ["mlflow_simba"],
                         n_boot=300)
    assert rep["n_scored"] == 19 and rep["excluded_lm_errors"] == {"calibrated": 1, "mlflow_simba": 0}
    assert rep["judges"]["calibrated"]["pi"] == pytest.approx(1.0)
    assert rep["judges"]["mlflow_simba"]["fail_recall"] == 0.0
    c = rep["comparisons"]["calibrated_vs_mlflow_simba"]
    assert c["pi_delta"] > 0.9 and c["pi_ci95"][0] > 0
    assert (c["ours_right_anchor_wrong"], c["anchor_right_ours_wrong"]) == (9, 0)
    assert c["mcnemar_exact"]["p_value"] < 0.01
    with pytest.raises(InputError, match="no verdicts"):
        compare_judges(labels, {"calibrated": ours}, "calibrated", ["mlflow_simba"])


def test_model_spec_to_mlflow_uri():
    from verifirst.benchmarks.studies.judge_anchor import mlflow_model_uri

    assert mlflow_model_uri("local") is None
    assert mlflow_model_uri("openai/gpt-4o-mini") == "openai:/gpt-4o-mini"
    assert mlflow_model_uri("anthropic:/claude") == "anthropic:/claude"
    with pytest.raises(InputError):
        mlflow_model_uri("gpt4")


def _outcomes_file(tmp_path, n: int):
    rows = [{"id": it.id, "label": it.gold["label"], **it.inputs} for it in outcome_items(n, "o")]
    p = tmp_path / "outcomes.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_benchmark_reuses_a_calibrate_report_on_the_same_split(tmp_path):
    from verifirst.benchmarks.studies.judge_anchor import load_suite_and_splits, run_judge_anchor

    path = _outcomes_file(tmp_path, 12)
    suite, m = load_suite_and_splits(str(path), None, None, "0.5,0.25,0.25", 0)
    test = m.select(suite.items, "test")
    truth = {it.id: it.gold["label"] for it in test}
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"split_digest": "0" * 16, "test_verdicts": {"calibrated": truth}}))
    with pytest.raises(InputError, match="split"):
        run_judge_anchor(str(path), problems=None, report=str(report), engine=RuleFollowingEngine(),
                         workdir=tmp_path / "w")
    report.write_text(json.dumps({"split_digest": m.digest, "test_verdicts": {"calibrated": truth,
                                                                            "uncalibrated": truth}}))
    rep = run_judge_anchor(str(path), problems=None, report=str(report), engine=RuleFollowingEngine(),
                           workdir=tmp_path / "w", n_boot=200)
    # 6 train items are too few for align(): the un-aligned make_judge anchor is still compared
    assert any("align()" in w for w in rep["warnings"])
    assert set(rep["test"]["comparisons"]) == {"calibrated_vs_mlflow_unaligned"}
    assert rep["test"]["judges"]["calibrated"]["pi"] == pytest.approx(1.0)
    assert set(rep["test_verdicts"]["mlflow_unaligned"]) == set(truth)


def hashed_words(texts: list[str]) -> list[list[float]]:
    """A bag-of-words embedding (MemAlign's episodic memory only needs vectors to rank)."""
    import hashlib

    out = []
    for t in texts:
        v = [0.0] * 64
        for w in t.split():
            v[int(hashlib.md5(w.encode()).hexdigest(), 16) % 64] += 1.0
        out.append(v)
    return out


def test_aligners_are_parsed_and_detected(monkeypatch):
    import mlflow.genai.judges.optimizers as opts

    from verifirst.judge.mlflow_align import available_aligners, parse_aligners

    assert parse_aligners("all") == ["simba", "gepa", "memalign"]
    assert parse_aligners("memalign, simba") == ["simba", "memalign"]
    with pytest.raises(InputError, match="unknown aligner"):
        parse_aligners("simba,dpo")
    assert available_aligners() == {"simba": None, "gepa": None, "memalign": None}
    monkeypatch.delattr(opts, "GEPAAlignmentOptimizer")
    assert "no GEPAAlignmentOptimizer" in available_aligners()["gepa"]


def test_missing_aligners_and_too_few_traces_are_skipped_with_the_reason(tmp_path, monkeypatch):
    import mlflow.genai.judges.optimizers as opts

    monkeypatch.delattr(opts, "GEPAAlignmentOptimizer")
    res = align_anchor(outcome_items(4, "tr"), outcome_items(2, "te"), engine=RuleFollowingEngine(),
                       workdir=tmp_path, aligners=("simba", "gepa"))
    skipped = res.metadata["skipped_aligners"]
    assert "at least 10" in skipped["simba"] and "no GEPAAlignmentOptimizer" in skipped["gepa"]
    assert res.metadata["aligners"]["gepa"] == {"status": "skipped", "reason": skipped["gepa"]}
    assert set(res.verdicts) == {"mlflow_unaligned"} and "train_trace_ids" not in res.metadata


@pytest.mark.integration
def test_every_aligner_on_one_split_learns_the_rule_from_train_only(tmp_path, store_uri):
    """SIMBA, GEPA and MemAlign on the same train traces; each judge scored once on the same test items."""
    train, test = outcome_items(12, "tr"), outcome_items(6, "te")
    m = SplitManifest([it.id for it in train], [], [it.id for it in test], 0, (0.67, 0.0, 0.33))
    eng = RuleFollowingEngine()
    res = align_anchor(train, test, engine=eng, manifest=m, workdir=tmp_path, aligners="all", threads=4,
                       instructions="Review the code change before it is accepted.",
                       simba_kwargs={"max_steps": 2, "num_candidates": 3, "max_demos": 2},
                       gepa_max_metric_calls=24, embedder=hashed_words, tracking_uri=store_uri,
                       experiment="every-aligner")
    rows = res.metadata["aligners"]
    assert res.metadata["skipped_aligners"] == {} and "align_error" not in res.metadata, rows
    assert {rows[a]["status"] for a in rows} == {"aligned"}
    labels = {it.id: it.gold["label"] for it in test}
    assert set(res.verdicts["mlflow_unaligned"].values()) == {"PASS"}
    assert RULE not in res.instructions["mlflow_unaligned"]
    for key in ("mlflow_simba", "mlflow_gepa", "mlflow_memalign"):
        assert RULE in res.instructions[key], key
        assert res.verdicts[key] == labels, key
    assert "{{ inputs }}" in res.instructions["mlflow_gepa"]
    calls = res.metadata["lm_calls"]
    assert calls["align"] > 0 and calls["align_gepa"] > 0  # judge calls (reflection answers may be cached)
    assert len(res.metadata["train_trace_ids"]) == 12 and m.seen == {it.id for it in train}
    assert res.metadata["simba"]["max_steps"] == 2 and res.metadata["aligned_changed"]  # SIMBA-era keys kept
    # test views reach the model only when scored: once per judge per item, never in alignment
    assert sum("task te" in p for p in eng.prompts) == 4 * len(test)


def test_anchor_table_compares_every_judge_with_autorefine_on_one_item_set():
    from verifirst.benchmarks.studies.judge_anchor import anchor_table, format_table

    labels = {f"i{k}": ("FAIL" if k % 2 == 0 else "PASS") for k in range(20)}
    verdicts = {"calibrated": dict(labels), "uncalibrated": {i: "PASS" for i in labels},
                "mlflow_unaligned": {i: "PASS" for i in labels},
                "mlflow_gepa": {i: (v if i != "i0" else "PASS") for i, v in labels.items()}}
    verdicts["mlflow_gepa"]["i3"] = None  # an LM error: the item leaves every row
    meta = {"aligners": {"simba": {"status": "skipped", "reason": "needs at least 10 labelled train traces"},
                         "gepa": {"status": "aligned"},
                         "memalign": {"status": "error", "error": "MlflowException: no embeddings"}}}
    t = anchor_table(labels, verdicts, meta, n_boot=300)
    assert t["n_scored"] == 19 and t["excluded_lm_errors"]["mlflow_gepa"] == 1
    rows = {r["judge"]: r for r in t["rows"]}
    assert [r["judge"] for r in t["rows"]] == ["uncalibrated", "calibrated", "mlflow_unaligned", "mlflow_gepa",
                                               "mlflow_simba", "mlflow_memalign"]
    assert rows["calibrated"]["pi"] == pytest.approx(1.0) and "pi_delta_vs_ours" not in rows["calibrated"]
    assert rows["uncalibrated"]["pi_ci95"][1] <= 0.0 < rows["uncalibrated"]["pi_delta_ci95"][0]
    assert (rows["uncalibrated"]["ours_right_only"], rows["uncalibrated"]["judge_right_only"]) == (10, 0)
    assert rows["uncalibrated"]["mcnemar_p"] < 0.01
    g = rows["mlflow_gepa"]
    assert (g["ours_right_only"], g["judge_right_only"]) == (1, 0) and g["mcnemar_p"] == pytest.approx(1.0)
    assert rows["mlflow_simba"]["status"] == "skipped" and "at least 10" in rows["mlflow_simba"]["reason"]
    assert rows["mlflow_memalign"]["status"] == "error"
    text = format_table(t)
    for name in ("uncalibrated", "AutoRefine", "MLflow make_judge", "MLflow align GEPA", "MLflow align SIMBA",
                 "MLflow align MemAlign", "McNemar"):
        assert name in text, name
    assert len(text.splitlines()) == 2 + 6


def test_benchmark_table_with_all_aligners_on_a_calibrate_report(tmp_path, store_uri):
    from verifirst.benchmarks.studies.judge_anchor import load_suite_and_splits, run_judge_anchor

    path = _outcomes_file(tmp_path, 12)
    with pytest.raises(InputError, match="unknown aligner"):
        run_judge_anchor(str(path), problems=None, aligners="simba,dpo", workdir=tmp_path / "w")
    suite, m = load_suite_and_splits(str(path), None, None, "0.5,0.25,0.25", 0)
    truth = {it.id: it.gold["label"] for it in m.select(suite.items, "test")}
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"split_digest": m.digest, "test_verdicts": {
        "calibrated": truth, "uncalibrated": {i: "PASS" for i in truth}}}))
    rep = run_judge_anchor(str(path), problems=None, report=str(report), engine=RuleFollowingEngine(),
                           workdir=tmp_path / "w", n_boot=200, aligners="all",
                           anchor_options={"embedder": hashed_words, "tracking_uri": store_uri,
                                           "experiment": "table-all"})
    rows = {r["judge"]: r for r in rep["table"]["rows"]}
    assert rows["mlflow_simba"]["status"] == rows["mlflow_gepa"]["status"] == "skipped"  # 6 train traces
    assert rows["mlflow_memalign"]["status"] == "scored" and "mcnemar_p" in rows["mlflow_memalign"]
    assert set(rep["test"]["comparisons"]) == {"calibrated_vs_mlflow_unaligned", "calibrated_vs_mlflow_memalign"}
    assert any("gepa skipped" in w for w in rep["warnings"])
