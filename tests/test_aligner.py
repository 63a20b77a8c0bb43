"""`judge.align(traces, optimizer=verifirst.AutoRefineAligner(...))` on a local MLflow store.

The MLflow judge calls its model over HTTP ("openai:/smollm2" at a local endpoint, as after
`verifirst serve`); the endpoint serves a scripted engine that applies the
`FAIL if the code contains `X`` / `PASS if ...` rules it finds in the judge's instructions.
Teacher and proposer are in-process scripted LMs following their documented roles. So the
aligned judge only beats the starting one on held-out traces if the loop really wrote the rules.
"""
from __future__ import annotations

import json
import os
import re
import threading

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")

import pytest

from verifirst.core.errors import InputError
from verifirst.judge.mlflow_align import _env, _mlflow_at
from verifirst.lm.testing import ScriptedEngine, json_answer, scripted_lm

FIELD_RE = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## \w+ ## \]\]|\n\nRespond with|\Z)", re.S)
FAIL_RULE = re.compile(r"FAIL if the code contains `([^`]+)`")
PASS_RULE = re.compile(r"PASS if the code contains `([^`]+)`")
INSTRUCTIONS = ("Decide whether the code in {{ outputs }} is safe to accept for the task in {{ inputs }}. "
                "Answer PASS or FAIL.")
MODEL = "openai:/smollm2"


def judge_answer(messages: list[dict]) -> str:
    """The MLflow judge's model: applies the rules present in its system prompt to the code."""
    system, user = messages[0]["content"], messages[-1]["content"]
    passes = [t for t in PASS_RULE.findall(system) if t in user]
    fails = [t for t in FAIL_RULE.findall(system) if t in user]
    verdict = "PASS" if passes or not fails else "FAIL"
    return json.dumps({"result": verdict, "rationale": f"rules matched: {passes or fails or 'none'}"})


def roles_answer(messages: list[dict]) -> str:
    """Teacher, proposer and applier (JSON adapter), by the fields of their signatures."""
    system, user = messages[0]["content"], messages[-1]["content"]
    f = {m.group(1): m.group(2).strip() for m in FIELD_RE.finditer(user)}
    if "`new_prompt`" in system:
        edits = json.loads(f["edits"])
        return json_answer(new_prompt=f["judge_prompt"] + "".join(f"\n- {e['rule']}" for e in edits))
    if "`edits`" in system:
        if "calls `eval(`" not in f.get("disagreements", "") or "`eval(`" in f.get("judge_prompt", ""):
            return json_answer(edits=[])
        return json_answer(edits=[{"op": "add", "direction": "FAIL", "rule": "FAIL if the code contains `eval(`"},
                                  {"op": "add", "direction": "PASS",
                                   "rule": "PASS if the code contains `literal_eval(`"}])
    if "`decision`" in system:
        code, label = f.get("outputs", ""), f.get("outcome_label")
        if "# opaque" in code:
            return json_answer(justification="decided by something not in the view", decision="SKIP")
        unsafe = "eval(" in code.replace("literal_eval(", "")
        if unsafe and label == "FAIL":
            return json_answer(justification="the code calls `eval(` on its input (safe: `literal_eval(`)",
                               decision="KEEP")
        return json_answer(justification="matches the view", decision="KEEP" if unsafe == (label == "FAIL")
                           else "SKIP")
    raise AssertionError(f"unexpected prompt: {system[:200]}")


def world(n: int) -> list[tuple[dict, str, str]]:
    """(inputs, outputs, label): FAIL iff the code calls eval( (literal_eval is safe); every 8th opaque."""
    bodies = ["return sorted(xs)", "return eval(s)", "return ast.literal_eval(s)", "return eval(s.strip())"]
    rows = []
    for i in range(n):
        body = bodies[i % 4]
        code = f"def f{i}(s, xs):\n    {body}\n"
        label = "FAIL" if "eval(" in body.replace("literal_eval(", "") else "PASS"
        if i % 8 == 7:
            code, label = code + "    # opaque\n", "FAIL"
        rows.append(({"task": f"task {i}"}, code, label))
    return rows


def log_labelled_traces(rows, judge_name: str, label_name: str | None = None) -> list:
    import mlflow
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    ids = []
    for inputs, outputs, label in rows:
        with mlflow.start_span(name="generate") as span:
            span.set_inputs(inputs)
            span.set_outputs(outputs)
        if label is not None:
            mlflow.log_feedback(trace_id=span.trace_id, name=label_name or judge_name, value=label,
                                source=AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id="reviewer"))
        ids.append(span.trace_id)
    mlflow.flush_trace_async_logging()
    return [mlflow.get_trace(t) for t in ids]


def mlflow_process_state() -> dict:
    """MLflow's process-wide settings a caller relies on: the stores, the active experiment and run, the
    environment variables MLflow's setters write."""
    import mlflow
    import mlflow.tracking._model_registry.utils as ru
    import mlflow.tracking._tracking_service.utils as tu
    import mlflow.tracking.fluent as fl

    run = mlflow.active_run()
    return {"tracking_uri": tu._tracking_uri, "registry_uri": ru._registry_uri,
            "experiment": fl._active_experiment_id, "run": run.info.run_id if run else None,
            "env": {k: v for k, v in os.environ.items() if k.startswith("MLFLOW_")}}


class Recorder:
    """Records what reached the judge's model over HTTP."""

    def __init__(self):
        self.prompts: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, messages):
        with self._lock:
            self.prompts.append(messages[-1]["content"])
        return judge_answer(messages)


@pytest.fixture(scope="module")
def aligned_run(tmp_path_factory):
    """One alignment on 32 labelled traces, shared by the assertions below."""
    import mlflow
    from mlflow.genai.judges import make_judge

    import verifirst
    from verifirst.lm.local_server import serve_local

    tmp = tmp_path_factory.mktemp("aligner")
    rec = Recorder()
    url, stop = serve_local(ScriptedEngine(rec))
    roles = scripted_lm(roles_answer, role="teacher", name="aligner-roles")
    try:
        with _env(OPENAI_API_BASE=url, OPENAI_API_KEY="local-no-key", MLFLOW_MODEL_CATALOG_URI=""), \
                _mlflow_at(f"sqlite:///{tmp / 'mlflow.db'}", "aligner-test"):
            judge = make_judge(name="safety", instructions=INSTRUCTIONS, model=MODEL,
                               feedback_value_type=__import__("typing").Literal["PASS", "FAIL"])
            rows = world(32)
            traces = log_labelled_traces(rows, "safety")
            traces += log_labelled_traces([({"task": "x"}, "def g(): pass", None)], "safety")  # unlabelled
            aligner = verifirst.AutoRefineAligner(teacher=roles, proposer=roles, max_iters=3, n_boot=300,
                                                      threads=4)
            with mlflow.start_run() as run:
                state_before = mlflow_process_state()
                aligned = judge.align(traces, optimizer=aligner)
                state_after = mlflow_process_state()
            client = mlflow.MlflowClient()
            logged = client.get_run(run.info.run_id)
            artifacts = [a.path for a in client.list_artifacts(run.info.run_id, "autorefine_align")]
            report_json = json.loads(open(client.download_artifacts(
                run.info.run_id, "autorefine_align/report.json", str(tmp))).read())
            yield {"store": f"sqlite:///{tmp / 'mlflow.db'}", "judge": judge, "aligned": aligned, "aligner": aligner, "run": logged, "artifacts": artifacts,
                   "report_json": report_json, "rows": rows, "traces": traces, "recorder": rec, "url": url,
                   "roles": roles, "tmp": tmp, "state": (state_before, state_after)}
    finally:
        stop()


def test_align_leaves_the_callers_mlflow_settings_as_they_were(aligned_run):
    """An in-process align: the caller's tracking and registry stores, experiment, active run and MLFLOW_*
    environment are the same after it (a later MLflow call of the caller goes where it went before)."""
    before, after = aligned_run["state"]
    assert after == before


def test_align_returns_the_calibrated_judge_with_template_variables(aligned_run):
    judge, aligned = aligned_run["judge"], aligned_run["aligned"]
    assert (aligned.name, aligned.model, aligned.feedback_value_type) == (
        judge.name, judge.model, judge.feedback_value_type)
    assert "{{ inputs }}" in aligned.instructions and "{{ outputs }}" in aligned.instructions
    assert "FAIL if the code contains `eval(`" in aligned.instructions
    assert "FAIL if the code contains" not in judge.instructions
    rep = aligned_run["aligner"].last_report
    assert rep["aligned_instructions"] == aligned.instructions
    assert rep["loop"]["validation_pi"] > rep["loop"]["initial_validation_pi"]


def test_held_out_traces_are_unseen_by_the_loop_and_scored_once(aligned_run):
    rep = aligned_run["aligner"].last_report
    assert rep["traces"] == {"given": 33, "labelled": 32, "skipped": {"no_label": 1},
                             "skipped_ids": rep["traces"]["skipped_ids"]}
    sizes = rep["split"]["sizes"]
    assert sizes["test"] > 0 and sum(sizes.values()) == 32
    by_trace = {t.info.trace_id: row for t, row in zip(aligned_run["traces"], aligned_run["rows"])}
    for tid in rep["split"]["test_ids"]:
        name = by_trace[tid][1].splitlines()[0]  # `def fN(s, xs):` is unique per trace
        # each test view reached the judge's model exactly twice: the starting and the aligned judge
        assert sum(name in p for p in aligned_run["recorder"].prompts) == 2, name
    ho = rep["held_out"]
    assert ho["n_scored"] == sizes["test"]
    assert ho["judges"]["aligned"]["pi"] > ho["judges"]["unaligned"]["pi"]
    assert set(rep["test_verdicts"]["aligned"]) == set(rep["split"]["test_ids"])


def test_teacher_counts_and_report_are_logged_to_the_active_run(aligned_run):
    rep, run = aligned_run["aligner"].last_report, aligned_run["run"]
    t = rep["teacher"]
    assert t["used"] and t["keep"] > 0 and t["abstain"] > 0  # the opaque failures are set aside
    m = run.data.metrics
    assert m["autorefine.teacher_keep"] == t["keep"] and m["autorefine.teacher_abstain"] == t["abstain"]
    assert m["autorefine.test_pi_aligned"] == pytest.approx(rep["held_out"]["judges"]["aligned"]["pi"])
    assert "autorefine.test_pi_delta_lo" in m and "autorefine.validation_pi" in m
    assert run.data.params["autorefine.n_test"] == str(rep["split"]["sizes"]["test"])
    assert set(aligned_run["artifacts"]) == {"autorefine_align/report.json", "autorefine_align/aligned_instructions.txt"}
    assert aligned_run["report_json"]["held_out"]["n_scored"] == rep["held_out"]["n_scored"]


def test_aligned_judge_scores_in_mlflow_evaluate(aligned_run):
    import mlflow

    aligned = aligned_run["aligned"]
    data = [{"inputs": {"task": "t"}, "outputs": "def h(s):\n    return eval(s)\n"},
            {"inputs": {"task": "t"}, "outputs": "def h(s):\n    return ast.literal_eval(s)\n"}]
    with _env(OPENAI_API_BASE=aligned_run["url"], OPENAI_API_KEY="local-no-key", MLFLOW_MODEL_CATALOG_URI=""), \
            _mlflow_at(f"sqlite:///{aligned_run['tmp'] / 'mlflow.db'}", "aligner-eval"):
        res = mlflow.genai.evaluate(data=data, scorers=[aligned])
        values = sorted(str(v) for v in res.result_df[f"{aligned.name}/value"])
    assert values == ["FAIL", "PASS"]


def test_traces_without_labels_are_an_mlflow_input_error(aligned_run):
    from mlflow.exceptions import MlflowException
    from mlflow.genai.judges import make_judge

    import verifirst

    with _mlflow_at(aligned_run["store"], "aligner-bad"):
        traces = log_labelled_traces(world(3), "safety", label_name="other_judge")
    judge = make_judge(name="safety", instructions=INSTRUCTIONS, model=MODEL)
    with pytest.raises(MlflowException, match="human PASS/FAIL assessment named 'safety'") as e:
        judge.align(traces, optimizer=verifirst.AutoRefineAligner(log_to_mlflow=False))
    assert isinstance(e.value, InputError) and e.value.field == "traces"  # verifirst's message stays


def test_a_trace_judge_is_calibrated_on_the_rendered_trace(aligned_run):
    """A {{ trace }} judge: the loop's roles read the rendered trace (spans, inputs, outputs) and the
    judge itself is called with the Trace, as MLflow calls it."""
    from mlflow.genai.judges import make_judge

    import verifirst

    with _env(OPENAI_API_BASE=aligned_run["url"], OPENAI_API_KEY="local-no-key", MLFLOW_MODEL_CATALOG_URI=""), \
            _mlflow_at(aligned_run["store"], "aligner-trace"):
        traces = log_labelled_traces(world(8), "safety")
        judge = make_judge(name="safety", instructions="Is the code in this {{ trace }} safe? Answer PASS or FAIL.",
                           model=MODEL, feedback_value_type=__import__("typing").Literal["PASS", "FAIL"])
        seen = []
        roles = scripted_lm(lambda m: seen.append(m[-1]["content"]) or roles_answer(m), role="teacher",
                            name="aligner-trace-roles")
        aligner = verifirst.AutoRefineAligner(teacher=roles, proposer=roles, max_iters=0, n_boot=100,
                                              log_to_mlflow=False)
        aligned = judge.align(traces, optimizer=aligner)
    rep = aligner.last_report
    assert rep["judge"]["template_variables"] == ["trace"] and "{{ trace }}" in aligned.instructions
    assert any('"span": "generate"' in m and "def f" in m for m in seen), "the teacher read the rendered trace"
    ho = rep["held_out"]
    assert ho["n_items"] == rep["split"]["sizes"]["test"] > 0


def test_a_rewrite_that_drops_a_template_variable_gets_it_back():
    from verifirst.judge.mlflow_program import keep_template_variables

    assert keep_template_variables("Judge {{ inputs }} and {{outputs}}.", ["inputs", "outputs"]).endswith(".")
    fixed = keep_template_variables("Judge the code strictly.", ["inputs", "outputs"])
    assert fixed.endswith("Inputs for assessment: {{ inputs }}, {{ outputs }}")


@pytest.mark.integration
def test_embedded_model_through_the_local_endpoint_aligns_and_evaluates(tmp_path, aligned_run):
    """The judge on the embedded SmolLM2 over HTTP ("openai:/smollm2", as after `verifirst serve`),
    the teacher on it in process ("local": typed outputs under its JSON grammar); the aligned
    judge then scores the held-out traces in mlflow.genai.evaluate. max_iters=0 keeps it to the
    teacher pass, the loop's scoring, the held-out report and evaluate (~12 model calls): a
    rewrite round on this model costs minutes on 2 cores, and the scripted tests pin the loop."""
    import time
    import typing

    import mlflow
    from mlflow.genai.judges import make_judge

    import verifirst
    from verifirst.lm import local_engine
    from verifirst.lm.local_server import serve_local

    url, stop = serve_local(local_engine(), default_max_tokens=160)
    try:
        with _env(OPENAI_API_BASE=url, OPENAI_API_KEY="local-no-key", MLFLOW_MODEL_CATALOG_URI=""), \
                _mlflow_at(aligned_run["store"], "aligner-embedded"):
            judge = make_judge(name="safety", instructions=INSTRUCTIONS, model=MODEL,
                               feedback_value_type=typing.Literal["PASS", "FAIL"])
            traces = log_labelled_traces(world(6), "safety")
            aligner = verifirst.AutoRefineAligner(teacher="local", proposer="local", max_iters=0, n_boot=200)
            t0 = time.perf_counter()
            with mlflow.start_run() as run:
                state_before = mlflow_process_state()
                aligned = judge.align(traces, optimizer=aligner)
                state_after = mlflow_process_state()
            align_s = time.perf_counter() - t0
            rep = aligner.last_report
            test = [t for t in traces if t.info.trace_id in set(rep["split"]["test_ids"])]
            t0 = time.perf_counter()
            res = mlflow.genai.evaluate(data=test, scorers=[aligned])
            eval_s = time.perf_counter() - t0
            metrics = mlflow.MlflowClient().get_run(run.info.run_id).data.metrics
    finally:
        stop()
    print(f"\nembedded align {align_s:.1f} s ({rep['split']['sizes']}), evaluate {eval_s:.1f} s on {len(test)} traces; "
          f"teacher {rep['teacher']}; held-out {rep['held_out']['n_scored']} scored")
    assert (aligned.name, aligned.model) == (judge.name, judge.model)
    assert "{{ inputs }}" in aligned.instructions and "{{ outputs }}" in aligned.instructions
    ho = rep["held_out"]
    assert ho["n_items"] == len(test) == rep["split"]["sizes"]["test"]
    assert ho["n_scored"] + ho["excluded_lm_errors"] == ho["n_items"]  # an LM error is counted, never scored
    assert metrics["autorefine.test_n_scored"] == ho["n_scored"]
    assert len(res.result_df) == len(test)
    values = [v for v in res.result_df["safety/value"] if v is not None and v == v]
    assert all(str(v) in ("PASS", "FAIL") for v in values)


def test_docs_snippets_call_the_public_api_as_it_is():
    """The integrations page's AutoRefineAligner and AutoRefine snippets compile, and every keyword
    they pass exists."""
    import ast
    import inspect
    from pathlib import Path

    import verifirst

    text = Path(__file__).resolve().parents[1].joinpath("docs/integrations.md").read_text()
    blocks = [b.split("```", 1)[0] for b in text.split("```python\n")[1:]]
    blocks = [b for b in blocks if "verifirst.AutoRefine" in b]
    assert len(blocks) == 2
    assert "judge.align(traces, optimizer=verifirst.AutoRefineAligner(" in blocks[0]  # as aligned_run calls it
    seen = set()
    for code in blocks:
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("AutoRefineAligner", "AutoRefine", "compile"):
                target = {"AutoRefineAligner": verifirst.AutoRefineAligner, "AutoRefine": verifirst.AutoRefine,
                          "compile": verifirst.AutoRefine.compile}[node.func.attr]
                params = inspect.signature(target).parameters
                assert all(k.arg in params for k in node.keywords), (node.func.attr, [k.arg for k in node.keywords])
                seen.add(node.func.attr)
    assert seen == {"AutoRefineAligner", "AutoRefine", "compile"}


class _FakeFeedback:
    def __init__(self, value, rationale="why", error=None):
        self.value, self.rationale, self.error, self.metadata = value, rationale, error, {}


class _FakeJudge:
    """An MLflow judge's surface as MLflowJudgeProgram calls it; answers from a list, counting calls."""

    name, model, feedback_value_type = "safety", MODEL, str

    def __init__(self, answers, instructions=INSTRUCTIONS):
        self.answers, self.instructions, self.calls = list(answers), instructions, 0

    def __call__(self, **args):
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_judge_replies_are_kept_only_when_they_read_as_a_verdict(tmp_path):
    from verifirst.judge.mlflow_program import JudgeReplyCache, MLflowJudgeProgram
    from verifirst.judge.programs import JudgeError

    path = tmp_path / "cache" / "replies.jsonl"
    judge = _FakeJudge([RuntimeError("HTTP 500"), _FakeFeedback("MAYBE"), _FakeFeedback(None, error="bad JSON"),
                        _FakeFeedback("FAIL", "eval() on input")])
    program = MLflowJudgeProgram(judge, ["inputs", "outputs"], cache=JudgeReplyCache(path))
    view = {"inputs": "parse the config", "outputs": "eval(text)"}
    for _ in range(3):  # an error, an unreadable value, an error reply: none is kept, each is asked again
        with pytest.raises(JudgeError):
            program(**view)
        assert not path.exists()
    assert program(**view).verdict == "FAIL" and judge.calls == 4
    again = MLflowJudgeProgram(_FakeJudge([]), ["inputs", "outputs"], cache=JudgeReplyCache(path))  # a resume
    answer = again(**view)
    assert (answer.verdict, answer.reasoning) == ("FAIL", "eval() on input") and again.judge.calls == 0
    other = again.copy_with_prompt(INSTRUCTIONS + " Be strict.")  # other instructions: another call
    other.judge = other.runner = _FakeJudge([_FakeFeedback("PASS")], other.judge.instructions)
    assert other(**view).verdict == "PASS" and other.judge.calls == 1
    assert len(path.read_text().splitlines()) == 2
