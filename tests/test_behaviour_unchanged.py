"""Four scripted runs give the same per-item results and report numbers as before the run loop was
unified: the demo (bash pack, a placeholder answer counted apart), GEPA on the built-in bash suite
(through `experiment.run` and through `vf.run`), the example Terraform tasks with the organisation's
policies, and judge calibration on examples/outcomes.jsonl through `vf.calibrate`.

tests/data/behaviour/*.json were recorded at commit 6cc162f, before the run loop was unified, with
exactly these scripted models. What is compared is read from each run directory's files only:
the evaluation checkpoints (eval/{phase}_{split}.jsonl, one row per item, timings dropped) and
report.json (per split before/after counts, pass rates, intervals and the before/after comparison;
instructions; sizes; the split digest; the engine; the optimizer's history; LM call counts; for
calibration the judge section's numbers). Paths, run ids and timings are left out.
"""
from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest

from conftest import experiment_toml

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data" / "behaviour"
EXAMPLES = ROOT / "examples"


# -- adapters: every call into the project's entry points is here, and only here ------------------

def _scripted(fn, *, role: str = "task", name: str):
    from verifirst.lm.testing import scripted_lm

    return scripted_lm(fn, role=role, name=name)


def _answer(**fields) -> str:
    from verifirst.lm.testing import json_answer

    return json_answer(**fields)


def _models(task, reflection):
    from verifirst.lm import Models

    return Models(task=task, reflection=reflection)


def _experiment(d: dict):
    from verifirst import config
    return config.from_dict(d)


def _load_toml(path: Path):
    from verifirst import config
    return config.load(path)


def _demo_config(workdir: Path) -> dict:
    from verifirst.cli import demo_config

    return demo_config(workdir, budget=8)


def _suite_items(exp) -> list:
    from verifirst import experiment
    return list(experiment.load_suite(exp).items)


def _run_exp(exp, run_dir: Path, models) -> None:
    """What `verifirst run` calls (before the loop was unified: experiment.run, its own loop)."""
    import verifirst as vf

    vf.run(exp, run_dir=run_dir, progress=False, models=models, echo=lambda m: None)


def _run_toml_api(path: Path, run_dir: Path, models) -> None:
    import verifirst as vf

    vf.run(path, models=models, run_dir=run_dir)


def _calibrate(outcomes: Path, run_dir: Path, workdir: Path, models: dict) -> None:
    import verifirst as vf

    vf.calibrate(outcomes, "passfail", models=models, max_iters=4, splits=(0.5, 0.25, 0.25),
                 run_dir=run_dir, workdir=workdir, tracking=None)


# -- what a run directory says --------------------------------------------------------------------

# The fields compared (a field added later is not a difference; one changed or gone is).
ROW_KEEP = ("id", "split", "status", "score", "stage", "error_classes", "error_kind", "error", "feedback", "output",
            "attempts")
SUMMARY_KEEP = ("split", "n", "scored", "pass", "errors", "lm_errors", "verifier_errors", "inconclusive",
                "hook_failures", "pass_rate", "ci_lo", "ci_hi", "mean_score", "stages")
COMPARISON_KEEP = ("paired_n", "before_pass", "after_pass", "delta", "b_before_only", "c_after_only", "mcnemar_p",
                   "delta_ci_lo", "delta_ci_hi")
REPORT_KEEP = ("engine", "split_digest", "sizes", "instructions", "instructions_changed", "history")
USAGE_KEEP = ("calls", "lm_calls", "cache_hits", "errors", "attempts", "failed_attempts", "unusable")
JUDGE_KEEP = ("kind", "initial_prompt", "calibrated_prompt", "view_fields", "teacher", "loop", "validation",
              "test", "test_verdicts")


def _pick(d: dict, keys) -> dict:
    return {k: d[k] for k in keys if k in d}


def _clean(value, tmp: str):
    """Paths under the run's temporary folder and the repository become placeholders."""
    if isinstance(value, str):
        return value.replace(tmp, "<tmp>").replace(str(ROOT), "<repo>")
    if isinstance(value, dict):
        return {k: _clean(v, tmp) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v, tmp) for v in value]
    return value


def _rows(run_dir: Path) -> dict:
    """{phase_split: that evaluation's rows, by item id}: eval/*.jsonl."""
    out = {}
    for f in sorted((run_dir / "eval").glob("*.jsonl")):
        rows = [_pick(json.loads(ln), ROW_KEEP) for ln in f.read_text().splitlines() if ln.strip()]
        out[f.stem] = sorted(rows, key=lambda r: str(r.get("id")))
    return out


def _report(rep: dict) -> dict:
    """report.json's numbers: per split before/after/comparison, instructions, sizes, digest, engine."""
    out = _pick(rep, REPORT_KEEP)
    out["splits"] = {s: {**{p: _pick(b[p], SUMMARY_KEEP) for p in ("before", "after") if p in b},
                         **({"comparison": _pick(b["comparison"], COMPARISON_KEEP)} if "comparison" in b else {})}
                     for s, b in sorted(rep["splits"].items())}
    out["usage_this_run"] = _pick(rep.get("usage_this_run") or {}, USAGE_KEEP)
    return out


def _extract(run_dir: Path, tmp: Path, judge: bool = False) -> dict:
    """What the run directory says, from its files only."""
    rep = json.loads((run_dir / "report.json").read_text())
    out = {"rows": _rows(run_dir), "report": _report(rep)}
    if judge:  # calibration: the judge section (Scott's pi, confusion, McNemar, teacher, loop, verdicts)
        out["judge"] = _pick(rep["judge"], JUDGE_KEEP)
    return _clean(out, str(tmp))


# -- the four runs --------------------------------------------------------------------------------

def demo(tmp: Path) -> dict:
    d = _demo_config(tmp / "wd")
    d["suite"]["limit"] = 6
    d.setdefault("tracking", {})["enabled"] = False
    exp = _experiment(d)
    gold = {it.inputs["task"]: it.gold["command"] for it in _suite_items(exp)}
    stuck = sorted(gold)[0]  # this task always gets the format's placeholder back: an LM error, never run

    def task_answer(messages):
        task = next(t for t in gold if t in messages[-1]["content"])
        return _answer(command="{command}" if task == stuck else gold[task])

    models = _models(_scripted(task_answer, name="demo-task"),
                     _scripted(lambda m: _answer(new_instruction="Answer with one command."),
                               role="reflection", name="demo-refl"))
    _run_exp(exp, tmp / "run", models)
    return _extract(tmp / "run", tmp)


RULE = "Always answer with printf."


def _bash_models(exp):
    gold = {it.inputs["task"]: it.gold["command"] for it in _suite_items(exp)}
    known = set(sorted(gold)[::2])  # half the tasks are answered right from the start

    def task(messages):  # every task right once the reflection's rule is in the instructions
        text = messages[-1]["content"]
        t = next(t for t in gold if t in text)
        return _answer(command=gold[t] if t in known or RULE in messages[0]["content"] else "echo hi")

    return _models(_scripted(task, name="t1"),
                   _scripted(lambda m: _answer(new_instruction=RULE), role="reflection", name="r1"))


def bash_gepa(tmp: Path) -> dict:
    out = {}
    for how in ("experiment_run", "vf_run"):
        base = tmp / how
        base.mkdir()
        path = base / "exp.toml"
        path.write_text(experiment_toml(base / "wd", name="t-behaviour", seed=0, limit=12,
                                        optimizer={"name": "gepa", "max_metric_calls": 20},
                                        tracking={"enabled": False}))
        exp = _load_toml(path)
        if how == "experiment_run":
            _run_exp(exp, base / "run", _bash_models(exp))
        else:
            _run_toml_api(path, base / "run", _bash_models(exp))
        out[how] = _extract(base / "run", base)
    return out


IAC_TASKS = EXAMPLES / "iac_tasks"


def _iac_answer(messages):
    text = json.dumps(messages)
    ref = "job-queue" if "SQS queue" in text else "log-bucket"
    cfg = (IAC_TASKS / "tasks" / ref / "reference.tf").read_text()
    if ref == "log-bucket":  # meets the task's policy, breaks the organisation's tag rule
        cfg = cfg.replace("owner", "team")
    return _answer(reasoning="short", config=cfg)


def iac(tmp: Path) -> dict:
    exp = _experiment({
        "experiment": {"name": "iac-behaviour", "workdir": str(tmp / "wd"), "seed": 0},
        "suite": {"name": "iac-tasks", "path": str(IAC_TASKS / "tasks")},
        "program": {"name": "iac-generator", "options": {"strategy": "cot"}},
        "verifier": {"name": "terraform", "options": {"backend": "python",
                                                      "policy_dir": str(IAC_TASKS / "policies")}},
        "splits": {"ratios": [0.5, 0.0, 0.5], "no_val": True},
        "optimizer": {"name": "gepa", "max_metric_calls": 8},
        "models": {"task": "local", "reflection": "local"},
        "tracking": {"enabled": False},
    })
    models = _models(_scripted(_iac_answer, name="tasks-task"),
                     _scripted(lambda m: _answer(new_instruction="Tag every resource with its owner."),
                               role="reflection", name="tasks-refl"))
    _run_exp(exp, tmp / "run", models)
    return _extract(tmp / "run", tmp)


def _example_answer():
    """The scripted LM of examples/api_calibrate.py (judge, teacher, proposer and applier in one)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("api_calibrate_example", EXAMPLES / "api_calibrate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.scripted_answer


_judge_answer = _example_answer()


def calibration(tmp: Path) -> dict:
    models = {"judge": _scripted(_judge_answer, role="judge", name="ex-judge")}
    _calibrate(EXAMPLES / "outcomes.jsonl", tmp / "run", tmp / "wd", models)
    return _extract(tmp / "run", tmp, judge=True)


RUNS = {"demo": demo, "bash_gepa": bash_gepa, "iac": iac, "calibration": calibration}


# -- the comparison -------------------------------------------------------------------------------

def _dump(value) -> str:
    return json.dumps(value, indent=1, sort_keys=True) + "\n"


def _drop_added_usage(got, want) -> None:
    """The one loop reports the same usage keys for every entry point: `vf.run` at 6cc162f had no
    attempts/failed_attempts/unusable (its own loop counted fewer); a key it gained is no difference."""
    if isinstance(got, dict) and isinstance(want, dict):
        if "usage_this_run" in got and "usage_this_run" in want:
            got["usage_this_run"] = {k: v for k, v in got["usage_this_run"].items() if k in want["usage_this_run"]}
        for k in got:
            if k in want:
                _drop_added_usage(got[k], want[k])


@pytest.mark.parametrize("name", sorted(RUNS))
def test_results_equal_those_recorded_before_the_run_loop_was_unified(name, tmp_path):
    want = json.loads((DATA / f"{name}.json").read_text())
    got = json.loads(_dump(RUNS[name](tmp_path)))  # through JSON, as recorded: tuples become lists
    _drop_added_usage(got, want)
    if got != want:
        diff = "".join(difflib.unified_diff(_dump(want).splitlines(True), _dump(got).splitlines(True),
                                            f"recorded/{name}.json", "now", n=2))
        pytest.fail(f"{name}: the run's results differ from those recorded at 6cc162f:\n{diff[:20000]}",
                    pytrace=False)
