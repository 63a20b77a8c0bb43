"""The command line teaches: every verb has --help with an example; wrong names exit 2."""
import os
import re

import pytest
from typer.testing import CliRunner

from verifirst.cli import app
from verifirst.core import registry

runner = CliRunner()
VERBS = ["run", "optimize", "demo", "ui", "report", "calibrate", "judge", "monitor", "bench", "components",
         "verify bash", "verify terraform", "schema pull"]


@pytest.mark.parametrize("verb", VERBS)
def test_help_for_every_verb(verb):
    r = runner.invoke(app, verb.split() + ["--help"])
    assert r.exit_code == 0, r.output
    assert "Usage" in r.output


def test_components_lists_registered_names():
    r = runner.invoke(app, ["components"])
    assert r.exit_code == 0
    studies = list(registry.STUDIES)
    assert "judge-anchor" in studies and "noise-injection" in studies  # benchmarks registers its studies
    for name in ("bash-builtin", "iac-builtin", "bash-generator", "terraform", "bash-exec", *studies):
        assert name in r.output
    optimizers = r.output.split("optimizers:")[1].split("experiments")[0]
    assert all(name in optimizers for name in ("gepa", "simba", "autorefine"))
    assert "failed to load" not in r.output  # the installed plugins all load


def test_unknown_bench_is_exit_2():
    r = runner.invoke(app, ["bench", "nosuch"])
    assert r.exit_code == 2 and "unknown experiment" in r.output


def test_bench_help_lists_the_registered_studies():
    r = runner.invoke(app, ["bench", "--help"])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert all(name in flat for name in registry.STUDIES), r.output


def test_bench_forwards_arguments():
    r = runner.invoke(app, ["bench", "noise-injection", "--", "--help"])
    assert r.exit_code == 0 and "usage" in r.output.lower()


def test_verify_bash_exit_codes_and_sandbox():
    import json

    same = runner.invoke(app, ["verify", "bash", "--gold", "ls /testbed | wc -l",
                               "--pred", "find /testbed -maxdepth 1 -mindepth 1 | wc -l", "--json"])
    assert same.exit_code == 0, same.output
    out = json.loads(same.stdout)
    assert out["equivalent"] is True and out["sandbox"].startswith(("vf-sandbox", "bwrap"))
    differ = runner.invoke(app, ["verify", "bash", "--gold", "ls /testbed", "--pred", "rm -r /testbed/dir1"])
    assert differ.exit_code == 1 and "NOT EQUIVALENT" in differ.stdout


def test_verify_bash_unsafe_local_is_opt_in(tmp_path, monkeypatch):
    import json

    r = runner.invoke(app, ["verify", "bash", "--fixture", "empty", "--gold", "echo hi", "--pred", "echo hi",
                            "--unsafe-local", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["sandbox"] == "unsafe-local"


def test_verify_bash_bad_llm_mode_is_exit_2():
    r = runner.invoke(app, ["verify", "bash", "--gold", "ls", "--pred", "ls", "--llm", "maybe"])
    assert r.exit_code == 2 and "llm" in r.output


def test_judge_summary_counts_errors_and_agreement():
    from verifirst.judge.apply import judge_summary as _judge_summary

    rows = [{"verdict": "PASS", "label": "PASS"}, {"verdict": "FAIL", "label": "FAIL"},
            {"verdict": "FAIL", "label": "PASS"}, {"verdict": None, "label": "FAIL"}]
    msg = _judge_summary(rows)
    assert "judged 3 of 4 records (1 LM errors)" in msg and "agreement 0.667" in msg
    assert "labels" not in _judge_summary([{"verdict": "PASS", "label": None}])


QUIET_DRIVER = '''
import sys
from verifirst import lm as _lm
from verifirst.lm import Models
from verifirst.lm.testing import json_answer, scripted_lm

def task(messages):
    return json_answer(command="printf hi" if "printf" in messages[0]["content"] else "echo hi")

_lm.make_models = lambda *a, **k: Models(
    task=scripted_lm(task, name="quiet-task"),
    reflection=scripted_lm(lambda m: json_answer(new_instruction="Always answer with printf."),
                           role="reflection", name="quiet-refl"))
from verifirst.cli import main
main(sys.argv[1:])
'''

NOISE = re.compile(r"\bINFO\b|\d+%\|.*\||it/s\]|s/it\]")


def _run_quietly(tmp_path, *flags):
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    (tmp_path / "driver.py").write_text(QUIET_DRIVER)
    (tmp_path / "exp.toml").write_text(
        '[experiment]\nname = "quiet"\nworkdir = "wd"\n[suite]\nname = "bash-builtin"\nlimit = 8\n'
        '[program]\nname = "bash-generator"\n[verifier]\nname = "exact"\n[splits]\nratios = [0.5, 0.25, 0.25]\n'
        '[optimizer]\nname = "gepa"\nmax_metric_calls = 12\n[models]\ntask = "local"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TQDM_", "MLFLOW_LOGGING"))}
    env["PYTHONPATH"] = str(repo)
    p = subprocess.run([sys.executable, "driver.py", *flags, "run", "exp.toml", "--run-dir", f"run{len(flags)}"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p.stdout + p.stderr


def test_run_prints_tables_without_library_logs_unless_verbose(tmp_path):
    quiet = _run_quietly(tmp_path)
    noise = [line for line in quiet.splitlines() if NOISE.search(line)]
    assert noise == [], noise[:10]
    assert "before pass" in quiet and "report:" in quiet
    loud = _run_quietly(tmp_path, "-v")
    assert any(NOISE.search(line) for line in loud.splitlines()), "with -v the libraries' INFO lines show"
