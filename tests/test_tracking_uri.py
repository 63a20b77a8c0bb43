"""A tracking URI whose scheme no MLflow store takes is bad input: refused before anything is written
(exit 2, naming --tracking-uri, the experiment file's line, or MLFLOW_TRACKING_URI), by a dry run too;
every scheme MLflow's tracking and model-registry stores take stays accepted, checked without connecting."""
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import verifirst as vf
from verifirst.cli import app
from verifirst.core.errors import InputError
from verifirst.tracking import Tracker, _store_registries, check_uri

REPO = Path(__file__).resolve().parents[1]

# Each names a store MLflow ships (the registries' keys are checked below too); none is contacted.
ACCEPTED = ["sqlite:///tmp/verifirst-never/mlflow.db", "file:///tmp/verifirst-never/mlruns", "/tmp/mlruns", "mlruns",
            "postgresql://user@db.invalid/mlflow", "postgresql+psycopg2://user@db.invalid/mlflow",
            "mysql://user@db.invalid/mlflow", "mysql+pymysql://user@db.invalid/mlflow",
            "mssql://user@db.invalid/mlflow", "http://127.0.0.1:1", "https://mlflow.invalid",
            "databricks", "databricks://profile", "databricks-uc", "uc:databricks-uc"]


def _iac_copy(tmp_path: Path, tracking: str = "") -> Path:
    """examples/iac_tasks.toml with its workdir under tmp_path (and its paths absolute), plus `tracking`."""
    text = (REPO / "examples" / "iac_tasks.toml").read_text(encoding="utf-8")
    text = text.replace('workdir = ".verifirst"', f'workdir = "{tmp_path / "wd"}"')
    text = text.replace('"iac_tasks/', f'"{REPO}/examples/iac_tasks/')  # relative to the example's folder
    path = tmp_path / "exp.toml"
    path.write_text(text + tracking, encoding="utf-8")
    return path


def _refused(result, *expect: str) -> None:
    out = result.output
    assert result.exit_code == 2, out
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in out, out
    for text in expect:
        assert text in out, f"{text!r} not in {out!r}"


@pytest.mark.parametrize("uri", ACCEPTED)
def test_every_store_mlflow_ships_is_accepted(uri):
    check_uri(uri, "--tracking-uri")


def test_every_scheme_in_mlflows_registries_is_accepted():
    registries = _store_registries()
    assert [kind for kind, _ in registries] == ["tracking", "model registry"]
    for _, registry in registries:
        for scheme in registry._registry:
            check_uri(f"{scheme}://somewhere/x" if scheme not in ("", "databricks-uc", "uc") else scheme or "mlruns")


def test_an_unknown_scheme_is_refused_naming_the_field_and_the_schemes_mlflow_takes():
    with pytest.raises(InputError) as e:
        check_uri("bogus://x", "--tracking-uri")
    msg = str(e.value)
    assert msg.startswith("[--tracking-uri]: ") and "'bogus'" in msg
    assert all(s in msg for s in ("sqlite", "http", "postgresql", "databricks"))


@pytest.mark.parametrize("dry_run", [False, True])
def test_cli_refuses_a_bogus_tracking_uri_flag_before_writing_anything(tmp_path, dry_run):
    path = _iac_copy(tmp_path)
    r = CliRunner().invoke(app, ["run", str(path), "--tracking-uri", "bogus://x", *(["--dry-run"] if dry_run else [])])
    _refused(r, "[--tracking-uri]", "'bogus'")
    assert not (tmp_path / "wd").exists(), sorted(os.listdir(tmp_path / "wd"))


@pytest.mark.parametrize("dry_run", [False, True])
def test_cli_refuses_a_bogus_tracking_uri_in_the_file_naming_its_line(tmp_path, dry_run):
    path = _iac_copy(tmp_path, '\n[tracking]\nuri = "bogus://x"\n')
    line = path.read_text().splitlines().index('uri = "bogus://x"') + 1
    r = CliRunner().invoke(app, ["run", str(path), *(["--dry-run"] if dry_run else [])])
    _refused(r, f"{path}:{line} [tracking.uri]", "'bogus'")
    assert not (tmp_path / "wd").exists()


def test_cli_refuses_a_bogus_mlflow_tracking_uri_variable_unless_offline(tmp_path, monkeypatch):
    monkeypatch.setattr("verifirst.tracking._USER_URI", "bogus://y")  # the variable as read at start
    path = _iac_copy(tmp_path)
    _refused(CliRunner().invoke(app, ["run", str(path), "--dry-run"]), "[MLFLOW_TRACKING_URI]", "'bogus'")
    r = CliRunner().invoke(app, ["run", str(path), "--dry-run", "--offline"])  # the local store: the variable unused
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("argv", [
    ["calibrate", "--outcomes", "outcomes.jsonl"],
    ["judge", "--prompt", "judge.md", "--input", "records.jsonl"],
    ["monitor", "--prompt", "judge.md", "--outcomes", "outcomes.jsonl"],
    ["ui"],
], ids=lambda a: a[0])
def test_every_verb_with_tracking_uri_refuses_a_bogus_one(tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(os, "execvpe", lambda *a: pytest.fail("ui started a server on a bogus URI"))
    r = CliRunner().invoke(app, [*argv, "--workdir", str(tmp_path / "wd"), "--tracking-uri", "bogus://x"])
    _refused(r, "[--tracking-uri]", "'bogus'")
    assert not (tmp_path / "wd").exists()


def test_api_and_tracker_refuse_a_bogus_uri_before_any_work(tmp_path):
    path = _iac_copy(tmp_path)
    with pytest.raises(InputError, match=r"\[tracking\.uri\].*'bogus'"):
        vf.run(path, tracking_uri="bogus://x", dry_run=True)
    with pytest.raises(InputError, match=r"\[tracking\.uri\].*'bogus'"):
        vf.run(path, tracking_uri="bogus://x")
    with pytest.raises(InputError, match="'bogus'"):
        Tracker(tmp_path / "wd", uri="bogus://x")
    assert not (tmp_path / "wd").exists()
