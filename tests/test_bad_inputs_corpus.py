"""The bad-input corpus (tests/data/bad_inputs/cases.json): every case is refused with exit 2, a
message naming the field or file:line, no traceback, and nothing written. The CLI runs in-process
(typer's CliRunner) in a copy of the corpus folder; the Python API cases follow."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import dspy
import pytest
from typer.testing import CliRunner

import verifirst as vf
from verifirst.cli import app
from verifirst.core.errors import ConfigError, InputError, RunFailed
from verifirst.loop.splits import SplitManifest
from verifirst.lm.testing import json_answer, scripted_lm

CORPUS = Path(__file__).parent / "data" / "bad_inputs"
CASES = json.loads((CORPUS / "cases.json").read_text())


def tree(root: Path) -> set[str]:
    """Every file and directory under root (links not followed), relative."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            out.add(os.path.relpath(os.path.join(dirpath, name), root))
    return out


def _make(root: Path, name: str, what: str) -> None:
    p = root / name
    if what == "dir":
        p.mkdir()
    elif what == "readonly-dir":
        p.mkdir()
        p.chmod(0o555)
    elif what.startswith("symlink:"):
        p.symlink_to(what.split(":", 1)[1])
    else:
        raise ValueError(f"unknown make {what!r}")


def test_the_corpus_is_large_and_every_case_names_what_it_expects():
    assert len(CASES) >= 50
    assert len({c["id"] for c in CASES}) == len(CASES)
    assert all(c["expect"] and c["argv"] for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_bad_input_is_refused_with_exit_2_a_named_place_and_nothing_written(case, tmp_path, monkeypatch):
    if case.get("skip_as_root") and os.geteuid() == 0:
        pytest.skip(case["skip_as_root"])
    if case.get("needs") == "terraform" and not shutil.which("terraform"):
        from verifirst.verifiers.terraform.terraform_cli import find_terraform

        if not find_terraform():
            pytest.skip("no terraform binary")
    work = tmp_path / "corpus"
    shutil.copytree(CORPUS, work, symlinks=True)
    for name, what in (case.get("make") or {}).items():
        _make(work, name, what)
    monkeypatch.chdir(work)

    def reached(*a, **k):  # a case that is not refused must fail here, not run a model for minutes
        raise AssertionError(f"case {case['id']} was not refused: the run reached the driver")

    import verifirst.loop.driver

    monkeypatch.setattr(verifirst.loop.driver, "run", reached)  # the one run loop: run and calibrate alike
    before = tree(work)
    res = CliRunner().invoke(app, case["argv"])
    out = res.output
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"a traceback instead of a message: {res.exception!r}\n{out}") from res.exception
    try:
        assert res.exit_code == 2, out
        assert "Traceback" not in out, out
        for text in case["expect"]:
            assert text in out, f"{text!r} not in {out!r}"
        assert tree(work) == before, f"bad input wrote {sorted(tree(work) - before)}"
    finally:
        for p in work.rglob("*"):  # let pytest remove a read-only directory
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)


# -- the Python API ------------------------------------------------------------------------------
class QA(dspy.Signature):
    """Answer."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


RECORDS = [{"id": f"q{i}", "question": f"what is {i}?", "answer": str(i)} for i in range(12)]


def exact(example, pred, trace=None):
    return float(example.answer == pred.answer)


def _optimize(tmp_path, **kw):
    args = dict(program=dspy.Predict(QA), data=RECORDS, metric=exact, optimizer="none", workdir=tmp_path / "wd",
                models={"task": scripted_lm(lambda m: json_answer(answer="1"), name="corpus-task")},
                splits=(0.5, 0.25, 0.25))
    args.update(kw)
    return vf.optimize(**args)


@pytest.mark.parametrize("kw,exc,expect", [
    ({"metric": lambda pred: 1.0}, ConfigError, ["[metric]", "takes 1 positional argument", "(example, pred)"]),
    ({"metric": lambda example, pred, *, strict: 1.0}, ConfigError, ["[metric]", "strict"]),
    ({"models": {"task": {"model": "local", "temprature": 0.5}}}, ConfigError,
     ["[models.task.temprature]", "did you mean 'temperature'"]),
    ({"models": {"task": {"model": "local", "max_tokens": -1}}}, ConfigError, ["[models.task.max_tokens]"]),
    ({"models": {"tsk": "local"}}, InputError, ["[models]", "unknown role 'tsk'"]),
    ({"splits": (0.5, 0.5, 0.0)}, ConfigError, ["[splits]", "test split empty", "no_test=True"]),
    ({"splits": (1.0, 0.0, 0.0)}, ConfigError, ["[splits]", "validation split empty", "no_val=True"]),
    ({"splits": (True, False, False)}, ConfigError, ["[splits]", "not all numbers"]),
    ({"splits": (0.5, 0.5)}, ConfigError, ["[splits]", "not three numbers"]),
    ({"threads": 0}, InputError, ["[threads]: got 0", "a whole number in [1, 256]"]),
    ({"threads": 100000}, InputError, ["[threads]: got 100000", "a whole number in [1, 256]"]),
    ({"max_error_rate": 2.0}, InputError, ["[max_error_rate]: got 2.0", "a number in [0, 1]"]),
    ({"workdir": "/etc/passwd"}, ConfigError, ["[workdir]", "is not a directory"]),
    ({"optimizer": "gepa", "splits": SplitManifest([], ["q0", "q1"], ["q2"], 0, (0.0, 0.67, 0.33))},
     ConfigError, ["[splits]", "optimizer 'gepa' needs items in the training split"]),
])
def test_api_refuses_bad_arguments_before_any_work(tmp_path, kw, exc, expect):
    with pytest.raises(exc) as e:
        _optimize(tmp_path, **kw)
    for text in expect:
        assert text in str(e.value), str(e.value)
    assert not (tmp_path / "wd").exists()


def test_api_runs_without_a_test_split_when_asked_and_scores_no_test(tmp_path):
    res = _optimize(tmp_path, splits=(0.5, 0.5, 0.0), no_test=True, run_dir=tmp_path / "run")
    assert set(res.report["splits"]) == {"train", "val"}
    assert res.manifest.test == []


@pytest.mark.parametrize("value,why", [("0.5", "str"), ({"score": 1.0}, "dict"), (float("nan"), "not a finite score")])
def test_a_metric_returning_a_non_score_gives_error_rows_not_verdicts(tmp_path, value, why):
    with pytest.raises(RunFailed, match="none of its 3 items got a verdict"):  # no verdict, no result
        _optimize(tmp_path, metric=lambda example, pred: value, eval_splits=("val",), run_dir=tmp_path / "run")
    rows = [json.loads(line) for f in (tmp_path / "run" / "eval").glob("*.jsonl")
            for line in f.read_text().splitlines() if line.strip()]
    assert len(rows) == 3 and all(r["status"] == "ERROR" for r in rows), rows
    assert all(why in r["error"] and "not a" in r["error"] for r in rows), rows[0]


@pytest.mark.parametrize("value", [7, 1.5, -0.5])
def test_a_metric_on_another_scale_gives_error_rows_naming_the_scale(tmp_path, value):
    """Marks out of 10 were read as PASS wherever they reached 1 (the default threshold), in silence."""
    with pytest.raises(RunFailed, match=r"none of its 3 items got a verdict.*outside \[0, 1\].*score / 10"):
        _optimize(tmp_path, metric=lambda example, pred: value, eval_splits=("val",), run_dir=tmp_path / "run")
    rows = [json.loads(line) for f in (tmp_path / "run" / "eval").glob("*.jsonl")
            for line in f.read_text().splitlines() if line.strip()]
    assert len(rows) == 3 and all(r["status"] == "ERROR" and "outside [0, 1]" in r["error"] for r in rows), rows[0]


def test_calibrate_api_refuses_an_unknown_judge_and_empty_splits(tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text((CORPUS / "outcomes.jsonl").read_text())
    models = {"judge": scripted_lm(lambda m: json_answer(reasoning="r", verdict="PASS"), name="corpus-judge")}
    with pytest.raises(InputError, match=r"\[kind\]: unknown judge kind 'nosuch'"):
        vf.calibrate(out, "Is this change safe? PASS or FAIL.", kind="nosuch", workdir=tmp_path / "wd",
                     models=models)
    with pytest.raises(ConfigError, match="test split empty"):
        vf.calibrate(out, splits=(0.5, 0.5, 0.0), workdir=tmp_path / "wd", models=models)
    with pytest.raises(InputError, match=r"\[max_iters\]: got -1"):
        vf.calibrate(out, max_iters=-1, workdir=tmp_path / "wd", models=models)
    assert not (tmp_path / "wd").exists()
