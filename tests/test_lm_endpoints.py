"""A role served by several endpoints through LiteLLM's Router: two local OpenAI-compatible servers
(scripted engines behind `serve_local`), one stopped mid-run; the run finishes on the other, the
dead endpoint's failed attempts are counted, and no item loses its verdict because of it."""
import json
import pickle
import threading
from pathlib import Path

import dspy
import pytest
from typer.testing import CliRunner

from verifirst import config
from verifirst.cli import app
from verifirst.core.errors import ConfigError
from verifirst.lm import USAGE, FastJSONAdapter, make_lm, make_models
from verifirst.lm.local_server import serve_local
from verifirst.lm.testing import ScriptedEngine, json_answer


def _gold() -> dict[str, str]:
    from verifirst.benchmarks.bash_pack import load_bash_pack

    return {it.inputs["task"]: it.gold["command"] for it in load_bash_pack().items}


class Endpoint:
    """One local server whose scripted model answers every bash-builtin task with its gold command.

    die_after: serve that many calls, then fail the next one and shut the server down (from inside
    the run, so when it dies does not depend on how fast the machine is).
    """

    def __init__(self, gold: dict[str, str], die_after: int | None = None):
        self.served = 0

        def answer(messages):
            if die_after is not None and self.served >= die_after:
                if not self.stopped:
                    self.stopped = True
                    threading.Thread(target=self._stop, daemon=True).start()
                raise ConnectionError("endpoint going down")
            self.served += 1
            text = messages[-1]["content"]
            task = next((t for t in gold if t in text), None)
            return json_answer(command=gold[task] if task else "echo hi", answer="ok")

        self.engine = ScriptedEngine(answer)
        self.url, self._stop = serve_local(self.engine)
        self.stopped = False

    def stop(self):
        self.stopped = True
        self._stop()


@pytest.fixture(scope="module")
def gold():
    return _gold()


@pytest.fixture
def two(gold):
    eps = [Endpoint(gold), Endpoint(gold)]
    yield eps
    for e in eps:
        e.stop()


def _experiment(path: Path, workdir: Path, endpoints: list[dict], limit: int = 12) -> Path:
    eps = ", ".join("{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in e.items()) + "}" for e in endpoints)
    path.write_text(f"""
[experiment]
name = "endpoints"
workdir = "{workdir}"

[suite]
name = "bash-builtin"
limit = {limit}

[program]
name = "bash-generator"

[verifier]
name = "exact"

[optimizer]
name = "none"

[models]
task = [{eps}]

[tracking]
enabled = false
""")
    return path


@pytest.fixture
def dying_and_live(gold):
    eps = [Endpoint(gold, die_after=3), Endpoint(gold)]
    yield eps
    for e in eps:
        e.stop()


def test_one_endpoint_stopped_mid_run_the_run_finishes_on_the_other(tmp_path, dying_and_live):
    a, b = dying_and_live
    USAGE.reset()
    # least-busy on one thread always picks the first endpoint while it lives
    eps = [{"model": "openai/smollm2", "api_base": a.url, "routing": "least-busy", "allowed_fails": 0},
           {"model": "openai/smollm2", "api_base": b.url}]
    exp = _experiment(tmp_path / "exp.toml", tmp_path / "wd", eps, limit=8)

    r = CliRunner().invoke(app, ["run", str(exp), "--run-dir", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    assert a.stopped and a.served == 3
    rep = json.loads((tmp_path / "run" / "report.json").read_text())
    for split, body in rep["splits"].items():
        for phase in ("before", "after"):
            s = body[phase]
            assert s["pass"] == s["n"] and s["n"] > 0, (split, phase, s)  # nothing scored FAIL
            assert s.get("lm_errors", 0) == 0, (split, phase, s)
    la, lb = f"openai/smollm2@{a.url}", f"openai/smollm2@{b.url}"
    per = rep["usage_endpoints"]["task"]
    assert set(per) == {la, lb}
    assert per[la]["ok"] == 3 and per[la]["errors"] >= 1  # it served, then its attempts failed
    assert per[lb]["ok"] >= 1 and per[lb]["errors"] == 0
    assert per[la]["ok"] == a.served and per[lb]["ok"] == b.engine.calls
    u = rep["usage_this_run"]
    assert u["errors"] == 0  # the Router retried on the live endpoint: no call failed for the program
    assert u["lm_calls"] == per[la]["ok"] + per[lb]["ok"]
    assert per[lb]["prompt_tokens"] > 0 and per[lb]["completion_tokens"] > 0
    assert rep["models"]["task"] == f"{la} | {lb}"
    printed = " ".join(r.output.split())  # the console wraps long lines
    assert "LM endpoints for task: " in printed
    for ep, c in per.items():
        tokens = c["prompt_tokens"] + c["completion_tokens"]
        assert f"{ep} {c['calls']} attempts, {c['errors']} failed, {tokens} tokens" in printed


def test_fallback_endpoint_serves_when_the_primary_is_down(two, gold):
    a, b = two
    a.stop()  # the primary is down from the start
    USAGE.reset()
    lm = make_lm([{"model": "openai/smollm2", "api_base": a.url, "cooldown_s": 60},
                  {"model": "openai/smollm2", "api_base": b.url, "fallback": True}], role="judge", cache=False)
    with dspy.context(lm=lm, adapter=FastJSONAdapter()):
        out = [dspy.Predict("question -> answer")(question=f"q{i}").answer for i in range(3)]
    assert out == ["ok"] * 3
    per = USAGE.endpoints_as_dict()["judge"]
    assert per[f"openai/smollm2@{b.url}"]["ok"] == 3
    assert per[f"openai/smollm2@{a.url}"]["errors"] >= 1 and per[f"openai/smollm2@{a.url}"]["ok"] == 0
    assert USAGE.total(role="judge").errors == 0


def test_vf_optimize_models_takes_the_endpoint_list(tmp_path, two):
    import verifirst as vf

    a, b = two
    USAGE.reset()
    data = [{"id": f"q{i}", "question": f"question {i}?", "answer": "ok"} for i in range(8)]
    res = vf.optimize(dspy.Predict("question -> answer"), data, lambda ex, pred: pred.answer == ex.answer,
                      "none", models={"task": [{"model": "openai/smollm2", "api_base": a.url},
                                               {"model": "openai/smollm2", "api_base": b.url}]},
                      run_dir=tmp_path / "run", workdir=tmp_path / "wd")
    per = res.report["usage_endpoints"]["task"]
    assert set(per) == {f"openai/smollm2@{a.url}", f"openai/smollm2@{b.url}"}
    assert sum(c["ok"] for c in per.values()) == a.engine.calls + b.engine.calls > 0
    for body in res.report["splits"].values():
        assert body["after"]["pass"] == body["after"]["n"] > 0


def test_routed_engine_survives_pickling(two):
    """Ray ships programs with their LMs to workers: the Router is rebuilt where it lands."""
    a, b = two
    lm = make_lm([{"model": "openai/smollm2", "api_base": a.url}, {"model": "openai/smollm2", "api_base": b.url}],
                 cache=False)
    lm2 = pickle.loads(pickle.dumps(lm))
    with dspy.context(lm=lm2, adapter=FastJSONAdapter()):
        assert dspy.Predict("question -> answer")(question="q").answer == "ok"


@pytest.mark.parametrize("models, field", [
    ([], "models.task"),
    (["local"], "models.task[0].model"),
    ([{"model": "openai/m", "api_base": "http://x/v1", "colour": "red"}], "models.task[0].colour"),
    ([{"model": "openai/m", "routing": "round-robin"}], "models.task.routing"),
    ([{"model": "openai/m", "temperature": 0.0}, {"model": "openai/m", "temperature": 0.7}],
     "models.task[1].temperature"),
    ([{"model": "openai/m", "fallback": True}], "models.task"),
    ([{"model": "openai/m", "weight": 0}], "models.task[0].weight"),
    ([{"model": "openai/m", "num_retries": -1}], "models.task.num_retries"),
])
def test_bad_endpoint_list_names_the_field(models, field):
    with pytest.raises(ConfigError) as e:
        make_models({"task": models})
    assert e.value.field == field


def test_bad_endpoint_list_in_a_file_is_exit_2_and_writes_nothing(tmp_path):
    exp = _experiment(tmp_path / "exp.toml", tmp_path / "wd",
                      [{"model": "openai/m", "api_base": "http://127.0.0.1:9/v1", "routing": "fastest"}])
    line = next(n for n, text in enumerate(exp.read_text().splitlines(), 1) if text.startswith("task = ["))
    with pytest.raises(ConfigError) as e:
        config.load(exp)
    assert e.value.field == "models.task.routing" and e.value.line == line and e.value.path == str(exp)
    r = CliRunner().invoke(app, ["run", str(exp), "--run-dir", str(tmp_path / "run")])
    assert r.exit_code == 2 and f"{exp}:{line} [models.task.routing]: unknown routing 'fastest'" in " ".join(r.output.split())
    assert not (tmp_path / "run").exists() and not (tmp_path / "wd").exists()
