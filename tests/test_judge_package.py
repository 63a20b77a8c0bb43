"""The judge domain is one package (issue 34): verifirst.judge, a top-level folder beside programs/
and optimizers/, that imports the kernel and is never imported by it; the kernel reaches it through
no registry kind of its own and no string call; no module of it is over 600 lines; and the public
names (`vf.calibrate`, `vf.monitor`, `vf.AutoRefineAligner`) are its functions."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "verifirst"
JUDGE = ROOT / "judge"
# The kinds an experiment file, `verifirst bench` or `verifirst.NAME` looks up by name: a user names
# these. A kind that exists only for the kernel to call one domain's function by name is the tangle
# the judge package removed ("calibration": run-judge, make-judge, judge-report, ...).
USER_KINDS = {"suite", "program", "verifier", "engine", "stages", "public", "study"}


def test_the_registry_has_no_kind_the_kernel_uses_to_reach_a_domain():
    from verifirst.core import registry

    assert set(registry.tables()) == USER_KINDS
    calls = []
    for p in sorted(q for q in KERNEL.rglob("*.py") if "__pycache__" not in q.parts and not q.is_symlink()
                    and KERNEL / "judge" not in q.parents):
        if any(part in ("programs", "verifiers", "optimizers", "retrieval", "benchmarks", "ops", "judge")
               for part in p.relative_to(KERNEL).parts[:1]):
            continue  # the domain folders linked under verifirst/
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "component":
                kind = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
                calls.append((p.relative_to(ROOT).as_posix(), node.lineno, kind))
    assert all(kind in USER_KINDS for _, _, kind in calls), calls


def test_no_part_is_called_by_name_inside_the_judge_package():
    offenders = []
    for p in sorted(JUDGE.glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                    "component", "_part"):
                offenders.append(f"{p.name}:{node.lineno}")
    assert offenders == [], "inside one package a part is imported, not looked up by name: " + ", ".join(offenders)


def test_every_judge_module_is_under_600_lines():
    long = {p.name: n for p in JUDGE.glob("*.py") if (n := len(p.read_text().splitlines())) > 600}
    assert long == {}


def test_the_judge_package_is_importable_as_verifirst_judge_from_its_own_folder():
    import verifirst.judge

    assert Path(verifirst.judge.__file__).resolve().parent == JUDGE.resolve()
    assert (KERNEL / "judge").is_symlink() and Path((KERNEL / "judge").readlink()).as_posix() == "../judge"


def test_the_public_names_are_the_judge_packages_functions():
    import verifirst as vf
    from verifirst.judge.aligner import AutoRefineAligner
    from verifirst.judge.calibrate import calibrate
    from verifirst.judge.monitoring import monitor

    assert vf.calibrate is calibrate and vf.monitor is monitor and vf.AutoRefineAligner is AutoRefineAligner
    assert {"calibrate", "monitor", "monitor_recorded", "AutoRefineAligner"} <= set(vf.__all__)
    from verifirst.judge.recorded_verdicts import monitor_recorded
    assert vf.monitor_recorded is monitor_recorded


def test_the_old_homes_are_gone():
    """One home: the judge's modules left the kernel and the other domains (no copies, no shims)."""
    gone = ["verifirst/calibration.py", "verifirst/monitoring.py", "verifirst/loop/labels.py",
            "verifirst/loop/promotion.py", "verifirst/loop/judge_prompt.py", "verifirst/tracking/records.py",
            "optimizers/autorefine.py", "optimizers/aligner.py", "optimizers/mlflow_align.py", "optimizers/_teacher.py",
            "optimizers/_edits.py", "programs/judges.py", "verifiers/label.py", "benchmarks/outcomes.py"]
    assert [g for g in gone if (ROOT / g).exists()] == []


def test_an_aligned_judge_keeps_every_make_judge_option():
    """issue 38: `judge.align(..., optimizer=AutoRefineAligner())` returned a judge without the original's
    generate_rationale_first; the aligned judge is make_judge with every option the original had."""
    import typing

    from mlflow.genai.judges import make_judge

    from verifirst.judge.mlflow_program import MLflowJudgeProgram

    judge = make_judge(name="safety", instructions="Is {{ outputs }} safe?", model="openai:/gpt-4o-mini",
                       feedback_value_type=typing.Literal["PASS", "FAIL"], generate_rationale_first=True,
                       include_timing_in_conversation=True, inference_params={"temperature": 0.1},
                       base_url="http://127.0.0.1:9/v1", extra_headers={"x-team": "a"}, description="d")
    aligned = MLflowJudgeProgram(judge, ["outputs"]).copy_with_prompt("Is {{ outputs }} safe? FAIL on eval(.").judge
    assert aligned.instructions == "Is {{ outputs }} safe? FAIL on eval(."
    for attr in ("_generate_rationale_first", "_include_timing_in_conversation", "_inference_params", "_base_url",
                 "_extra_headers", "_model_api", "description", "model", "feedback_value_type", "name"):
        assert getattr(aligned, attr) == getattr(judge, attr), attr
