"""Every example file the README and the docs use validates, and the experiment ones run end to end
(models replaced by scripted ones; suites cut to a few items to stay fast)."""
from pathlib import Path

import pytest

from verifirst import api
from verifirst import config, experiment
from verifirst.lm import Models
from verifirst.lm.testing import json_answer, scripted_lm

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
S3_BUCKET = 'resource "aws_s3_bucket" "b" {\n  bucket = "example-bucket"\n}\n'


def answer(messages):
    return json_answer(reasoning="short", command="ls /", config=S3_BUCKET)


def models():
    return Models(task=scripted_lm(answer, name="ex-task"),
                  reflection=scripted_lm(lambda m: json_answer(new_instruction="Be precise."), role="reflection",
                                         name="ex-refl"))


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_example_validates(path):
    exp = config.load(path)
    assert exp.suite["name"] and exp.program["name"]


@pytest.mark.parametrize("name", ["bash_gepa.toml", "iac_gepa.toml"])
def test_example_runs(name, tmp_path):
    exp = config.load(EXAMPLES / name)
    exp.sections["experiment"]["workdir"] = str(tmp_path / "wd")
    exp.sections["suite"]["limit"] = 9
    exp.sections["optimizer"]["max_metric_calls"] = 8
    exp.sections["tracking"]["enabled"] = False
    out = api.run(exp, run_dir=tmp_path / "run", progress=False, models=models(), echo=lambda m: None)
    rep = out.report
    assert set(rep["splits"]) == {"train", "val", "test"}
    assert sum(rep["splits"][s]["before"]["n"] for s in rep["splits"]) == 9
    assert (tmp_path / "run" / "report.md").exists()


def test_outcomes_example_loads():
    from verifirst.judge.outcomes import load_outcomes

    s = load_outcomes(EXAMPLES / "outcomes.jsonl")
    assert len(s) >= 30 and {it.gold["label"] for it in s.items} == {"PASS", "FAIL"}


@pytest.mark.parametrize("backend", ["python", "auto"])
def test_iac_example_passes_and_its_policy_bites(backend, tmp_path):
    from verifirst.verifiers.terraform.verifier import verify_config

    cfg, policy = EXAMPLES / "iac" / "main.tf", EXAMPLES / "iac" / "policy.rego"
    ok = verify_config(str(cfg), policy=str(policy), backend=backend)
    assert ok.passed and ok.stage == "PASS", ok.feedback
    bad = tmp_path / "main.tf"
    bad.write_text(cfg.read_text().replace('"Enabled"', '"Suspended"'))
    v = verify_config(str(bad), policy=str(policy), backend=backend)
    assert v.stage == "OPA_FAIL" and "versioned" in v.feedback


@pytest.mark.parametrize("name", ["api_gepa.py", "api_teleprompter.py"])
def test_api_example_runs_scripted(name, tmp_path):
    """Each Python API example, with scripted LMs, improves its test split under the guard."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, VERIFIRST_EXAMPLE_SCRIPTED="1")
    p = subprocess.run([sys.executable, str(EXAMPLES / name), str(tmp_path / "wd")], capture_output=True,
                       text=True, env=env, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout[p.stdout.index("{\n"):])
    test = out.get("test") or {"before": out.get("test_before"), "after": out.get("test_after")}
    assert test["before"] < test["after"] == 1.0
    run_dir = tmp_path / "wd" / "runs"
    (run,) = run_dir.iterdir()
    assert {"report.json", "report.md", "program.json", "split_manifest.json"} <= {
        f.name for f in (run / "out").iterdir()}


def test_api_calibrate_example_runs_scripted(tmp_path):
    """vf.calibrate on the example outcomes, scripted: the driver's report plus the judge section,
    the calibrated judge beats the uncalibrated one on the held-out test split, and the prompt is
    registered with its champion alias decided on validation."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, VERIFIRST_EXAMPLE_SCRIPTED="1")
    p = subprocess.run([sys.executable, str(EXAMPLES / "api_calibrate.py"), str(tmp_path / "wd")],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout[p.stdout.index("{\n"):])
    assert out["test_pi"]["calibrated"] > out["test_pi"]["uncalibrated"]
    assert out["test"]["before"] < out["test"]["after"]
    assert out["teacher"]["keep"] > 0 and "FAIL if the diff contains" in out["prompt"]
    assert "decided on validation" in out["champion"]
    (run,) = (tmp_path / "wd" / "runs").iterdir()
    rep = json.loads((run / "report.json").read_text())
    assert {"splits", "sizes", "split_digest", "history", "details", "instructions", "usage", "judge"} <= set(rep)
    assert {"report.json", "report.md", "program.json", "split_manifest.json"} <= {
        f.name for f in (run / "out").iterdir()}
