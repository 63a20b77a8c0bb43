"""The verbs' typed requests (verifirst.requests.verbs, verifirst.judge.requests): every option of `verify bash`, `verify
terraform`, `report`, `ui`, `bench`, `run`, `judge`, `monitor` and `calibrate` is one field of its request; a bad value is refused
with exit 2 naming the option, before anything is read, written or started. `verifirst ui` serves
the store a run names, and exits 2 when it cannot serve."""
from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from verifirst.cli import app
from verifirst.judge import requests as judge_requests
from verifirst.requests import verbs

COMMANDS = {
    ("verify", "bash"): (verbs.VerifyBashRequest, verbs.VERIFY_BASH_FLAGS),
    ("verify", "terraform"): (verbs.VerifyTerraformRequest, verbs.VERIFY_TERRAFORM_FLAGS),
    ("report",): (verbs.ReportRequest, verbs.REPORT_FLAGS),
    ("ui",): (verbs.UiRequest, verbs.UI_FLAGS),
    ("bench",): (verbs.BenchRequest, verbs.BENCH_FLAGS),
    ("run",): (verbs.RunFlags, verbs.RUN_FLAG_FIELDS),
    ("judge",): (judge_requests.JudgeRequest, judge_requests.JUDGE_FLAGS),
    ("monitor",): (judge_requests.MonitorRequest, judge_requests.MONITOR_FLAGS),
}


def _command(path):
    cmd = typer.main.get_command(app)
    for name in path:
        cmd = cmd.commands[name]
    return cmd


def _shown(param) -> str:
    opts = [o for o in param.opts if o.startswith("--")]
    return opts[0] if opts else param.name.upper()


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_every_option_is_one_field_of_the_verbs_request(path):
    model, flags = COMMANDS[path]
    shown = {_shown(p) for p in _command(path).params if p.name != "ctx"}
    fields = {f: n for f, n in flags.items() if f and f in model.model_fields}
    assert set(fields) == set(model.model_fields)  # each field has one option
    if path == ("bench",):
        shown |= {"ARGS"}  # the study's own arguments, passed on
    assert shown == set(fields.values()), (shown, fields)


def test_every_calibrate_option_is_a_field_of_its_request():
    """calibrate's options are CalibrateRequest's fields; the spend flags make its one `budget`
    (a vf.Budget), and --yes answers the spend question rather than asking anything. The fields
    without an option are the API's (LMs, a prompt given as text, an MLflow object, a file's config)."""
    model, flags = judge_requests.CalibrateRequest, judge_requests.CALIBRATE_FLAGS
    shown = {_shown(p) for p in _command(("calibrate",)).params if p.name != "ctx"}
    spend = {"--max-tokens", "--max-lm-calls", "--max-wall-s"}  # with --max-usd: the budget
    assert set(flags) <= set(model.model_fields)
    assert shown == set(flags.values()) | spend | {"--yes"}, shown ^ (set(flags.values()) | spend | {"--yes"})
    assert set(model.model_fields) - set(flags) == {"experiment", "models", "prompt_text", "tracking",
                                                    *judge_requests.IN_MEMORY_FIELDS}


def _invoke(tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, argv)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"a traceback: {res.exception!r}") from res.exception
    return res


@pytest.mark.parametrize("argv, flag", [
    (["verify", "bash", "--gold", "ls", "--pred", ""], "[--pred]"),
    (["verify", "bash", "--gold", "ls", "--pred", " "], "[--pred]"),
    (["verify", "bash", "--gold", "", "--pred", "ls"], "[--gold]"),
    (["verify", "bash", "--pred", "ls"], "[--gold]"),
    (["verify", "bash", "--gold", "ls", "--pred", "ls", "--timeout", "nan"], "[--timeout]"),
    (["verify", "bash", "--gold", "ls", "--pred", "ls", "--timeout", "inf"], "[--timeout]"),
    (["verify", "bash", "--gold", "ls", "--pred", "ls", "--timeout", "1e9"], "[--timeout]"),
    (["verify", "bash", "--gold", "ls", "--pred", "ls", "--timeout", "-1"], "[--timeout]"),
    (["verify", "bash", "--gold", "ls", "--pred", "ls", "--llm", "maybe"], "[--llm]"),
    (["verify", "bash", "--pred", "ls", "--check", "no-such.sh"], "[--check]"),
    (["verify", "terraform", "main.tf", "--backend", "fast"], "[--backend]"),
    (["verify", "terraform", "main.tf", "--gates", "validate,lint"], "[--gates"),
    (["report", "0123deadbeef", "--workdir", "typo"], "[--workdir]"),
    (["bench", "judge-validation", "--limit", "-1"], "[ARGS]"),
    (["bench", "judge-validation", "--limit=0"], "[ARGS]"),
    (["bench", "judge-validation", "--alpha", "nan"], "[ARGS]"),
    (["run", "exp.toml", "--max-usd", "inf"], "[--max-usd]"),
    (["run", "exp.toml", "--margin", "nan"], "[--margin]"),
    (["run", "exp.toml", "--run-dir", "/"], "[--run-dir]"),
    (["monitor", "--prompt", "p.md", "--from-mlflow", "e", "--recorded", ""], "[--recorded]"),
    (["monitor", "--prompt", "p.md", "--from-mlflow", "e", "--recorded", "judge", "--max-wait", ""], "[--max-wait]"),
])
def test_a_bad_option_exits_2_naming_it_and_writes_nothing(tmp_path, monkeypatch, argv, flag):
    res = _invoke(tmp_path, monkeypatch, argv)
    assert res.exit_code == 2, res.output
    assert flag in res.output, res.output
    assert list(tmp_path.iterdir()) == [], "nothing is written for a refused request"


# -- verifirst ui -------------------------------------------------------------------------------------


@pytest.fixture
def served(monkeypatch):
    """What ui would exec (the command), instead of starting a server."""
    seen = {}

    def execvpe(file, args, env):
        seen["cmd"] = args
        raise SystemExit(0)

    monkeypatch.setattr(os, "execvpe", execvpe)
    return seen


def _store(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mlflow.db").write_bytes(b"")
    return folder


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ui_refuses_a_mistyped_workdir_and_creates_nothing(tmp_path, monkeypatch, served):
    res = _invoke(tmp_path, monkeypatch, ["ui", "--workdir", "typo", "--port", str(_free_port())])
    assert res.exit_code == 2 and "[--workdir]" in res.output and "nothing was created" in res.output
    assert list(tmp_path.iterdir()) == [] and "cmd" not in served


def test_ui_exits_2_when_its_port_is_taken(tmp_path, monkeypatch, served):
    _store(tmp_path / "wd")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = _invoke(tmp_path, monkeypatch, ["ui", "--workdir", "wd", "--port", str(port)])
    assert res.exit_code == 2 and "[--port]" in res.output and "cmd" not in served


def test_ui_exits_2_when_its_host_does_not_resolve(tmp_path, monkeypatch, served):
    _store(tmp_path / "wd")
    res = _invoke(tmp_path, monkeypatch, ["ui", "--workdir", "wd", "--host", "no-such-host.invalid"])
    assert res.exit_code == 2 and "[--host]" in res.output and "cmd" not in served


def test_ui_serves_mlflow_tracking_uri_when_no_workdir_is_given(tmp_path, monkeypatch, served):
    store = _store(tmp_path / "elsewhere")
    uri = f"sqlite:///{store / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    res = _invoke(tmp_path, monkeypatch, ["ui", "--port", str(_free_port())])
    assert res.exit_code == 0, res.output
    cmd = served["cmd"]
    assert cmd[cmd.index("--backend-store-uri") + 1] == uri
    assert cmd[cmd.index("--default-artifact-root") + 1] == (store / "mlartifacts").resolve().as_uri()


def test_ui_workdir_given_wins_over_the_variable(tmp_path, monkeypatch, served):
    from verifirst.tracking import default_uri

    _store(tmp_path / "wd")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////nowhere/mlflow.db")
    res = _invoke(tmp_path, monkeypatch, ["ui", "--workdir", "wd", "--port", str(_free_port())])
    assert res.exit_code == 0, res.output
    assert default_uri(tmp_path / "wd") in served["cmd"]


def test_the_hint_after_a_run_opens_the_store_it_logged_to(tmp_path):
    from verifirst.cli_run import _ui_hint
    from verifirst.tracking import default_uri

    assert _ui_hint(default_uri(tmp_path / "wd"), str(tmp_path / "wd")) == f"verifirst ui --workdir {tmp_path / 'wd'}"
    other = f"sqlite:///{tmp_path / 'other' / 'mlflow.db'}"
    assert _ui_hint(other, str(tmp_path / "wd")) == f"verifirst ui --tracking-uri {other}"
    assert _ui_hint("http://mlflow:5000", ".verifirst") == "http://mlflow:5000"


@pytest.mark.parametrize("content, says", [
    (b'{"a":\n', "report.json:2: report is not JSON"),
    (b"[1, 2]", "report is a JSON list, not an object"),
    (b'{"splits": 3}', "not a verifirst report"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_report_of_a_corrupt_report_json_exits_2_naming_it(tmp_path, monkeypatch, content, says):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "report.json").write_bytes(content)
    for extra in ([], ["--json"], ["--html", "out.html"]):
        res = _invoke(tmp_path, monkeypatch, ["report", "run", *extra])
        assert res.exit_code == 2 and says in res.output, res.output
        assert not (tmp_path / "out.html").exists()


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_ui_refuses_a_sqlite_store_that_does_not_exist(tmp_path, monkeypatch, served, how):
    uri = f"sqlite:///{tmp_path / 'typo' / 'mlflow.db'}"
    argv = ["ui", "--port", str(_free_port())]
    if how == "flag":
        argv += ["--tracking-uri", uri]
    else:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    res = _invoke(tmp_path, monkeypatch, argv)
    assert res.exit_code == 2 and ("[--tracking-uri]" if how == "flag" else "[MLFLOW_TRACKING_URI]") in res.output
    assert list(tmp_path.iterdir()) == [] and "cmd" not in served
