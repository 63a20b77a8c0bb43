"""The FEH sysinfo probe's task file and pairing (benchmarks/studies/feh_sysinfo_probe.py)."""
import json

import pytest

from verifirst.benchmarks.studies import feh_sysinfo_probe as probe
from verifirst.core.errors import InputError


def test_the_shipped_tasks_load_and_pair():
    tasks = probe.load_tasks()
    assert len(tasks) >= 30 and {t["kind"] for t in tasks} >= {"users", "groups", "permissions", "dates", "host",
                                                                "disk", "processes"}
    pairs = probe.probe_pairs(tasks)
    assert len(pairs) == 3 * len(tasks) and sum(p["label"] for p in pairs) == len(tasks)
    for p in pairs:  # a rotated pair never holds the task's own gold
        assert p["label"] or p["candidate"] != tasks[p["task"]]["gold"]
    item = probe.item_of(next(t for t in tasks if t.get("driver")))
    assert item.gold["harness"].count("{command}") == 1 and "#++EXPECTED=" in item.gold["harness"]


def test_bad_task_files_name_the_field(tmp_path):
    p = tmp_path / "t.json"
    p.write_text("{not json")
    with pytest.raises(InputError, match="invalid JSON"):
        probe.load_tasks(p)
    good = {"id": "a", "kind": "users", "task": "t", "gold": "id", "rewrite": "id", "fixture": "empty"}
    tasks = [dict(good, id=f"t{i}") for i in range(12)]
    tasks[3] = dict(tasks[3], gold=" ")
    p.write_text(json.dumps({"tasks": tasks}))
    with pytest.raises(InputError) as e:
        probe.load_tasks(p)
    assert "tasks[3].gold" in str(e.value)
    tasks[3] = dict(tasks[2])
    p.write_text(json.dumps({"tasks": tasks}))
    with pytest.raises(InputError, match="duplicate task id"):
        probe.load_tasks(p)
    assert probe.main(["--tasks", str(tmp_path / "missing.json")]) == 2


def test_summary_counts_wrong_verdicts_by_rule():
    rows = [{"id": "a~b", "label": False, "after": {"passed": True, "rule": "output_cosine"}},
            {"id": "a~c", "label": False, "after": {"passed": None, "rule": "inconclusive"}},
            {"id": "a~r", "label": True, "after": {"passed": False, "rule": "facts"}},
            {"id": "b~r", "label": True, "after": {"passed": True, "rule": "identical"}}]
    s = probe.summarise(rows, "after")
    assert s["not_equivalent"]["false_equivalence_rate"] == 0.5 and s["not_equivalent"]["inconclusive"] == 1
    assert s["not_equivalent"]["wrong_by_rule"] == {"output_cosine": 1}
    assert s["equivalent"]["wrong_by_rule"] == {"facts": 1} and s["false_equivalences"] == ["a~b"]
    assert s["accuracy_conclusive"] == round(1 / 3, 3)
