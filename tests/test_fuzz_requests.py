"""Property-based fuzzing (Hypothesis) of the typed requests' surfaces: experiment files through
`verifirst run --dry-run`, the flags of `run`, `report`, `ui` and `verify bash`, `vf.optimize`'s
keywords, `verifirst bench`'s shared counts. A generated input ends in a result or a clean error
(exit 2 naming a flag, a key or file:line; an InputError from the API): never a traceback, and
nothing written for a refused input.

Profiles as in test_fuzz_inputs.py: `ci` (the default, in `make test`: derandomized, the examples
per surface below) and `long` (VERIFIRST_FUZZ=long, `make fuzz`: 25x that, new inputs each run).
Inputs that once failed are pinned with @example.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

LONG = os.environ.get("VERIFIRST_FUZZ") == "long"
_COMMON = dict(deadline=None, database=None, derandomize=not LONG,
               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def budget(ci: int) -> settings:
    """Examples for one surface: `ci` in make test, 25 times as many under make fuzz."""
    return settings(max_examples=ci * 25 if LONG else ci, **_COMMON)


TRICKY = st.sampled_from(["\ufeff", "\u2028", "\x00", "\n", "\r", '"', "'", "[", "]", "{", "}", "\\", "=", "#",
                          "/", "~", "..", " ", "$(", "`", ";", "|", "&", ">", "*"])
TEXT = st.lists(st.one_of(TRICKY, st.text(max_size=8)), max_size=12).map("".join)
NUMBER_TEXT = st.one_of(st.sampled_from(["nan", "inf", "-inf", "NaN", "Infinity", "1e9", "1e400", "-1", "0",
                                         "0.5", "2", "1e-9", "+3", "3.", "0x10", "", " ", "1_000"]),
                        st.integers(-10**12, 10**12).map(str), st.floats().map(repr))

DATA = "".join(json.dumps({"id": f"r{k}", "label": "PASS" if k % 2 else "FAIL", "title": f"change {k}"}) + "\n"
               for k in range(6))


def tree(root: Path) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), root) for d, ds, fs in os.walk(root) for n in ds + fs}


def _no_traceback(res) -> None:
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"a traceback instead of a message: {res.exception!r}\n{res.output}") \
            from res.exception


@pytest.fixture
def no_runs(monkeypatch):
    """The run loop is never reached from a fuzzed input (a dry run or a refusal ends first)."""
    import verifirst.loop.driver

    def reached(*a, **k):
        raise AssertionError("a fuzzed input reached the run loop")

    monkeypatch.setattr(verifirst.loop.driver, "run", reached)


# -- experiment files, through `verifirst run --dry-run` ---------------------------------------------

KEYS = {
    "experiment": ["name", "workdir", "seed", "threads", "max_error_rate", "executor", "description"],
    "suite": ["limit", "path", "options"],
    "program": ["options"],
    "splits": ["ratios", "by", "time_field", "windows", "no_val", "no_test", "manifest", "stratify"],
    "optimizer": ["name", "max_metric_calls", "auto", "max_iters", "options"],
    "models": ["task", "reflection", "temperature"],
    "budget": ["max_usd", "max_tokens", "max_lm_calls", "max_wall_s"],
    "objective": ["kind", "margin"],
    "tracking": ["experiment", "enabled", "register_prompt", "uri"],
}
TOML_VALUE = st.one_of(
    st.integers(-10**6, 10**12).map(str), st.floats().map(lambda f: "nan" if math.isnan(f) else repr(f)),
    st.text(max_size=12).map(json.dumps), TEXT.map(json.dumps), st.booleans().map(lambda b: str(b).lower()),
    st.lists(st.floats(0, 1).map(repr), max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
    st.sampled_from(['"none"', '"gepa"', '"simba"', '"light"', '"~/x"', '"/"', '"."', '".."', '"data.jsonl"',
                     '"team/exp"', '"a:b"', '"openai/gpt-4o-mini"', '"local"', '"time"', '"7d"', '"cheapest-not-worse"',
                     '{ candidate_selection_strategy = "best" }', '{ max_full_evals = 2 }', '{ bogus = 1 }',
                     '{ view = "title" }', '{ view = "nope" }', '{ use_merge = "yes" }', "inf", "-inf", "1e9",
                     '"' + "x" * 300 + '"']),
)
SECTION_BODY = st.sampled_from(sorted(KEYS)).flatmap(
    lambda sec: st.lists(st.tuples(st.sampled_from(KEYS[sec]), TOML_VALUE), max_size=3,
                         unique_by=lambda kv: kv[0]).map(lambda kvs: (sec, dict(kvs))))
BASE = {"experiment": {"name": '"fz"', "workdir": '"wd"'}, "suite": {"name": '"outcomes"', "path": '"data.jsonl"'},
        "program": {"name": '"passfail-judge"', "options": '{ view = "title" }'}, "verifier": {"name": '"label"'},
        "optimizer": {"name": '"none"'}, "models": {"task": '"openai/gpt-4o-mini"'}, "tracking": {"enabled": "false"}}


def _toml(changes) -> str:
    secs = {k: dict(v) for k, v in BASE.items()}
    for sec, body in changes:
        secs.setdefault(sec, {}).update(body)
    return "".join(f"[{s}]\n" + "".join(f"{k} = {v}\n" for k, v in b.items()) for s, b in secs.items())


@budget(12)
@given(changes=st.lists(SECTION_BODY, max_size=3))
@example(changes=[("optimizer", {"name": '"gepa"', "options": '{ candidate_selection_strategy = "best" }'})])
@example(changes=[("experiment", {"name": '"' + "x" * 300 + '"'})])
@example(changes=[("experiment", {"workdir": '"/"'})])
@example(changes=[("tracking", {"enabled": "true", "experiment": '""'})])
def test_experiment_files_through_run_dry_run(no_runs, changes):
    from verifirst.cli import app

    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        (folder / "data.jsonl").write_text(DATA)
        (folder / "e.toml").write_text(_toml(changes))
        before = tree(folder)
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            res = CliRunner().invoke(app, ["run", "e.toml", "--dry-run", "--offline"])
        finally:
            os.chdir(cwd)
        _no_traceback(res)
        assert res.exit_code in (0, 2), res.output
        if res.exit_code == 2:
            assert "e.toml" in res.output or "[" in res.output, res.output  # names the file or a flag/key
        assert tree(folder) == before, f"a dry run or a refusal wrote files: {tree(folder) - before}"


# -- flags of the verbs --------------------------------------------------------------------------------

RUN_FLAG = st.sampled_from(["--max-usd", "--max-tokens", "--max-lm-calls", "--max-wall-s", "--margin",
                            "--objective", "--run-dir", "--tracking-uri"])


@budget(12)
@given(flags=st.lists(st.tuples(RUN_FLAG, st.one_of(NUMBER_TEXT, TEXT)), max_size=3))
@example(flags=[("--max-usd", "inf")])
@example(flags=[("--max-usd", "nan")])
@example(flags=[("--run-dir", "/")])
@example(flags=[("--max-lm-calls", "-1")])
def test_run_flags(no_runs, flags):
    from verifirst.cli import app

    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        (folder / "data.jsonl").write_text(DATA)
        (folder / "e.toml").write_text(_toml([]))
        before = tree(folder)
        argv = ["run", "e.toml", "--dry-run", "--offline"] + [x for f, v in flags for x in (f, v)]
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            res = CliRunner().invoke(app, argv)
        finally:
            os.chdir(cwd)
        _no_traceback(res)
        assert res.exit_code in (0, 2), res.output
        assert tree(folder) == before, tree(folder) - before
        for flag, value in flags:  # nan and inf are refused alike, for every number flag
            if flag.startswith("--max") and value.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
                assert res.exit_code == 2, (flag, value, res.output)


@budget(15)
@given(run=st.one_of(st.sampled_from(["latest", "", ".", "/", "no-such-run", "~"]), TEXT),
       workdir=st.one_of(st.sampled_from(["wd", "missing", "", "/", "~", "wd/../wd"]), TEXT),
       as_json=st.booleans())
@example(run="latest", workdir="missing", as_json=False)
@example(run="0123456789abcdef", workdir="typo", as_json=False)
@example(run="~", workdir="wd", as_json=False)  # found by the ci profile: ~ was a folder to the check, a run id to the reader
@example(run="~0", workdir="wd", as_json=False)  # found by the long profile: ~user of no user was a RuntimeError
def test_report_flags(run, workdir, as_json):
    from verifirst.cli import app

    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        (folder / "wd" / "runs").mkdir(parents=True)
        before = tree(folder)
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            res = CliRunner().invoke(app, ["report", run, "--workdir", workdir] + (["--json"] if as_json else []))
        finally:
            os.chdir(cwd)
        _no_traceback(res)
        assert res.exit_code == 2, res.output  # nothing here is a finished run
        assert tree(folder) == before, f"report created {tree(folder) - before}"


REPORT_VALUE = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)),
                            lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                    st.dictionaries(st.sampled_from(
                                                        ["splits", "before", "after", "pass", "scored", "engine",
                                                         "experiment", "usage", "models", "instructions", "test",
                                                         "train", "val", "pass_rate", "errors", "comparison"]),
                                                        inner, max_size=4)), max_leaves=12)


@budget(15)
@given(content=st.one_of(REPORT_VALUE.map(lambda v: json.dumps(v, allow_nan=True)), TEXT,
                         st.binary(max_size=32).map(lambda b: b.decode("latin-1"))),
       as_json=st.booleans())
@example(content='{"a":', as_json=False)
@example(content='{"splits": 3}', as_json=False)
def test_report_files(content, as_json):
    from verifirst.cli import app

    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        (folder / "run").mkdir()
        (folder / "run" / "report.json").write_bytes(content.encode("utf-8", "surrogatepass"))
        before = tree(folder)
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            res = CliRunner().invoke(app, ["report", "run"] + (["--json"] if as_json else []))
        finally:
            os.chdir(cwd)
        _no_traceback(res)
        assert res.exit_code in (0, 2), res.output
        assert tree(folder) == before


VERIFY_CMD = st.sampled_from(["ls /testbed | wc -l", "echo hi", "true", "", " ", "exit 3", "cat /nonexistent",
                              "echo $((1/0))", "printf '\\x00'", "sleep 0", ":(){ :|:& };:", "echo ${"])


@budget(8)
@given(gold=st.one_of(st.none(), VERIFY_CMD, TEXT), pred=st.one_of(VERIFY_CMD, TEXT),
       timeout=st.one_of(st.none(), NUMBER_TEXT),
       fixture=st.one_of(st.none(), st.sampled_from(["empty", "nl2sh-fs1", "nope", ""])),
       llm=st.one_of(st.none(), st.sampled_from(["off", "bogus", ""])))
@example(gold="ls", pred="", timeout=None, fixture=None, llm=None)
@example(gold="ls", pred="ls", timeout="nan", fixture=None, llm=None)
@example(gold="ls", pred="ls", timeout="1e9", fixture=None, llm=None)
@example(gold="ls", pred="a\x00b", timeout=None, fixture="empty", llm=None)
def test_verify_bash_flags(gold, pred, timeout, fixture, llm):
    from verifirst.cli import app

    argv = ["verify", "bash", "--pred", pred, "--json"]
    for flag, value in (("--gold", gold), ("--timeout", timeout), ("--fixture", fixture), ("--llm", llm)):
        if value is not None:
            argv += [flag, value]
    with tempfile.TemporaryDirectory() as d:
        cwd = os.getcwd()
        os.chdir(d)
        try:
            res = CliRunner().invoke(app, argv)
        finally:
            os.chdir(cwd)
        _no_traceback(res)
        assert res.exit_code in (0, 1, 2, 3), res.output
        assert tree(Path(d)) == set(), "verify bash writes nothing where it runs"
        if pred.strip() == "" or "\x00" in pred:
            assert res.exit_code == 2, res.output


@budget(25)
@given(name=st.one_of(st.sampled_from(["", " ", "judge-validation", "nope"]), TEXT),
       args=st.lists(st.one_of(st.sampled_from(["--limit", "--threads", "--seed", "--json", "--alpha"]), NUMBER_TEXT,
                               TEXT), max_size=4))
@example(name="judge-validation", args=["--limit", "-1"])
@example(name="judge-validation", args=["--alpha", "nan"])
def test_bench_request(name, args):
    from verifirst.core.request import RequestRefused
    from verifirst.requests.verbs import BenchRequest

    try:
        req = BenchRequest.build({"name": name, "args": tuple(args)})
    except RequestRefused as e:
        assert e.exit_code == 2 and str(e).startswith("[")
        return
    for i, a in enumerate(req.args[:-1]):
        if a == "--limit":
            assert int(req.args[i + 1]) > 0


# -- vf.optimize's keywords ------------------------------------------------------------------------------

SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(), st.text(max_size=10),
                   st.sampled_from(["/", "~", "", "gepa", "none", "train", "nan"]))
ANY_VALUE = st.recursive(SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                         max_leaves=6)
KEYWORD = st.sampled_from(["optimizer", "splits", "models", "budget", "run_dir", "inputs", "output_field",
                           "threshold", "optimizer_options", "seed", "threads", "workdir", "name", "max_error_rate",
                           "progress", "eval_splits", "compile_kwargs", "no_val", "no_test", "callbacks", "cache",
                           "config", "objective", "margin", "stratify", "adapter", "executor", "echo"])


@budget(20)
@given(kwargs=st.dictionaries(KEYWORD, ANY_VALUE, max_size=3))
@example(kwargs={"optimizer": "gepa", "optimizer_options": {"candidate_selection_strategy": "best"}})
@example(kwargs={"name": "a/b"})
@example(kwargs={"max_error_rate": float("inf")})
@example(kwargs={"workdir": "~"})
def test_optimize_keywords(no_runs, kwargs):
    import dspy

    import verifirst as vf
    from verifirst.core.errors import InputError
    from verifirst.lm.testing import json_answer, scripted_lm

    data = [{"id": f"q{k}", "question": f"q{k}", "answer": "a"} for k in range(8)]
    lm = scripted_lm(lambda m: json_answer(answer="a"))
    with tempfile.TemporaryDirectory() as d:
        cwd = os.getcwd()
        os.chdir(d)
        try:
            kw = {"models": {"task": lm, "reflection": lm}, "workdir": Path(d) / "w", **kwargs}
            vf.optimize(dspy.Predict("question -> answer"), data,
                        lambda ex, pred, trace=None: pred.answer == ex.answer, kw.pop("optimizer", None),
                        dry_run=True, **kw)
        except InputError as e:
            assert str(e)
        finally:
            os.chdir(cwd)
        assert tree(Path(d)) == set(), "a dry run or a refusal wrote files"
