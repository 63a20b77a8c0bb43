"""One door into a calibration (issue 34): `vf.calibrate` (verifirst.judge.calibrate.calibrate) with a
CalibrateRequest. The CLI, AutoRefine's entry (run_calibration) and the MLflow aligner build a request and
go through it; only calibrate_run (behind the door) reaches the loop's composition (calibrate_suite)."""
from __future__ import annotations

import ast
from pathlib import Path

from test_autorefine import RuleFollowingLM, make_world

JUDGE = Path(__file__).resolve().parents[1] / "judge"


def _calls(path: Path) -> dict[str, set[str]]:
    """{function defined at the top level: the names it calls}."""
    out: dict[str, set[str]] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names = {n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", "")
                     for n in ast.walk(node) if isinstance(n, ast.Call)}
            out[node.name] = names
    return out


def test_only_the_run_behind_the_door_composes_the_loop():
    callers = {(f.name, fn) for f in JUDGE.glob("*.py") for fn, names in _calls(f).items()
               if "calibrate_suite" in names}
    assert callers == {("calibrate.py", "calibrate_run")}, callers
    cal = _calls(JUDGE / "calibrate.py")
    assert "calibrate" in cal["run_calibration"] and "calibrate" in cal["cli_calibrate"]
    assert "calibrate" in _calls(JUDGE / "aligner.py")["AutoRefineAligner"]


def test_autorefine_entry_goes_through_vf_calibrate_with_its_request(tmp_path, monkeypatch):
    import verifirst as vf
    import verifirst.judge.calibrate as cal
    from verifirst.judge.requests import CalibrateRequest
    from verifirst.loop.splits import make_splits

    assert vf.calibrate is cal.calibrate  # the public name is the door
    seen = []
    door = cal.calibrate

    def spy(request, *a, **kw):
        seen.append(request)
        return door(request, *a, **kw)

    monkeypatch.setattr(cal, "calibrate", spy)
    suite = make_world(n_groups=8)
    manifest = make_splits(suite.items, group="group", seed=1)
    lm = RuleFollowingLM()
    rep = cal.run_calibration(suite, manifest, "passfail", lm, lm, lm, batch_size=100, max_iters=1, run_dir=tmp_path,
                              n_boot=50, threads=3)
    assert len(seen) == 1 and isinstance(seen[0], CalibrateRequest)
    r = seen[0]
    assert r.records is suite and r.manifest is manifest and r.threads == 3 and r.tracking is False
    assert rep["judge"]["test"]["judges"]["calibrated"]["n"] > 0
