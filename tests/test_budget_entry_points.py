"""Spend limits hold at every entry point: `judge.align(..., optimizer=AutoRefineAligner(budget=...))`,
a dspy.Teleprompter through the guard, and `vf.optimize` under threads. Calls are counted at the
scripted engines: no call past a cap is sent, the run stops with the reason (keeping what the
engine completed, the test split scored with what was held back for it), and a rerun on the same
run directory with a larger cap ends where an uncapped run ends."""
from __future__ import annotations

import json
import math
import os
import re
import threading
import typing

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")

import dspy
import pytest

import verifirst as vf
from verifirst.lm import AccountedLM
from verifirst.lm.spend import DEFAULT_MAX_TOKENS, BudgetExceeded
from verifirst.lm.testing import ScriptedEngine, json_answer

from test_aligner import INSTRUCTIONS, MODEL, judge_answer, log_labelled_traces, roles_answer, world
from test_budget import QA, _metric, _rows


# -- judge.align(traces, optimizer=AutoRefineAligner(budget=...)) ------------------------------------

@pytest.fixture(scope="module")
def align_world(tmp_path_factory):
    """A local MLflow store with 16 labelled traces; the judge's model behind a local endpoint whose
    scripted engine counts the calls that reach it."""
    from mlflow.genai.judges import make_judge

    from verifirst.lm.local_server import serve_local
    from verifirst.judge.mlflow_align import _env, _mlflow_at

    tmp = tmp_path_factory.mktemp("align-budget")
    engine = ScriptedEngine(judge_answer)
    url, stop = serve_local(engine)
    try:
        with _env(OPENAI_API_BASE=url, OPENAI_API_KEY="local-no-key", MLFLOW_MODEL_CATALOG_URI=""), \
                _mlflow_at(f"sqlite:///{tmp / 'mlflow.db'}", "align-budget"):
            judge = make_judge(name="safety", instructions=INSTRUCTIONS, model=MODEL,
                               feedback_value_type=typing.Literal["PASS", "FAIL"])
            traces = log_labelled_traces(world(16), "safety")
            yield {"judge": judge, "traces": traces, "engine": engine, "tmp": tmp}
    finally:
        stop()


def _align(world_, run_dir, budget):
    """One align; (the aligner, calls sent to the judge's model and to the teacher/proposer)."""
    import verifirst

    roles = ScriptedEngine(roles_answer)
    lm = AccountedLM("local/align-roles", role="teacher", spec="align-roles", engine=roles, cache=False,
                     num_retries=0)
    aligner = verifirst.AutoRefineAligner(teacher=lm, proposer=lm, max_iters=2, n_boot=100, num_threads=1,
                                          log_to_mlflow=False, run_dir=run_dir, budget=budget)
    before = world_["engine"].calls
    err = None
    try:
        world_["judge"].align(world_["traces"], optimizer=aligner)
    except BudgetExceeded as e:
        err = e
    return aligner, world_["engine"].calls - before, roles.calls, err


def test_align_stops_at_the_cap_and_resumes_to_the_uncapped_verdicts(align_world):
    from mlflow.exceptions import MlflowException

    tmp = align_world["tmp"]
    full, judge_calls, role_calls, err = _align(align_world, tmp / "a" / "run", None)
    assert err is None and judge_calls > 0 and role_calls > 0
    total = judge_calls + role_calls
    cap = total // 2  # mid-run: after the scoring before, inside the loop
    capped, j, r, err = _align(align_world, tmp / "b" / "run", vf.Budget(max_lm_calls=cap))
    assert j + r <= cap  # one thread: not one call past the cap, the judge's own included
    if err is not None:  # stopped before the loop, or with nothing left for the test split
        assert isinstance(err, MlflowException)  # as MLflow's aligners raise (and a BudgetExceeded)
        assert "resume" in str(err)
    assert f"max_lm_calls {cap} for the run reached" in capped.last_report["stopped_by"]
    state = json.loads((tmp / "b" / "run" / "run_state.json").read_text())
    assert state["status"] == "stopped" and state["spend"]["run"]["lm_calls"] == j + r
    assert state["spend"]["roles"]["judge"]["lm_calls"] == j  # the MLflow judge's calls are counted as "judge"
    again, j2, r2, err = _align(align_world, tmp / "b" / "run", vf.Budget(max_lm_calls=10 * total))
    assert err is None
    assert j + j2 == judge_calls  # the judge's replies were kept: no judge call is paid twice
    assert again.last_report["test_verdicts"] == full.last_report["test_verdicts"]
    assert again.last_report["aligned_instructions"] == full.last_report["aligned_instructions"]
    assert _rows(tmp / "b" / "run") == _rows(tmp / "a" / "run")


def test_align_max_usd_prices_the_mlflow_judge_model(align_world):
    """max_usd: the judge's model ("openai:/smollm2") is priced from the budget's table and its calls
    count against the cap; the money spent stays under it."""
    # the whole align: 30 judge calls, 0.41 USD at these prices; a call reserves ~0.21 USD (1000 tokens out)
    prices = {"openai/smollm2": {"input": 50.0, "output": 200.0}}
    budget = vf.Budget(max_usd=0.25, prices=prices)
    aligner, j, r, err = _align(align_world, align_world["tmp"] / "usd" / "run", budget)
    assert j > 0 and "stopped by budget: max_usd 0.25 for the run" in aligner.last_report["stopped_by"]
    assert err is None or (err.limit == "max_usd" and err.role is None)
    state = json.loads((align_world["tmp"] / "usd" / "run" / "run_state.json").read_text())
    judged = state["spend"]["roles"]["judge"]
    assert judged["lm_calls"] == j and judged["usd"] > 0 and state["spend"]["run"]["usd"] <= 0.25


# -- a dspy.Teleprompter through the guard ----------------------------------------------------------

PRICES = {"local/tp-task": {"input": 1000.0, "output": 4000.0}}


def _teleprompt(run_dir, engine, tmp_path, budget):
    task = AccountedLM("local/tp-task", spec="tp-task", engine=engine, cache=True, num_retries=0, max_tokens=64)
    data = [{"id": f"q{k}", "question": f"what is the answer #{k}?", "answer": "42"} for k in range(16)]
    tp = dspy.teleprompt.BootstrapFewShot(metric=lambda ex, pred, trace=None: pred.answer == ex.answer,
                                          max_bootstrapped_demos=3, max_labeled_demos=0, max_rounds=1)
    return vf.optimize(dspy.Predict(QA), data, _metric, tp, models={"task": task}, budget=budget,
                       run_dir=run_dir, workdir=tmp_path / "wd", cache=tmp_path / "cache")


def _tp_answer(messages):
    """42 for an even question, or for any question once a demo shows 42 (the bootstrapped demos
    change the answers, so the compile matters)."""
    n = int(re.search(r"#(\d+)\?", messages[-1]["content"]).group(1))
    demo = any("42" in m["content"] for m in messages[1:-1])
    return json_answer(answer="42" if n % 2 == 0 or demo else "41")


def _task_engine():
    return ScriptedEngine(_tp_answer)


@pytest.mark.parametrize("limit", ["max_lm_calls", "max_usd"])
def test_a_teleprompter_stops_at_the_cap_and_resumes_to_the_uncapped_rows(tmp_path, limit):
    full_engine = _task_engine()
    full = _teleprompt(tmp_path / "full", full_engine, tmp_path / "a", None)
    calls = full_engine.calls
    assert full.report["engine"] == "BootstrapFewShot" and calls > 16
    engine = _task_engine()
    run_dir = tmp_path / "capped"
    cap = calls // 2
    if limit == "max_usd":  # the whole run's price at PRICES (a run with a limit far above it), halved
        spent = _teleprompt(tmp_path / "priced", _task_engine(), tmp_path / "p",
                            vf.Budget(max_usd=1e6, prices=PRICES)).report["spend"]["run"]["usd"]
        cap = round(spent / 2, 4)
    capped = _teleprompt(run_dir, engine, tmp_path / "b", vf.Budget(prices=PRICES, **{limit: cap}))
    stop = capped.report["stopped"]
    assert stop["by"].startswith(f"stopped by budget: {limit}") and stop["test"] == "scored"
    # a teleprompter keeps no completed iteration: the start program stands, its test rows with it
    assert stop["kept"].startswith("the start program")
    assert capped.report["splits"]["test"]["comparison"]["delta"] == 0
    state = json.loads((run_dir / "run_state.json").read_text())
    assert state["status"] == "stopped" and json.loads((run_dir / "report.json").read_text())["stopped"] == stop
    if limit == "max_lm_calls":
        assert engine.calls <= cap  # one thread: not one call past the cap
    else:
        assert state["spend"]["run"]["usd"] <= cap
    sent = engine.calls
    assert 0 < sent < calls  # stopped mid-run
    again = _teleprompt(run_dir, engine, tmp_path / "b", vf.Budget(prices=PRICES, **{limit: cap * 100}))
    assert again.report["spend"]["stopped_by"] is None
    assert engine.calls == calls  # the calls made before the stop came from the cache: paid once
    assert _rows(run_dir) == _rows(tmp_path / "full") and again.report["splits"] == full.report["splits"]


# -- threads: admission is atomic -------------------------------------------------------------------

T_PRICES = {"local/th-task": {"input": 1000.0, "output": 4000.0}}
T_MAX_TOKENS = 16


class _Counting:
    """The task's scripted model, 20 ms a call: counts calls and keeps the prompt sizes it was sent."""

    def __init__(self):
        self.chars: list[int] = []
        self.lock = threading.Lock()
        self.engine = ScriptedEngine(self, latency_s=0.02)

    def __call__(self, messages):
        with self.lock:
            self.chars.append(sum(len(m["content"]) for m in messages))
        return json_answer(answer="42")


def _threaded(run_dir, counting, tmp_path, budget):
    task = AccountedLM("local/th-task", spec="th-task", engine=counting.engine, cache=True, num_retries=0,
                       max_tokens=T_MAX_TOKENS)
    data = [{"id": f"q{k}", "question": f"what is the answer #{k}?", "answer": "42"} for k in range(48)]
    return vf.optimize(dspy.Predict(QA), data, _metric, None, models={"task": task}, budget=budget, threads=4,
                       run_dir=run_dir, workdir=tmp_path / "wd", cache=tmp_path / "cache")


def test_threads_never_send_a_call_past_max_lm_calls(tmp_path):
    full = _Counting()
    _threaded(tmp_path / "full", full, tmp_path / "a", None)
    total = full.engine.calls
    for cap in (1, 7, total // 2, total - 1):
        counting = _Counting()
        with pytest.raises(BudgetExceeded):
            _threaded(tmp_path / f"cap{cap}", counting, tmp_path / f"c{cap}", vf.Budget(max_lm_calls=cap))
        assert counting.engine.calls <= cap, (cap, counting.engine.calls)


def test_threads_overshoot_max_usd_by_at_most_four_calls(tmp_path):
    full = _Counting()
    _threaded(tmp_path / "full", full, tmp_path / "a", None)
    p_in, p_out = (T_PRICES["local/th-task"][k] / 1e6 for k in ("input", "output"))
    # one call's worst case: its prompt's tokens (what the engine counts, chars // 4 + 1) and max_tokens out
    worst = max((c // 4 + 1) * p_in + T_MAX_TOKENS * p_out for c in full.chars)
    cap = round(0.4 * len(full.chars) * worst, 4)
    counting = _Counting()
    with pytest.raises(BudgetExceeded, match="max_usd"):
        _threaded(tmp_path / "capped", counting, tmp_path / "b", vf.Budget(max_usd=cap, prices=T_PRICES))
    state = json.loads((tmp_path / "capped" / "run_state.json").read_text())
    spent = state["spend"]["run"]["usd"]
    assert 0 < spent <= cap + 4 * worst
    assert state["spend"]["in_flight"] == 0 and state["spend"]["run"]["lm_calls"] == counting.engine.calls
    assert not math.isnan(spent)
