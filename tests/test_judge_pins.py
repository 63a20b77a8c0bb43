"""The judge journeys give the same per-item rows and reports as before the judge domain moved into
one package (issue 34): a tracked calibration with promotion, a time-split calibration with
`--baseline`, `monitor` over four weeks with a rule change, `verifirst judge` on labelled records,
and `judge.align(..., optimizer=AutoRefineAligner())` on labelled MLflow traces, all with scripted
models. tests/data/judge_pins.json was recorded before the move (run this file with
VERIFIRST_RECORD_PINS=1 to record it again, on purpose only).

What is compared comes from each run's files and returned reports: evaluation rows
(eval/*.jsonl, timings dropped), the report's judge, baseline and champion sections, monitor's
windows, judge's rows, the aligner's held-out report and instructions. Paths, run ids, trace ids
(mapped to the trace's task) and timings are left out.
"""
from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from test_behaviour_unchanged import ROW_KEEP, JUDGE_KEEP, _judge_answer, _pick, _report, _rows

PINS = Path(__file__).resolve().parent / "data" / "judge_pins.json"
ROOT = Path(__file__).resolve().parents[1]


# -- adapters: every call into the project's entry points is here, and only here ------------------

def _scripted(fn, role: str, name: str):
    from verifirst.lm.testing import scripted_lm

    return scripted_lm(fn, role=role, name=name)


def _patch_cli_models(monkeypatch, fn, name: str) -> None:
    """The CLI's model strings (`--model local`) resolve to a scripted LM in the module that builds them."""
    import importlib

    for mod in ("verifirst.judge.apply",):
        try:
            m = importlib.import_module(mod)
        except ImportError:
            continue
        if hasattr(m, "make_lm"):
            monkeypatch.setattr(m, "make_lm", lambda spec, role="task", **kw: _scripted(fn, role, name))
            return
    raise AssertionError("no module builds the judge verb's LM")


def _cli(args: list[str]):
    from verifirst.cli import app

    return CliRunner().invoke(app, args)


# -- cleaning -------------------------------------------------------------------------------------

def _clean(value, tmp: str, ids: dict | None = None):
    ids = ids or {}
    if isinstance(value, str):
        for k, v in ids.items():
            value = value.replace(k, v)
        return value.replace(tmp, "<tmp>").replace(str(ROOT), "<repo>")
    if isinstance(value, dict):
        return {_clean(k, tmp, ids): _clean(v, tmp, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v, tmp, ids) for v in value]
    return value


DROP = ("wall_s", "run_id", "run_dir", "tracking_uri", "prompt_uri", "started_at", "finished_at", "elapsed_s",
        "timestamp", "created", "duration_s", "cache", "dataset", "dataset_id", "trace_ids")


def _drop(value):
    if isinstance(value, dict):
        return {k: _drop(v) for k, v in value.items() if k not in DROP}
    if isinstance(value, list):
        return [_drop(v) for v in value]
    return value


# -- the runs -------------------------------------------------------------------------------------

def calibration_tracked(tmp: Path, monkeypatch) -> dict:
    """Calibration with MLflow: the prompt registered, the champion alias moved on validation evidence."""
    import verifirst as vf

    lm = _scripted(_judge_answer, "judge", "pin-judge")
    vf.calibrate(ROOT / "examples" / "outcomes.jsonl", "passfail", models={"judge": lm}, max_iters=3,
                       splits=(0.5, 0.25, 0.25), run_dir=tmp / "run", workdir=tmp / "wd",
                       tracking=vf.MLflow(uri=f"sqlite:///{tmp / 'mlflow.db'}", experiment="pins"),
                       promote="champion")
    rep = json.loads((tmp / "run" / "report.json").read_text())
    out = {"rows": _rows(tmp / "run"), "report": _report(rep), "judge": _pick(rep["judge"], JUDGE_KEEP),
           "champion": _drop(rep.get("champion")), "review_queue": _drop(rep.get("review_queue")),
           "labels": rep.get("labels")}
    return _clean(out, str(tmp))


def calibration_baseline(tmp: Path, monkeypatch) -> dict:
    """A time split with 7-day windows and the deployed prompt as --baseline (test_baseline's workflow)."""
    import verifirst as vf
    from test_baseline import OLD_JUDGE, SPLITS, write_workflow

    src = tmp / "outcomes.jsonl"
    write_workflow(src)
    (tmp / "deployed.md").write_text(OLD_JUDGE + "\n")
    lm = _scripted(_judge_answer, "judge", "pin-baseline")
    vf.calibrate(src, models={"judge": lm}, max_iters=3, splits=SPLITS, workdir=tmp / "wd", run_dir=tmp / "run",
                 baseline=tmp / "deployed.md")
    rep = json.loads((tmp / "run" / "report.json").read_text())
    out = {"rows": _rows(tmp / "run"), "report": _report(rep), "judge": _pick(rep["judge"], JUDGE_KEEP),
           "baseline": _drop(rep["baseline"]), "test_reuse": _drop(rep.get("test_reuse"))}
    return _clean(out, str(tmp))


def monitor(tmp: Path, monkeypatch) -> dict:
    """Four weeks, the rule changing in the last: drift there and not before."""
    import verifirst as vf
    from test_monitor import PROMPT, _answer, _records, _write

    prompt = tmp / "judge.md"
    prompt.write_text(PROMPT)
    path = _write(tmp / "o.jsonl", _records())
    res = vf.monitor(str(prompt), path, models={"judge": _scripted(_answer, "judge", "pin-monitor"),
                                                 "teacher": _scripted(_answer, "teacher", "pin-monitor-t")},
                     windows="7d", baseline_pi=0.9, workdir=tmp / "wd", run_dir=tmp / "run")
    rep = json.loads((tmp / "run" / "report.json").read_text())
    return _clean({"exit_code": res.exit_code, "report": _drop(rep)}, str(tmp))


def judge_verb(tmp: Path, monkeypatch) -> dict:
    """`verifirst judge` on labelled records: one JSON row per record, the summary line."""
    from test_monitor import PROMPT, _answer, _records, _write

    _patch_cli_models(monkeypatch, _answer, "pin-judge-verb")
    prompt = tmp / "judge.md"
    prompt.write_text(PROMPT)
    path = _write(tmp / "o.jsonl", _records(weeks=2))
    r = _cli(["judge", "--prompt", str(prompt), "--input", str(path), "--workdir", str(tmp / "wd")])
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    return _clean({"exit_code": r.exit_code, "rows": rows,
                   "summary": [ln for ln in r.output.splitlines() if ln.startswith("judged ")]}, str(tmp))


def aligner(tmp: Path, monkeypatch) -> dict:
    """`judge.align(traces, optimizer=verifirst.AutoRefineAligner(...))` as test_aligner runs it, in this process:
    it leaves MLflow's process-wide settings as they were (the runs after it read their own stores)."""
    import mlflow
    from mlflow.genai.judges import make_judge

    import verifirst
    from verifirst.lm.local_server import serve_local
    from verifirst.lm.testing import ScriptedEngine
    from test_aligner import INSTRUCTIONS, MODEL, _env, _mlflow_at, judge_answer, log_labelled_traces, roles_answer
    from test_aligner import world

    url, stop = serve_local(ScriptedEngine(judge_answer))
    roles = _scripted(roles_answer, "teacher", "pin-aligner-roles")
    try:
        with _env(OPENAI_API_BASE=url, OPENAI_API_KEY="local-no-key", MLFLOW_MODEL_CATALOG_URI=""), \
                _mlflow_at(f"sqlite:///{tmp / 'mlflow.db'}", "pins-aligner"):
            judge = make_judge(name="safety", instructions=INSTRUCTIONS, model=MODEL,
                               feedback_value_type=__import__("typing").Literal["PASS", "FAIL"])
            rows = world(16)
            traces = log_labelled_traces(rows, "safety")
            aligner = verifirst.AutoRefineAligner(teacher=roles, proposer=roles, max_iters=2, n_boot=200,
                                                  log_to_mlflow=False, run_dir=tmp / "run")
            aligned = judge.align(traces, optimizer=aligner)
    finally:
        stop()
    ids = {t.info.trace_id: rows[k][0]["task"] for k, t in enumerate(traces)}
    rep = aligner.last_report
    out = {"aligned_instructions": aligned.instructions,
           "report": {k: _drop(rep[k]) for k in ("labels", "teacher", "held_out", "test_verdicts", "loop",
                                                  "aligned_instructions", "initial_instructions")},
           "sizes": rep["split"]["sizes"], "test_ids": sorted(rep["split"]["test_ids"]),
           "rows": _rows(tmp / "run")}
    out = _clean(out, str(tmp), ids)
    out["test_ids"] = sorted(out["test_ids"])
    out["rows"] = {k: sorted(v, key=lambda r: str(r.get("id"))) for k, v in out["rows"].items()}
    return out


RUNS = {"calibration_tracked": calibration_tracked, "calibration_baseline": calibration_baseline,
        "monitor": monitor, "judge_verb": judge_verb, "aligner": aligner}


def _dump(value) -> str:
    return json.dumps(value, indent=1, sort_keys=True, default=str) + "\n"


@pytest.mark.parametrize("name", sorted(RUNS))
def test_judge_journeys_give_the_results_recorded_before_the_move(name, tmp_path, monkeypatch):
    got = json.loads(_dump(RUNS[name](tmp_path, monkeypatch)))
    if os.environ.get("VERIFIRST_RECORD_PINS") == "1":
        pins = json.loads(PINS.read_text()) if PINS.exists() else {}
        pins[name] = got
        PINS.write_text(_dump(pins))
        return
    want = json.loads(PINS.read_text())[name]
    if got != want:
        diff = "".join(difflib.unified_diff(_dump(want).splitlines(True), _dump(got).splitlines(True),
                                            f"pinned/{name}", "now", n=2))
        pytest.fail(f"{name}: the judge journey's results differ from those pinned before the move:\n"
                    f"{diff[:20000]}", pytrace=False)
