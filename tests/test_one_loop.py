"""There is one run loop. `verifirst run`, `vf.run`, `vf.optimize`, `vf.calibrate` and `verifirst calibrate`
all pass through `verifirst.loop.driver.run`, and an observer hears the same event sequence from each;
no other module evaluates splits, admits items to an optimizer or calls the loop's inner step."""
import ast
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import verifirst as vf
from verifirst.core import callbacks as cb
from verifirst.loop import driver
from verifirst.cli import app
from verifirst.lm.local_server import serve_local
from verifirst.lm.testing import ScriptedEngine, json_answer

from conftest import experiment_toml
from test_behaviour_unchanged import _judge_answer

REPO = Path(__file__).resolve().parents[1]
MODEL = "openai/one-loop"


def _gold() -> dict[str, str]:
    from verifirst.benchmarks.bash_pack import load_bash_pack

    return {it.inputs["task"]: it.gold["command"] for it in load_bash_pack().items}


@pytest.fixture(scope="module")
def endpoint():
    """One OpenAI-compatible server for every role: bash commands, GEPA's reflection, the judge,
    AutoRefine's teacher and proposer (each answers what its prompt asks for)."""
    gold = _gold()

    def answer(messages):
        system, user = messages[0]["content"], messages[-1]["content"]
        if "`new_instruction`" in system:
            return json_answer(new_instruction="Answer with one bash command.")
        if any(f"`{k}`" in system for k in ("verdict", "decision", "edits", "new_prompt")):
            return _judge_answer(messages)
        task = next((t for t in gold if t in user), None)
        return json_answer(command=gold[task] if task else "echo hi")

    url, stop = serve_local(ScriptedEngine(answer))
    yield url
    stop()


@pytest.fixture
def served(endpoint, monkeypatch):
    monkeypatch.setenv("OPENAI_API_BASE", endpoint)  # LiteLLM's openai/ models go there
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    return endpoint


class Recorder(cb.RunCallback):
    """The event names a run sends, consecutive repeats folded (rows, iterations, artifacts)."""

    def __init__(self):
        self.events: list[str] = []

    def _hear(self, event) -> None:
        name = type(event).__name__
        if name in ("Iteration", "ArtifactWritten"):  # how many an engine sends is the engine's business
            return
        if not self.events or self.events[-1] != name:
            self.events.append(name)


for _hook in cb.HOOKS:
    setattr(Recorder, _hook, Recorder._hear)


@pytest.fixture
def loop(monkeypatch):
    """Every pass through driver.run, each with the events a Recorder heard there."""
    passes: list[list[str]] = []
    real = driver.run

    def spy(req, callbacks=None, publish=None):
        rec = Recorder()
        given = [callbacks] if isinstance(callbacks, cb.RunCallback) else list(callbacks or [])
        try:
            return real(req, [*given, rec], publish)
        finally:
            passes.append(rec.events)

    monkeypatch.setattr(driver, "run", spy)
    return passes


def _toml(tmp: Path) -> Path:
    path = tmp / "exp.toml"
    path.write_text(experiment_toml(tmp / "wd", name="one-loop", splits=None,
                                    optimizer={"name": "gepa", "max_metric_calls": 8},
                                    models={"task": MODEL, "reflection": MODEL}, tracking={"enabled": False}))
    return path


def _records() -> list[dict]:
    from verifirst.benchmarks.bash_pack import load_bash_pack

    return [{"id": it.id, "task": it.inputs["task"], "command": it.gold["command"]}
            for it in load_bash_pack().items[:8]]


def _cli(args: list[str]) -> None:
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output


def test_every_entry_point_is_the_one_loop_with_the_same_events(tmp_path, served, loop):
    from verifirst.programs.bash import BashGenerator
    from verifirst.verifiers.exact import ExactMatch

    outcomes = str(REPO / "examples" / "outcomes.jsonl")
    entries = {
        "verifirst run": lambda d: _cli(["run", str(_toml(d)), "--run-dir", str(d / "run")]),
        "vf.run": lambda d: vf.run(_toml(d), run_dir=d / "run"),
        "vf.optimize": lambda d: vf.optimize(BashGenerator(), _records(), ExactMatch(), "gepa",
                                             models={"task": MODEL}, budget=vf.Budget(max_metric_calls=8),
                                             splits=(0.5, 0.25, 0.25), run_dir=d / "run", workdir=d / "wd"),
        "vf.calibrate": lambda d: vf.calibrate(outcomes, models={"judge": MODEL}, max_iters=1, run_dir=d / "run",
                                               workdir=d / "wd"),
        "verifirst calibrate": lambda d: _cli(["calibrate", "--outcomes", outcomes, "--model", MODEL,
                                               "--max-iters", "1", "--workdir", str(d / "wd"),
                                               "--run-dir", str(d / "run"), "--offline"]),
    }
    heard = {}
    for name, call in entries.items():
        before = len(loop)
        d = tmp_path / name.replace(" ", "-").replace(".", "-")
        d.mkdir()
        call(d)
        assert len(loop) == before + 1, f"{name} did not pass through driver.run exactly once"
        heard[name] = loop[-1]
        assert json.loads((d / "run" / "run_state.json").read_text())["status"] == "finished"
    evaluation = ["EvaluationStart", "RowScored", "EvaluationEnd"]
    expected = (["RunStart"] + evaluation * 3 + ["OptimizerStart", "OptimizerEnd"] + evaluation * 3
                + ["ReportReady", "ReportWritten", "RunEnd"])
    for name, events in heard.items():
        assert events == expected, f"{name}: {events}"


# -- grep level: nothing else runs a split ---------------------------------------------------------

PACKAGES = ("verifirst", "programs", "optimizers", "retrieval", "verifiers", "benchmarks")
# Benchmarks of the evaluator's own speed call it directly, by design: they time it, they decide nothing.
TIMING_BENCHMARKS = {"benchmarks/perf/scale.py", "benchmarks/perf/lm_overhead.py"}
# The anchors hand the calibration's train split to an optimizer that is not verifirst's (MLflow's
# Judge.align()): they record that through the same split guard, and score test through the ledger.
ANCHORS = {"optimizers/mlflow_align.py", "benchmarks/studies/judge_anchor.py"}


def _sources():
    for pkg in PACKAGES:
        for p in sorted((REPO / pkg).rglob("*.py")):
            rel = p.relative_to(REPO).as_posix()
            if rel not in TIMING_BENCHMARKS:
                yield rel, ast.parse(p.read_text(encoding="utf-8"))


def _imports_of(tree) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = (node.module or "").split(".")[-1]
            names |= {f"{mod}.{a.name}" for a in node.names}
    return names


def _calls_of(tree) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            base = node.func.value
            out.add(f"{getattr(base, 'id', getattr(base, 'attr', '?'))}.{node.func.attr}")
    return out


def test_no_module_but_the_driver_evaluates_splits_or_admits_items():
    offenders = []
    for rel, tree in _sources():
        if rel == "verifirst/loop/driver.py":
            continue
        imported, called = _imports_of(tree), _calls_of(tree)
        for name in ("evaluation.evaluate", "driver.optimize", "driver._optimize"):
            if name in imported:
                offenders.append(f"{rel}: imports {name}")
        for name in ("driver.optimize", "driver._optimize", "evaluation.evaluate"):
            if name in called:
                offenders.append(f"{rel}: calls {name}")
        if "manifest.admit_to_optimizer" in called and rel not in ANCHORS:
            offenders.append(f"{rel}: admits items to an optimizer outside the loop")
    assert offenders == [], "\n".join(offenders)


def test_only_vf_optimize_enters_the_loop():
    callers = [rel for rel, tree in _sources() if "driver.run" in _calls_of(tree) or "driver.run" in _imports_of(tree)]
    assert callers == ["verifirst/api.py"]
