"""One typed request per run, built once and handed whole: `vf.optimize`, `vf.run` and `verifirst run`
build one OptimizeRequest, and the loop's RunRequest carries that object (it copies none of its fields)."""
import dataclasses

import dspy

import verifirst as vf
from verifirst import api
from verifirst.loop import driver
from verifirst.lm.testing import json_answer, scripted_lm
from verifirst.requests import OptimizeRequest

from conftest import experiment_toml
from test_api import QA, metric, models, records


def _capture(monkeypatch) -> list:
    seen = []
    real = driver.run

    def run(req, *a, **kw):
        seen.append(req)
        return real(req, *a, **kw)

    monkeypatch.setattr(driver, "run", run)
    return seen


def test_the_loop_gets_the_request_vf_optimize_checked(tmp_path, monkeypatch):
    seen = _capture(monkeypatch)
    res = vf.optimize(dspy.Predict(QA), records(), metric, "none", models=models(), run_dir=tmp_path / "r",
                      workdir=tmp_path, threads=2, max_error_rate=None, progress=None)
    (run,) = seen
    assert isinstance(run.request, OptimizeRequest)
    assert (run.request.threads, run.request.max_error_rate, run.request.progress) == (2, None, None)
    assert res.report["budget"]["num_threads"] == 2
    # what the request says is read from it: the run carries no second copy under another name
    copied = {"program", "threads", "progress", "max_error_rate", "executor", "splits"}
    assert not copied & {f.name for f in dataclasses.fields(driver.RunRequest)}


def test_an_experiment_file_is_one_request_not_optimize_keywords_again(tmp_path, monkeypatch):
    seen = _capture(monkeypatch)
    monkeypatch.setattr(api, "optimize", lambda *a, **kw: (_ for _ in ()).throw(AssertionError("re-spread")))
    path = tmp_path / "exp.toml"
    path.write_text(experiment_toml(tmp_path / "wd", name="whole", seed=3, optimizer="none",
                                    tracking={"enabled": False}))
    lm = scripted_lm(lambda m: json_answer(command="echo hi"))
    res = vf.run(path, models={"task": lm}, run_dir=tmp_path / "run")
    (run,) = seen
    assert isinstance(run.request, OptimizeRequest)
    assert (run.request.seed, run.request.name, run.request.run_dir) == (3, "whole", tmp_path / "run")
    assert run.request.config["experiment"]["name"] == "whole"
    assert res.run_dir == tmp_path / "run"
