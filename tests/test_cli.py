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
