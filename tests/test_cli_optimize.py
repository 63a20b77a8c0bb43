"""`verifirst optimize` is `run` under a second name: the same options with the same help, --dry-run,
the spend limits and --yes included."""
import typer
from typer.testing import CliRunner

from verifirst.cli import app
from verifirst.lm import AccountedLM, Models
from verifirst.lm.testing import ScriptedEngine, json_answer


def _command(name: str):
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="verifirst")
    return root.get_command(ctx, name), ctx


def _params(name: str) -> list[tuple]:
    cmd, ctx = _command(name)
    return [(p.name, tuple(p.opts), getattr(p, "help", None), p.default, p.required) for p in cmd.get_params(ctx)]


def test_optimize_takes_exactly_runs_options_with_the_same_help():
    assert _params("optimize") == _params("run")
    flags = {o for _, opts, _, _, _ in _params("optimize") for o in opts}
    assert {"--dry-run", "--max-usd", "--max-tokens", "--max-lm-calls", "--max-wall-s", "--yes",
            "--tracking-uri", "--offline", "--json", "--run-dir"} <= flags


def test_every_optimize_option_has_help():
    missing = [opts for _, opts, help_, _, _ in _params("optimize") if opts and opts[0].startswith("--") and not help_]
    assert missing == []


def _toml(tmp_path):
    path = tmp_path / "exp.toml"
    path.write_text(f'[experiment]\nname = "o"\nworkdir = "{tmp_path / "wd"}"\n[suite]\nname = "bash-builtin"\n'
                    'limit = 8\n[program]\nname = "bash-generator"\n[verifier]\nname = "exact"\n'
                    '[optimizer]\nname = "none"\n[tracking]\nenabled = false\n'
                    '[budget.prices]\n"local/cli-opt" = { input = 1.0, output = 2.0 }\n')
    return path


def test_optimize_dry_run_prints_the_estimate_calls_no_model_and_writes_nothing(tmp_path, monkeypatch):
    engine = ScriptedEngine(lambda m: json_answer(command="echo hi"))
    monkeypatch.setattr("verifirst.lm.make_models", lambda *a, **k: Models(
        task=AccountedLM("local/cli-opt", spec="cli-opt", engine=engine, num_retries=0)))
    r = CliRunner().invoke(app, ["optimize", str(_toml(tmp_path)), "--run-dir", str(tmp_path / "run"), "--dry-run",
                                 "--max-usd", "5"])
    assert r.exit_code == 0, r.output
    assert "dry run: spend estimate" in r.output and "total" in r.output
    assert engine.calls == 0 and not (tmp_path / "run").exists() and not (tmp_path / "wd").exists()


def test_optimize_refuses_a_zero_limit_naming_the_flag(tmp_path):
    r = CliRunner().invoke(app, ["optimize", str(_toml(tmp_path)), "--max-lm-calls", "0"])
    assert r.exit_code == 2 and "[--max-lm-calls]" in r.output, r.output
    assert not (tmp_path / "wd").exists()
