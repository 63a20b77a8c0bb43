"""The request base (verifirst.core.request): one error format, exit 2, nan/inf refused, paths."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

from verifirst.core.errors import InputError
from verifirst.core.request import (NonEmptyStr, NonNegativeInt, PositiveFloat, Request, RequestRefused, RunDir,
                                    UserPath, refusal)

NAMES = {"pred": "--pred", "timeout_s": "--timeout", "run_dir": "--run-dir", "limit": "--limit"}


class _R(Request):
    pred: NonEmptyStr
    timeout_s: PositiveFloat = 10.0
    run_dir: Optional[RunDir] = None
    limit: Optional[NonNegativeInt] = None
    data: Optional[UserPath] = None


def _refused(values, **kw) -> RequestRefused:
    with pytest.raises(RequestRefused) as e:
        _R.build(values, names=NAMES, **kw)
    assert isinstance(e.value, InputError) and e.value.exit_code == 2
    return e.value


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), "nan", "inf", "Infinity", "-inf"])
def test_nan_and_inf_refused_alike(bad):
    e = _refused({"pred": "ls", "timeout_s": bad})
    assert str(e).startswith("[--timeout]: got ") and "finite number (not nan or inf)" in str(e)


def test_format_names_flag_given_and_expected():
    e = _refused({"pred": "ls", "limit": -1, "data": Path("a b")})
    assert str(e) == "[--limit]: got -1 (expected: a number greater than or equal to 0)"
    assert e.field == "--limit"
    e = _refused({"pred": "ls", "run_dir": Path("/")})
    assert str(e).startswith("[--run-dir]: got '/' (expected: ")  # a path shown as typed


def test_every_problem_reported_at_once():
    e = _refused({"pred": "", "limit": -1, "bogus": 1})
    text = str(e)
    assert "[--pred]: got ''" in text and "[--limit]: got -1" in text and "[bogus]: got 1" in text
    assert "one of --limit, --pred, --run-dir, --timeout" in text
    assert len(e.problems) == 3


def test_missing_field_and_long_values_stay_one_line():
    e = _refused({})
    assert str(e) == "[--pred]: got nothing (expected: a value (it is required))"
    e = _refused({"pred": "ls", "timeout_s": "x\n" * 1000})
    assert "\n" not in str(e) and len(str(e)) < 200


def test_file_line_form():
    with pytest.raises(RequestRefused) as e:
        _R.build({"pred": "x", "timeout_s": 0}, path="exp.toml", lines={"timeout_s": 7},
                 names={"timeout_s": "verify.timeout_s"})
    assert str(e.value) == "exp.toml:7 [verify.timeout_s]: got 0 (expected: a number greater than 0)"
    assert (e.value.path, e.value.line) == ("exp.toml", 7)


@pytest.mark.parametrize("bad", ["/", "/usr", "/etc", "~", "/proc"])
def test_run_dir_refuses_root_home_and_system_folders(bad):
    e = _refused({"pred": "x", "run_dir": bad})
    assert "[--run-dir]" in str(e)


def test_paths_expand_home_and_resolve_against_base(tmp_path):
    r = _R.build({"pred": "x", "data": "~/d.jsonl", "run_dir": "runs"}, base=tmp_path)
    assert r.data == Path.home() / "d.jsonl"
    assert r.run_dir == tmp_path / "runs"
    assert _R.build({"pred": "x", "data": "d"}).data == Path("d")  # no base: the working directory


def test_nul_byte_refused():
    assert "NUL" in str(_refused({"pred": "x", "data": "a\x00b"}))
    assert "NUL" in str(_refused({"pred": "a\x00"}))


def test_frozen():
    r = _R.build({"pred": "x"})
    with pytest.raises(Exception):
        r.pred = "y"


def test_refusal_from_a_bare_validation_error():
    from pydantic import ValidationError

    try:
        _R.model_validate({"pred": "x", "limit": "many"})
    except ValidationError as err:
        e = refusal(err, names=NAMES)
    assert str(e).startswith("[--limit]: got 'many' (expected: a valid integer")


def test_a_tilde_user_this_machine_does_not_know_stays_as_written():
    from verifirst.core.request import expand_user

    assert expand_user("~no-such-user-0/x") == Path("~no-such-user-0/x")  # as a shell leaves it; no RuntimeError
    assert _R.build({"pred": "x", "data": "~0"}).data == Path("~0")


def test_an_experiment_workdir_of_an_unknown_user_is_no_traceback(tmp_path):
    from verifirst import config

    p = tmp_path / "e.toml"
    p.write_text('[experiment]\nworkdir = "~no-such-user-0/w"\n[suite]\nname = "bash-builtin"\n'
                 '[program]\nname = "bash-generator"\n[verifier]\nname = "exact"\n')
    assert config.load(p).experiment["workdir"] == "~no-such-user-0/w"
