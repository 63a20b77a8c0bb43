"""Help that teaches: every verb and verb group shows an example of itself, `verify terraform` gives its
exit codes, and --run-dir's errors speak of a run directory, not of the workdir."""
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from verifirst.cli import app

REPO = Path(__file__).resolve().parents[1]


def _commands() -> list[tuple[str, object]]:
    """(path, command) for every verb and verb group below the root."""
    root = typer.main.get_command(app)
    out = []

    def walk(cmd, ctx, path):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            sub_path = f"{path} {name}"
            out.append((sub_path, sub))
            if hasattr(sub, "list_commands"):
                walk(sub, sub.context_class(sub, info_name=name, parent=ctx), sub_path)

    walk(root, root.context_class(root, info_name="verifirst"), "verifirst")
    return out


COMMANDS = _commands()


@pytest.mark.parametrize("path,cmd", COMMANDS, ids=[p for p, _ in COMMANDS])
def test_every_verb_and_group_has_an_example_of_itself(path, cmd):
    text = cmd.help or ""
    assert "Example" in text and path in text, f"{path} --help shows no example of `{path} ...`"
    shown = CliRunner().invoke(app, [*path.split()[1:], "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and "Example" in shown.output, shown.output


def test_verify_terraform_help_gives_its_exit_codes():
    r = CliRunner().invoke(app, ["verify", "terraform", "--help"], env={"COLUMNS": "200"})
    flat = " ".join(r.output.split())
    assert "Exit 0" in flat and "1 a gate fails" in flat and "2 bad input" in flat, r.output


@pytest.mark.parametrize("verb", ["run", "optimize"])
def test_a_file_as_run_dir_is_refused_in_the_run_directorys_words(tmp_path, verb):
    exp = tmp_path / "exp.toml"
    exp.write_text(f'[experiment]\nname = "r"\nworkdir = "{tmp_path / "wd"}"\n[suite]\nname = "bash-builtin"\n'
                   '[program]\nname = "bash-generator"\n[verifier]\nname = "exact"\n[optimizer]\nname = "none"\n')
    r = CliRunner().invoke(app, [verb, str(exp), "--run-dir", str(exp)])
    assert r.exit_code == 2, r.output
    flat = " ".join(r.output.split())
    assert "[--run-dir]" in flat and "is not a directory" in flat and "one run's state and report" in flat
    assert "cache, runs and the MLflow store" not in flat  # the workdir's wording
    assert not (tmp_path / "wd").exists()


def test_a_file_as_run_dir_is_refused_in_the_run_directory_words_in_python_too(tmp_path):
    from verifirst.config import RUN_DIR_EXPECTED, check_workdir
    from verifirst.core.errors import ConfigError

    afile = tmp_path / "afile"
    afile.write_text("")
    with pytest.raises(ConfigError) as e:
        check_workdir(afile, "run_dir", expected=RUN_DIR_EXPECTED)
    assert e.value.field == "run_dir" and "one run's state and report" in str(e.value)
    with pytest.raises(ConfigError, match="cache, runs and the MLflow store"):
        check_workdir(afile, "workdir")
