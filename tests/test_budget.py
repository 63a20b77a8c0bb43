"""Spend limits are checked before anything runs: 0 is never "unlimited", a negative or non-numeric limit,
an unknown role or a malformed price is refused naming the field (and the file and line), exit 2, nothing
written. Engine budgets (max_metric_calls) follow the same rule in the Python API."""
import pytest
from typer.testing import CliRunner

import verifirst as vf
from verifirst.cli import app
from verifirst.core.errors import InputError

BAD = [
    ({"max_metric_calls": 0}, "budget.max_metric_calls"),
    ({"max_metric_calls": -3}, "budget.max_metric_calls"),
    ({"max_usd": 0}, "budget.max_usd"),
    ({"max_usd": -1.5}, "budget.max_usd"),
    ({"max_usd": "5"}, "budget.max_usd"),
    ({"max_usd": float("nan")}, "budget.max_usd"),
    ({"max_tokens": 1.5}, "budget.max_tokens"),
    ({"max_lm_calls": 0}, "budget.max_lm_calls"),
    ({"max_wall_s": True}, "budget.max_wall_s"),
    ({"per_role": {"reflection": {"max_usd": 0}}}, "budget.per_role.reflection.max_usd"),
    ({"per_role": {"reflection": {"max_dollars": 1}}}, "budget.per_role.reflection.max_dollars"),
    ({"prices": {"hosted_vllm/m": {"input": 0.2}}}, "budget.prices.hosted_vllm/m"),
]


@pytest.mark.parametrize("kw,field", BAD, ids=[f for _, f in BAD])
def test_api_budget_refuses_a_limit_that_is_no_limit(kw, field):
    with pytest.raises(InputError) as e:
        vf.Budget(**kw)
    assert e.value.field == field


def test_a_budget_with_limits_is_spend_limited():
    assert not vf.Budget(max_metric_calls=8).spend_limited
    assert vf.Budget(max_usd=2.5).spend_limited and vf.Budget(per_role={"task": {"max_lm_calls": 3}}).spend_limited


def _toml(tmp_path, budget: str):
    path = tmp_path / "exp.toml"
    path.write_text(f'[experiment]\nname = "b"\nworkdir = "{tmp_path / "wd"}"\n[suite]\nname = "bash-builtin"\n'
                    f'[program]\nname = "bash-generator"\n[verifier]\nname = "exact"\n[budget]\n{budget}\n')
    return path


@pytest.mark.parametrize("budget,where", [
    ("max_usd = 0", ":11 [budget.max_usd]"),
    ("max_tokens = -5", ":11 [budget.max_tokens]"),
    ("max_lm_calls = 2.5", ":11 [budget.max_lm_calls]"),
    ('max_wall_s = "an hour"', ":11 [budget.max_wall_s]"),
    ("[budget.per_role.reflecton]\nmax_usd = 1", ":11 [budget.per_role.reflecton]"),
    ("[budget.per_role.task]\nmax_usd = -1", ":12 [budget.per_role.task.max_usd]"),
])
def test_experiment_file_budget_errors_name_file_line_and_field(tmp_path, budget, where):
    path = _toml(tmp_path, budget)
    r = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(tmp_path / "run")])
    assert r.exit_code == 2, r.output
    assert f"{path}{where}" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "run").exists() and not (tmp_path / "wd").exists()  # nothing written


@pytest.mark.parametrize("flag", [["--max-usd", "0"], ["--max-usd", "-2"], ["--max-lm-calls", "0"]])
def test_cli_limit_flags_refuse_zero_and_negative(tmp_path, flag):
    path = _toml(tmp_path, "")
    r = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(tmp_path / "run"), *flag])
    assert r.exit_code == 2 and f"[{flag[0]}]" in r.output and "0 is not unlimited" in r.output, r.output
    assert not (tmp_path / "run").exists()
