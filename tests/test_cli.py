"""The command line teaches: every verb has --help with an example; wrong names exit 2."""
import pytest
from typer.testing import CliRunner

from verifirst.cli import BENCHES, app

runner = CliRunner()
VERBS = ["run", "optimize", "demo", "ui", "report", "calibrate", "judge", "bench", "components",
         "verify bash", "verify terraform", "schema pull"]


@pytest.mark.parametrize("verb", VERBS)
def test_help_for_every_verb(verb):
    r = runner.invoke(app, verb.split() + ["--help"])
    assert r.exit_code == 0, r.output
    assert "Usage" in r.output


def test_components_lists_registered_names():
    r = runner.invoke(app, ["components"])
    assert r.exit_code == 0
    for name in ("bash-builtin", "iac-builtin", "bash-generator", "terraform", "bash-exec", *BENCHES):
        assert name in r.output


def test_unknown_bench_is_exit_2():
    r = runner.invoke(app, ["bench", "nosuch"])
    assert r.exit_code == 2 and "unknown experiment" in r.output


def test_bench_forwards_arguments():
    r = runner.invoke(app, ["bench", "noise-injection", "--", "--help"])
    assert r.exit_code == 0 and "usage" in r.output.lower()


def test_verify_bash_exit_codes_and_sandbox():
    import json

    same = runner.invoke(app, ["verify", "bash", "--gold", "ls /testbed | wc -l",
                               "--pred", "find /testbed -maxdepth 1 -mindepth 1 | wc -l", "--json"])
    assert same.exit_code == 0, same.output
    out = json.loads(same.stdout)
    assert out["equivalent"] is True and out["sandbox"].startswith("bwrap")
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
    from verifirst.cli import _judge_summary

    rows = [{"verdict": "PASS", "label": "PASS"}, {"verdict": "FAIL", "label": "FAIL"},
            {"verdict": "FAIL", "label": "PASS"}, {"verdict": None, "label": "FAIL"}]
    msg = _judge_summary(rows)
    assert "judged 3 of 4 records (1 LM errors)" in msg and "agreement 0.667" in msg
    assert "labels" not in _judge_summary([{"verdict": "PASS", "label": None}])
