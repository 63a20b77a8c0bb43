"""The parameter walk (issue 34): the value of `verifirst calibrate --threads N` goes from the flag into
`CalibrateRequest.threads` once; the calibration makes the judge's one Pool of it (verifirst.judge.pool, as
AutoRefine does from the loop's budget), and every judge and teacher pass takes that pool, not a count
re-passed through each layer; the kernel's loop gets it as `vf.optimize(threads=...)` for its evaluations.
The walk is observed, not read from the source: the run is traced and every function that receives the
value under either name (threads, num_threads) is recorded by module. A new hop fails here; the issue's
target: at most 8 modules."""
from __future__ import annotations

import sys
import threading

from typer.testing import CliRunner

from test_autorefine import RuleFollowingLM
from test_calibrate import write_outcomes

SENTINEL = 7  # a thread count no default has
# The judge domain's part, exactly: the flag, and the pool that turns the count into concurrency.
JUDGE_WALK = ["verifirst.judge.cli", "verifirst.judge.pool"]
# The kernel's part (vf.optimize's own walk to its evaluation pool, another helper's): these at most.
KERNEL_WALK = ["verifirst.api", "verifirst.requests", "verifirst.core.engine", "verifirst.loop.driver",
               "verifirst.loop.run_state", "verifirst.loop.evaluation"]
MAX_MODULES = 8


def _walk(tmp_path, monkeypatch) -> dict[str, set]:
    """{module: {function(name)}} of every verifirst function that received the --threads value."""
    import verifirst.judge.calibrate as cal
    from verifirst.cli import app

    lm = RuleFollowingLM()
    monkeypatch.setattr(cal, "make_lm", lambda *a, **k: lm)
    src = tmp_path / "outcomes.jsonl"
    write_outcomes(src)
    seen: dict[str, set] = {}

    def tracer(frame, event, arg):
        if event == "call":
            mod = frame.f_globals.get("__name__", "")
            if mod.startswith("verifirst"):
                for name in ("threads", "num_threads"):
                    value = frame.f_locals.get(name)
                    if value == SENTINEL and type(value) is int:
                        seen.setdefault(mod, set()).add(f"{frame.f_code.co_name}({name})")
        return None

    sys.settrace(tracer)
    threading.settrace(tracer)
    try:
        r = CliRunner().invoke(app, ["calibrate", "--outcomes", str(src), "--threads", str(SENTINEL), "--workdir",
                                     str(tmp_path / "wd"), "--max-iters", "1", "--offline", "--json"])
    finally:
        sys.settrace(None)
        threading.settrace(None)
    assert r.exit_code == 0, r.output
    return seen


def test_calibrate_threads_reaches_its_pools_through_at_most_8_listed_modules(tmp_path, monkeypatch):
    seen = _walk(tmp_path, monkeypatch)
    judge = sorted(m for m in seen if m.startswith("verifirst.judge"))
    kernel = sorted(m for m in seen if not m.startswith("verifirst.judge"))
    assert judge == sorted(JUDGE_WALK), sorted(seen.items())  # calibrate, steps, autorefine, teacher, report: none
    assert set(kernel) <= set(KERNEL_WALK), sorted(seen.items())
    assert "verifirst.loop.evaluation" in kernel and "verifirst.api" in kernel  # the loop's pool still gets it
    assert len(seen) <= MAX_MODULES, sorted(seen)
    assert seen["verifirst.judge.pool"] == {"__init__(threads)"}  # the count is read once, where it is used


def test_one_name_for_the_thread_count_in_the_judge_domain():
    """`threads` everywhere in verifirst.judge; `num_threads` only where DSPy reads it (the MLflow anchors' SIMBA
    and GEPA options) and as AutoRefineAligner's old keyword, read with a DeprecationWarning."""
    import ast
    import warnings
    from pathlib import Path

    import verifirst

    root = Path(__file__).resolve().parents[1] / "judge"
    params, other = [], []
    for f in sorted(root.glob("*.py")):
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args.args + node.args.kwonlyargs
                params += [f"{f.name}:{node.name}" for a in args if a.arg == "num_threads"]
            elif isinstance(node, ast.Constant) and node.value == "num_threads":
                other.append(f.name)
            elif isinstance(node, ast.keyword) and node.arg == "num_threads":
                other.append(f"{f.name}:kw")
            elif isinstance(node, ast.Attribute) and node.attr == "num_threads" and not (
                    isinstance(node.value, ast.Name) and node.value.id == "budget"):  # the kernel's Budget field
                other.append(f"{f.name}:.{node.attr}")
    assert params == ["aligner.py:__init__"], params
    # DSPy's: kwargs.setdefault("num_threads", ...) for SIMBA/GEPA; the kernel's Budget(num_threads=) field, set
    # from the pool in calibrate._budget
    assert sorted(other) == ["calibrate.py:kw", "calibrate.py:kw", "mlflow_align.py", "mlflow_align.py"], other
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        aligner = verifirst.AutoRefineAligner(num_threads=3)
    assert aligner.threads == 3 and any(issubclass(w.category, DeprecationWarning) for w in caught)
    assert verifirst.AutoRefineAligner(threads=2).threads == 2
