"""LM faults (timeouts, 429/5xx, malformed, empty and off-schema answers) injected by scripted
LMs: bounded retries with backoff, then ERROR rows counted apart from FAIL and never scored;
too many errors stop an experiment, keeping its checkpoints and leaving its MLflow run unfinished.
Also: an unreachable MLflow server fails before any work; --offline logs locally."""
from __future__ import annotations

import json
from pathlib import Path

import dspy
import litellm
import mlflow
import pytest
from typer.testing import CliRunner

from verifirst import api
from verifirst import config, experiment
from verifirst.loop import evaluation as ev
from verifirst.core.callbacks import RunCallback
from verifirst.core.errors import ErrorRateExceeded
from verifirst.loop.evaluation import Scorer, evaluate
from verifirst.lm import FastJSONAdapter, Models, configure_cache
from verifirst.optimizers import compare
from verifirst.programs.bash import BashGenerator
from verifirst.core.task import Item
from verifirst.lm.testing import json_answer, scripted_lm
from verifirst.verifiers.exact import ExactMatch

GOOD = json_answer(command="printf hi")


def _raise(exc):
    def fn(messages):
        raise exc
    return fn


FAULTS = {
    "litellm-timeout": _raise(litellm.Timeout("request timed out", model="m", llm_provider="openai")),
    "timeout-error": _raise(TimeoutError("read timed out")),
    "http-429": _raise(litellm.RateLimitError("429 Too Many Requests", llm_provider="openai", model="m")),
    "http-503": _raise(litellm.ServiceUnavailableError("503 upstream unavailable", llm_provider="openai", model="m")),
    "http-500": _raise(litellm.InternalServerError("500 internal error", llm_provider="openai", model="m")),
    "malformed": lambda m: "Sure! The command is printf hi",
    "empty": lambda m: "",
    "off-schema": lambda m: json.dumps({"cmd": "printf hi"}),
}


def items(n: int, prefix: str = "i") -> list[Item]:
    return [Item(id=f"{prefix}{k}", inputs={"task": f"say hi #{k}"}, gold={"command": "printf hi"}) for k in range(n)]


def scorer() -> Scorer:
    return Scorer(ExactMatch(), "command")


@pytest.fixture
def sleeps(monkeypatch):
    waited: list[float] = []
    monkeypatch.setattr(ev, "_sleep", waited.append)
    return waited


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_every_fault_kind_is_an_error_row_after_bounded_retries(kind, sleeps):
    fn = FAULTS[kind]
    calls = []

    def counted(messages):
        calls.append(1)
        return fn(messages)

    with dspy.context(lm=scripted_lm(counted), adapter=FastJSONAdapter()):
        r = evaluate(BashGenerator(), items(3), scorer(), split="val", retries=2, backoff_s=0.25, progress=False)
    assert len(calls) == 3 * 3, "each item: one call and two retries"
    assert sleeps == [0.25, 0.5] * 3
    for row in r.rows:
        assert row.status == "ERROR" and row.error_kind == "lm" and row.score is None and row.attempts == 3
        assert row.error and ":" in row.error  # exception class and message
    s = r.summary()
    assert (s["errors"], s["pass"], s["scored"], s["n"]) == (3, 0, 0, 3)
    assert s["stages"] == {"ERROR": 3}


def test_verdict_outside_its_literal_is_an_error_not_a_fail(sleeps):
    from verifirst.judge.programs import PassFailJudge
    from verifirst.verifiers.base import Verdict

    class Label:
        name = "label"

        def verify(self, item, candidate):
            ok = candidate == item.gold["label"]
            return Verdict(float(ok), ok, "PASS" if ok else "MISMATCH")

    judged = [Item(id=f"j{k}", inputs={"code": f"x = {k}"}, gold={"label": "PASS"}) for k in range(2)]
    answer = json_answer(reasoning="unsure", verdict="MAYBE")
    with dspy.context(lm=scripted_lm(lambda m: answer), adapter=FastJSONAdapter()):
        r = evaluate(PassFailJudge(["code"]), judged, Scorer(Label(), "verdict"), split="val", retries=1,
                     backoff_s=0, progress=False)
    assert {(row.status, row.error_kind, row.score) for row in r.rows} == {("ERROR", "lm", None)}


def test_backoff_is_exponential_and_capped():
    assert ev.backoff_delays(6, 1.0, 4.0) == [1.0, 2.0, 4.0, 4.0, 4.0, 4.0]
    assert ev.backoff_delays(0, 1.0, 4.0) == []


def test_transient_fault_recovers_on_retry(sleeps):
    failures = {}

    def flaky(messages):  # each prompt fails twice (429, then timeout), then answers
        k = messages[-1]["content"]
        failures[k] = failures.get(k, 0) + 1
        if failures[k] == 1:
            raise litellm.RateLimitError("429", llm_provider="openai", model="m")
        if failures[k] == 2:
            raise litellm.Timeout("timeout", model="m", llm_provider="openai")
        return GOOD

    with dspy.context(lm=scripted_lm(flaky), adapter=FastJSONAdapter()):
        r = evaluate(BashGenerator(), items(4), scorer(), split="val", retries=3, backoff_s=0.1, progress=False)
    assert [row.status for row in r.rows] == ["PASS"] * 4
    assert all(row.attempts == 3 for row in r.rows)
    assert sleeps == [0.1, 0.2] * 4


def test_malformed_answer_is_evicted_from_the_cache_and_asked_again(tmp_path, sleeps):
    """Only an answer that parsed stays cached: the retry asks afresh, the rerun asks the model
    again for the prompt whose answer was malformed (it was evicted, not served), and a third run
    is served the good answers from the cache."""
    configure_cache(tmp_path / "cache")
    seen: dict[str, int] = {}

    def first_malformed(messages):
        k = messages[-1]["content"]
        seen[k] = seen.get(k, 0) + 1
        return "no json here" if seen[k] == 1 else GOOD

    lm = scripted_lm(first_malformed, cache=True, name="cached-flaky")
    try:
        for expected_calls, attempts in (([2, 2], 2), ([3, 3], 1), ([3, 3], 1)):
            with dspy.context(lm=lm, adapter=FastJSONAdapter()):
                r = evaluate(BashGenerator(), items(2, "c"), scorer(), split="val", retries=2, backoff_s=0,
                             progress=False)
            assert [(row.status, row.attempts) for row in r.rows] == [("PASS", attempts)] * 2
            assert sorted(seen.values()) == expected_calls
    finally:
        configure_cache(tmp_path / "cache", enabled=False)


def test_errors_are_reported_apart_from_fails_and_excluded_from_comparisons(sleeps):
    def mixed(messages):
        task = messages[-1]["content"]
        if "#0" in task or "#1" in task:
            raise litellm.ServiceUnavailableError("503", llm_provider="openai", model="m")
        if "#2" in task:
            return json_answer(command="echo hi")  # a genuine FAIL
        return GOOD

    with dspy.context(lm=scripted_lm(mixed), adapter=FastJSONAdapter()):
        after = evaluate(BashGenerator(), items(6), scorer(), split="test", retries=1, backoff_s=0, progress=False)
    with dspy.context(lm=scripted_lm(lambda m: json_answer(command="echo hi")), adapter=FastJSONAdapter()):
        before = evaluate(BashGenerator(), items(6), scorer(), split="test", retries=0, progress=False)
    s = after.summary()
    assert (s["n"], s["scored"], s["pass"], s["errors"]) == (6, 4, 3, 2)
    assert s["pass_rate"] == 0.75  # errors neither pass nor fail
    assert s["stages"]["ERROR"] == 2 and s["stages"]["MISMATCH"] == 1
    c = compare(before, after)
    assert c["paired_n"] == 4 and c["c_after_only"] == 3


def test_verifier_crash_is_an_error_of_its_own_kind():
    class Broken:
        name = "broken"

        def verify(self, item, candidate):
            raise RuntimeError("verifier fell over")

    with dspy.context(lm=scripted_lm(lambda m: GOOD), adapter=FastJSONAdapter()):
        r = evaluate(BashGenerator(), items(2), Scorer(Broken(), "command"), split="val", progress=False)
    assert {(row.status, row.error_kind, row.score) for row in r.rows} == {("ERROR", "verifier", None)}
    assert r.rows[0].output == "printf hi"


# -- experiments ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """One workdir (one MLflow store: creating its tables costs seconds) for these tests."""
    return tmp_path_factory.mktemp("faults") / "wd"


def exp_dict(workdir: Path, **over) -> dict:
    d = {
        "experiment": {"name": "faults", "workdir": str(workdir), "seed": 0, "max_error_rate": 0.2},
        "suite": {"name": "bash-builtin", "limit": 24},
        "program": {"name": "bash-generator"},
        "verifier": {"name": "exact"},
        "splits": {"ratios": [0.5, 0.25, 0.25]},
        "optimizer": {"name": "none"},
        "models": {"task": "local"},
        "tracking": {"enabled": True},
    }
    for k, v in over.items():
        d.setdefault(k, {}).update(v)
    return d


def test_error_rate_above_the_limit_stops_the_experiment_keeping_what_it_has(tmp_path, workdir, sleeps):
    n = [0]

    def dies_after_five(messages):
        n[0] += 1
        if n[0] > 5:
            raise litellm.ServiceUnavailableError("503 upstream unavailable", llm_provider="openai", model="m")
        return GOOD

    exp = config.from_dict(exp_dict(workdir))
    run_dir = tmp_path / "run"
    models = Models(task=scripted_lm(dies_after_five, name="dying"))
    with pytest.raises(ErrorRateExceeded) as e:
        api.run(exp, run_dir=run_dir, progress=False, models=models, echo=lambda m: None)
    msg = str(e.value)
    assert "LM errors" in msg and "20%" in msg and "rerun to resume" in msg and "before_train.jsonl" in msg
    rows = [json.loads(x) for x in (run_dir / "eval" / "before_train.jsonl").read_text().splitlines()]
    statuses = [r["status"] for r in rows]
    assert "ERROR" not in statuses[:5] and set(statuses[5:]) == {"ERROR"} and len(statuses) < 12
    assert not (run_dir / "report.json").exists()
    state = json.loads((run_dir / "run_state.json").read_text())
    assert state["status"] == "failed" and "LM errors" in state["failure"]
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{(workdir / 'mlflow.db').resolve()}")
    runs = client.search_runs([client.get_experiment_by_name("faults").experiment_id])
    assert runs and all(r.info.status != "FINISHED" for r in runs)
    parent = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert [r.info.status for r in parent] == ["FAILED"]


def _toml(d: dict) -> str:
    out = []
    for sec, body in d.items():
        out.append(f"[{sec}]")
        out += [f"{k} = {json.dumps(v)}" for k, v in body.items()]
    return "\n".join(out) + "\n"


def test_unreachable_tracking_server_fails_before_work_and_offline_logs_locally(tmp_path, workdir, monkeypatch):
    from verifirst.cli import app

    wd = tmp_path / "wd"  # fresh: the failing run must leave no store behind
    d = exp_dict(wd, tracking={"uri": "http://127.0.0.1:9"}, suite={"limit": 8},
                 experiment={"name": "faults-offline"})
    path = tmp_path / "exp.toml"
    path.write_text(_toml(d))
    built = []

    def no_model_loading(*a, **k):  # the run must fail before any model is built
        built.append(1)
        return Models(task=scripted_lm(lambda m: GOOD, name="offline"))

    monkeypatch.setattr("verifirst.lm.make_models", no_model_loading)
    runner = CliRunner()
    res = runner.invoke(app, ["run", str(path), "--run-dir", str(tmp_path / "r1")])
    assert res.exit_code == 2, res.output
    assert "http://127.0.0.1:9" in res.output and "unreachable" in res.output and "--offline" in res.output
    assert not built
    assert not [p for p in (tmp_path / "r1").rglob("*") if p.is_file()]
    assert not (wd / "mlflow.db").exists()

    d["experiment"]["workdir"] = str(workdir)  # the shared store, to spare creating another
    path.write_text(_toml(d))
    res = runner.invoke(app, ["run", str(path), "--run-dir", str(tmp_path / "r2"), "--offline", "--json"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "r2" / "report.json").exists() and (workdir / "mlflow.db").exists()
    rep = json.loads((tmp_path / "r2" / "report.json").read_text())
    assert rep["tracking_uri"].startswith("sqlite:")
    run = mlflow.MlflowClient(tracking_uri=rep["tracking_uri"]).get_run(rep["run_id"])
    assert run.info.status == "FINISHED"


# -- SIMBA's validation selection ------------------------------------------------------------
def _val_items(n: int) -> list:
    return [Item(id=f"v{k}", inputs={"task": f"say hi <item {k}>"}, gold={"command": "printf hi"}).example()
            for k in range(n)]


def _candidate(rule: str) -> BashGenerator:
    prog = BashGenerator()
    for _, p in prog.named_predictors():
        p.signature = p.signature.with_instructions(rule)
    return prog


def _exact(example, pred, trace=None) -> float:
    return float(pred.command == example.command)


def _rules_lm():
    """RARE answers right on 1 item in 100; HALF on even items; FLAKY raises on odd items and is
    right on every item it answers."""
    import re as _re

    def answer(messages):
        k = int(_re.search(r"<item (\d+)>", messages[-1]["content"]).group(1))
        system = messages[0]["content"]
        if "RARE" in system:
            right = k == 0
        elif "HALF" in system:
            right = k % 2 == 0
        elif "FLAKY" in system:
            if k % 2:
                raise litellm.ServiceUnavailableError("503", llm_provider="openai", model="m")
            right = True
        else:
            right = k % 10 < 6
        return json_answer(command="printf hi" if right else "echo hi")

    return scripted_lm(answer, name="rules")


def test_simba_selection_reads_dspy_percentages_on_the_right_scale():
    from verifirst.optimizers.simba import _select_on_val

    with dspy.context(lm=_rules_lm(), adapter=FastJSONAdapter()):
        chosen, scores, errors = _select_on_val([_candidate("RARE"), _candidate("HALF")], _exact, _val_items(100), 1)
    assert scores == [pytest.approx(0.01), pytest.approx(0.5)] and errors == [0, 0]
    assert chosen == 1, "a 1% pass rate must not read as 100%"


def test_simba_selection_scores_candidates_on_items_with_output_and_counts_errors():
    from verifirst.optimizers.simba import _select_on_val

    with dspy.context(lm=_rules_lm(), adapter=FastJSONAdapter()):
        chosen, scores, errors = _select_on_val([_candidate("STEADY"), _candidate("FLAKY")], _exact,
                                                _val_items(10), 1)
    assert scores == [pytest.approx(0.6), pytest.approx(1.0)]
    assert errors == [0, 5], "LM errors are counted apart, not scored 0"
    assert chosen == 1


# -- a failing model never looks like a result ------------------------------------------------
def test_first_requests_all_failing_stop_the_evaluation_before_the_rate_rule_could(sleeps):
    calls = []

    def dead(messages):
        calls.append(1)
        raise litellm.ServiceUnavailableError("503 upstream unavailable", llm_provider="openai", model="m")

    with dspy.context(lm=scripted_lm(dead), adapter=FastJSONAdapter()):
        with pytest.raises(ErrorRateExceeded) as e:
            evaluate(BashGenerator(), items(20), scorer(), split="val", retries=0, progress=False,
                     max_error_rate=0.5)
    assert len(calls) == ev.FIRST_CALLS_ALL_FAILED, "5 failed requests, not the rate rule's 10 items"
    assert "the first 5 requests to the model all failed" in str(e.value) and "503" in str(e.value)
    assert e.value.exit_code == 1


def test_the_early_stop_fires_between_an_items_retries(sleeps):
    """Retries inside one item count too: the stop comes at the 5th failed request, not at the end of
    the item that made it (3 attempts per item here: 3 + 2 requests, no sixth)."""
    calls = []

    def dead(messages):
        calls.append(1)
        raise litellm.ServiceUnavailableError("503 upstream unavailable", llm_provider="openai", model="m")

    with dspy.context(lm=scripted_lm(dead), adapter=FastJSONAdapter()):
        with pytest.raises(ErrorRateExceeded, match="the first 5 requests to the model all failed"):
            evaluate(BashGenerator(), items(20), scorer(), split="val", retries=2, progress=False,
                     max_error_rate=0.5)
    assert len(calls) == ev.FIRST_CALLS_ALL_FAILED
    assert len(sleeps) == 2 + 1, "the waits before the retries made, none before one not made"


def test_a_model_that_answers_first_is_not_stopped_early(sleeps):
    n = [0]

    def fails_after_first(messages):
        n[0] += 1
        if n[0] > 1:
            raise litellm.ServiceUnavailableError("503", llm_provider="openai", model="m")
        return GOOD

    with dspy.context(lm=scripted_lm(fails_after_first), adapter=FastJSONAdapter()):
        r = evaluate(BashGenerator(), items(8), scorer(), split="val", retries=0, progress=False, max_error_rate=0.9)
    assert [row.status for row in r.rows] == ["PASS"] + ["ERROR"] * 7


def test_every_attempt_is_counted_retries_too(monkeypatch):
    from verifirst import lm as vlm
    from verifirst.lm import USAGE, AccountedLM
    from verifirst.lm.testing import ScriptedEngine

    waits: list[float] = []
    monkeypatch.setattr(vlm, "_sleep", waits.append)
    n = [0]

    def third_time_lucky(messages):  # as the HTTP engine raises a 503
        from dspy._vendor.lm15.errors import ServerError

        n[0] += 1
        if n[0] < 3:
            raise ServerError("503 upstream unavailable")
        return GOOD

    lm = AccountedLM("local/retrying", engine=ScriptedEngine(third_time_lucky), num_retries=3, cache=False)
    u0 = USAGE.total()
    with dspy.context(lm=lm, adapter=FastJSONAdapter()):
        assert BashGenerator()(task="say hi").command == "printf hi"
    u = USAGE.total()
    assert (u.attempts - u0.attempts, u.failed_attempts - u0.failed_attempts, u.errors - u0.errors) == (3, 2, 0)
    assert waits == [1.0, 2.0]


def test_requests_time_out_by_default_and_per_role():
    from verifirst.core.errors import ConfigError
    from verifirst.lm import DEFAULT_TIMEOUT_S, make_lm, make_models

    assert make_lm("openai/gpt-4o-mini").kwargs["timeout"] == DEFAULT_TIMEOUT_S == 60
    ms = make_models({"task": {"model": "openai/gpt-4o-mini", "timeout_s": 7},
                      "judge": [{"model": "openai/m", "api_base": "http://127.0.0.1:9/v1"}]})
    assert ms.task.kwargs["timeout"] == 7 and ms.reflection.kwargs["timeout"] == 7
    assert {d["litellm_params"]["timeout"] for d in ms.judge.engine._model_list()} == {DEFAULT_TIMEOUT_S}
    for bad in (0, -1, "60", True):
        with pytest.raises(ConfigError, match=r"models.task.timeout_s"):
            make_lm("openai/gpt-4o-mini", timeout_s=bad)


def test_a_split_without_any_verdict_fails_the_run():
    from verifirst.loop.evaluation import EvalResult, Row, unscored_splits

    ok = EvalResult("train", [Row("a", "train", "PASS", 1.0), Row("b", "train", "ERROR", None, error_kind="lm")])
    dead = EvalResult("val", [Row("c", "val", "ERROR", None, error_kind="lm"),
                              Row("d", "val", "INCONCLUSIVE", None)])
    assert unscored_splits({"before": {"train": ok}}) is None
    assert unscored_splits({"before": {"train": ok, "val": dead}}) == \
        "before val: none of its 2 items got a verdict (1 LM errors, 0 verifier errors, 1 inconclusive)"
    assert unscored_splits({"after": {"test": EvalResult("test", [])}}) is None  # an empty split is no failure


def test_an_optimizer_that_saw_only_errors_fails_the_run_and_registers_nothing(tmp_path, workdir, sleeps):
    from verifirst.core.errors import RunFailed
    from verifirst.lm import current_split

    def dead_while_optimizing(messages):  # the evaluations get answers; every optimizer call fails
        if current_split() == "optimize":
            raise litellm.ServiceUnavailableError("503", llm_provider="openai", model="m")
        return GOOD

    exp = config.from_dict(exp_dict(workdir, experiment={"name": "faults-opt-dead"}, suite={"limit": 8},
                                    optimizer={"name": "gepa", "max_metric_calls": 4}))
    models = Models(task=scripted_lm(dead_while_optimizing, name="opt-dead"))
    with pytest.raises(RunFailed, match="the optimizer saw only errors"):
        api.run(exp, run_dir=tmp_path / "run", progress=False, models=models, echo=lambda m: None)
    assert not (tmp_path / "run" / "engine_done.json").exists() and not (tmp_path / "run" / "report.json").exists()
    uri = f"sqlite:///{(workdir / 'mlflow.db').resolve()}"
    client = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
    assert not client.search_prompts(filter_string="name = 'faults-opt-dead-instructions'")


def test_dspy_default_cache_keeps_no_unparsed_reply(monkeypatch):
    """Without configure_cache (the Python API), DSPy's own cache object evicts unparsed replies too."""
    from dspy.clients.cache import Cache

    monkeypatch.setattr(dspy, "cache", Cache(enable_disk_cache=False, enable_memory_cache=True, disk_cache_dir=None))
    answers = iter(["no json here", GOOD])
    lm = scripted_lm(lambda m: next(answers), cache=True, name="default-cache")
    with dspy.context(lm=lm, adapter=FastJSONAdapter()):
        with pytest.raises(Exception, match="parse"):
            BashGenerator()(task="say hi")
        assert BashGenerator()(task="say hi").command == "printf hi"  # asked again, not served the bad reply


class _StatusCallback(RunCallback):
    """Keeps the status the run ended with."""

    status = None

    def on_run_end(self, event) -> None:
        self.status = event.status


def test_the_python_api_fails_a_split_without_any_verdict_before_the_optimizer_runs(tmp_path, sleeps):
    """vf.optimize and vf.evaluate raise the same RunFailed as `verifirst run` (the check is the driver's)."""
    import verifirst as vf
    from verifirst.core.errors import RunFailed

    class NeverCalled(dspy.teleprompt.Teleprompter):
        def compile(self, student, *, trainset, valset=None, **kw):
            raise AssertionError("the optimizer ran on a split without any verdict")

    data = [{"id": f"i{k}", "task": f"say hi #{k}", "command": "printf hi"} for k in range(8)]
    dead = {"task": scripted_lm(FAULTS["http-503"], name="api-dead")}
    calls = (lambda cb, rd: vf.optimize(BashGenerator(), data, ExactMatch(), NeverCalled(), models=dead,
                                        run_dir=rd, workdir=tmp_path, tracking=cb, splits=(0.5, 0.25, 0.25),
                                        max_error_rate=None),  # the early stop would come first
             lambda cb, rd: vf.evaluate(BashGenerator(), data, ExactMatch(), models=dead, run_dir=rd,
                                        workdir=tmp_path, tracking=cb, ratios=(0.5, 0.25, 0.25),
                                        max_error_rate=None))
    for k, call in enumerate(calls):
        cb, run_dir = _StatusCallback(), tmp_path / f"run{k}"
        with pytest.raises(RunFailed, match=r"run failed: before train: none of its 4 items got a verdict "
                                            r"\(4 LM errors.*nothing registered.*same run directory"):
            call(cb, run_dir)
        assert cb.status == "FAILED"
        assert not (run_dir / "report.json").exists() and not (run_dir / "optimized_program.json").exists()
        state = json.loads((run_dir / "run_state.json").read_text())
        assert state["status"] == "failed" and "none of its 4 items got a verdict" in state["failure"]


def test_the_python_api_fails_when_the_optimized_program_gets_no_verdict(tmp_path, sleeps):
    """The check after the optimizer: its program's evaluations all failed, so no report is written."""
    import verifirst as vf
    from verifirst.core.errors import RunFailed

    broken = []

    class BreaksTheEndpoint(dspy.teleprompt.Teleprompter):
        def compile(self, student, *, trainset, valset=None, **kw):
            broken.append(True)  # from now on every request fails
            return student

    def task(messages):
        if broken:
            raise litellm.ServiceUnavailableError("503", llm_provider="openai", model="m")
        return GOOD

    data = [{"id": f"i{k}", "task": f"say hi #{k}", "command": "printf hi"} for k in range(8)]
    run_dir = tmp_path / "run"
    with pytest.raises(RunFailed, match=r"after train: none of its 4 items got a verdict"):
        vf.optimize(BashGenerator(), data, ExactMatch(), BreaksTheEndpoint(), run_dir=run_dir, workdir=tmp_path,
                    models={"task": scripted_lm(task, name="api-breaks")}, splits=(0.5, 0.25, 0.25),
                    max_error_rate=None)  # the early stop would come first
    assert broken and not (run_dir / "report.json").exists()


def test_the_python_api_stops_early_by_default_like_an_experiment_file(tmp_path, sleeps):
    """vf.optimize's max_error_rate defaults to the experiment file's: a dead model costs a few
    requests, not one per item."""
    import verifirst as vf

    sent = []

    def dead(messages):
        sent.append(1)
        raise litellm.ServiceUnavailableError("503", llm_provider="openai", model="m")

    data = [{"id": f"i{k}", "task": f"say hi #{k}", "command": "printf hi"} for k in range(40)]
    with pytest.raises((ErrorRateExceeded, vf.errors.RunFailed)):
        vf.evaluate(BashGenerator(), data, ExactMatch(), models={"task": scripted_lm(dead, name="api-dead-early")},
                    run_dir=tmp_path / "run", workdir=tmp_path, ratios=(0.5, 0.25, 0.25))
    assert 0 < len(sent) <= 8, len(sent)  # 20 train items would have sent 20 or more


def test_every_attempt_of_an_item_is_a_span_of_its_one_trace(tmp_path, sleeps):
    """An item whose first request failed (429) and whose retry answered: both program calls are
    spans of the item's one trace, which carries the item id, the split and the verdict; no trace
    of the evaluation is left without them (the failed attempt's used to be)."""
    import verifirst as vf

    asked: dict[str, int] = {}

    def flaky(messages):
        k = messages[-1]["content"]
        asked[k] = asked.get(k, 0) + 1
        if asked[k] == 1:
            raise litellm.RateLimitError("429", llm_provider="openai", model="m")
        return json_answer(answer="42")

    data = [{"id": f"q{k}", "question": f"what is the answer #{k}?", "answer": "42"} for k in range(8)]
    res = vf.optimize(dspy.Predict("question -> answer"), data, lambda ex, pred, trace=None: pred.answer == ex.answer,
                      "none", models={"task": scripted_lm(flaky)}, workdir=tmp_path / "w",
                      tracking=vf.MLflow(offline=True))
    client = mlflow.MlflowClient(res.tracking_uri)
    exp_id = client.get_run(res.run_id).info.experiment_id
    mlflow.set_tracking_uri(res.tracking_uri)
    traces = mlflow.search_traces(locations=[exp_id], return_type="list")
    assert traces and all({"verifirst.item_id", "verifirst.split"} <= set(t.info.tags) for t in traces)
    seen = set()
    for t in traces:
        item, split = t.info.tags["verifirst.item_id"], t.info.tags["verifirst.split"]
        root = next(s for s in t.data.spans if s.parent_id is None)
        assert root.name == f"{split}/{item}" and root.outputs["status"] == "PASS"
        calls = [s for s in t.data.spans if s.parent_id == root.span_id]
        assert len(calls) == 2 and [c.status.status_code for c in calls] == ["ERROR", "OK"], [c.name for c in calls]
        assert {a.name for a in t.info.assessments} >= {"verifier_score", "verifier_pass"}
        seen.add(item)
    assert seen == {d["id"] for d in data}
