import json
import subprocess

import pytest

from verifirst.benchmarks.bash_pack import FIXTURES, PackVerifier, load_bash_pack
from verifirst.core.errors import InputError
from verifirst.verifiers.bash.feh import with_harness


def test_pack_has_forty_varied_tasks():
    suite = load_bash_pack()
    assert len(suite) >= 40
    ids = [it.id for it in suite.items]
    assert len(ids) == len(set(ids))
    assert {it.meta["difficulty"] for it in suite.items} == {0, 1, 2}
    fixtures = {it.gold["fixture"] for it in suite.items}
    assert {"empty", "nl2sh-fs1", "nl2sh-fs3"} <= fixtures <= set(FIXTURES)
    assert all(it.meta["check"] == "exec" for it in suite.items)  # no task is syntax-only
    assert {it.id for it in suite.items if "harness" in it.gold} >= {"fn-greet", "loop-number-lines", "fn-max"}
    # both output-only and file-system-changing tasks (writes are redirections, mv/cp/mkdir/...)
    changing = [it for it in suite.items if any(w in it.gold["command"] for w in
                                                ("mkdir", "mv ", "cp ", "touch", "-delete", "chmod", "sed -i", "> /"))]
    assert 10 <= len(changing) <= len(suite) - 20


def test_items_shape():
    it = load_bash_pack().by_id()["seq-1-10"]
    assert it.inputs == {"task": "Print the numbers from 1 to 10, one per line."}
    assert it.gold == {"command": "seq 1 10", "fixture": "empty"}
    assert it.group == "seq-1-10"
    ex = it.example()
    assert ex.inputs().toDict() == {"task": it.inputs["task"]}


def test_every_gold_parses_with_bash_n():
    bad = []
    for it in load_bash_pack().items:
        r = subprocess.run(["bash", "-n", "-c", it.gold["command"]], capture_output=True, text=True)
        if r.returncode != 0:
            bad.append((it.id, r.stderr))
    assert bad == []


def test_output_only_golds_are_deterministic_on_host():
    # the empty-fixture exec tasks need no files: run them twice on the host shell
    for it in load_bash_pack().items:
        if it.gold["fixture"] != "empty":
            continue
        cmd = with_harness(it.gold["command"], it.gold.get("harness"))
        runs = [subprocess.run(["bash", "-c", cmd], capture_output=True, text=True,
                               stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"})
                for _ in range(2)]
        assert runs[0].returncode == 0, (it.id, runs[0].stderr)
        assert runs[0].stdout.strip(), it.id
        assert runs[0].stdout == runs[1].stdout, it.id


def _write(tmp_path, doc):
    p = tmp_path / "pack.json"
    p.write_text(json.dumps(doc, indent=1))
    return p


def test_bad_fixture_names_file_line_field(tmp_path):
    good = {"id": "a", "task": "t", "gold": "echo", "fixture": "empty", "difficulty": 0}
    p = _write(tmp_path, {"tasks": [good, dict(good, id="b", fixture="nope")]})
    with pytest.raises(InputError) as e:
        load_bash_pack(p)
    assert e.value.path == str(p) and e.value.field == "tasks[1].fixture" and e.value.line is not None
    assert "nl2sh-fs1" in str(e.value)


@pytest.mark.parametrize("row, field", [
    ({"id": "a", "task": "", "gold": "echo", "fixture": "empty", "difficulty": 0}, "tasks[0].task"),
    ({"id": "a", "task": "t", "gold": "echo", "fixture": "empty", "difficulty": 5}, "tasks[0].difficulty"),
    ({"id": "a", "task": "t", "gold": "echo", "fixture": "empty", "difficulty": 0, "check": "x"}, "tasks[0].check"),
    ({"id": "a", "task": "t", "gold": "f() { :; }", "fixture": "empty", "difficulty": 0, "check": "syntax"},
     "tasks[0].check"),
    ({"id": "a", "task": "t", "gold": "f() { :; }", "fixture": "empty", "difficulty": 0, "harness": "f"},
     "tasks[0].harness"),
    ({"id": "a", "task": "t", "gold": "echo", "fixture": "empty", "difficulty": 0, "match": "fuzzy"},
     "tasks[0].match"),
    ({"id": "A B", "task": "t", "gold": "echo", "fixture": "empty", "difficulty": 0}, "tasks[0].id"),
])
def test_bad_fields(tmp_path, row, field):
    with pytest.raises(InputError) as e:
        load_bash_pack(_write(tmp_path, {"tasks": [row]}))
    assert e.value.field == field


def test_duplicate_ids_and_bad_json(tmp_path):
    row = {"id": "a", "task": "t", "gold": "echo", "fixture": "empty", "difficulty": 0}
    with pytest.raises(InputError, match="duplicate"):
        load_bash_pack(_write(tmp_path, {"tasks": [row, row]}))
    p = tmp_path / "broken.json"
    p.write_text('{"tasks": [\n{"id": }]}')
    with pytest.raises(InputError) as e:
        load_bash_pack(p)
    assert e.value.line == 2
    with pytest.raises(InputError, match="not found"):
        load_bash_pack(tmp_path / "missing.json")


CHANGES = {"mkdir-archive", "mkdir-nested", "touch-notes", "rename-php", "delete-c", "chmod-sh", "java-list-file",
           "sed-php", "copy-sh-flat", "java-count-file", "backup-dir1", "move-c-backup"}


def test_every_gold_runs_in_the_sandbox_and_repeats_identically():
    sandbox_mod = pytest.importorskip("verifirst.verifiers.bash.sandbox")
    try:
        sb = sandbox_mod.Sandbox()
    except Exception as e:  # no user namespaces / bwrap here
        pytest.skip(f"sandbox unavailable: {e}")
    for it in load_bash_pack().items:
        cmd = with_harness(it.gold["command"], it.gold.get("harness"))
        a = sb.run(cmd, it.gold["fixture"])
        b = sb.run(cmd, it.gold["fixture"])
        assert a.exit_code == 0 and not a.timed_out, (it.id, a.stderr)
        assert (a.stdout, a.fs_diff) == (b.stdout, b.fs_diff), it.id
        changed = bool(a.fs_diff.added or a.fs_diff.deleted or a.fs_diff.modified)
        assert changed is (it.id in CHANGES), it.id
        if it.id not in CHANGES:  # every other task prints: execution has something to compare
            assert a.stdout.strip(), it.id


def _alike(texts):
    """An embedder for which all texts look alike: only the execution rules decide."""
    import numpy as np

    return np.ones((len(texts), 4), dtype=np.float32) / 2.0


# parseable candidates that define the right name but do the wrong thing
WRONG = {"fn-greet": ["greet() { echo \"Hi $1\"; }", "greet() { echo Hello; }", "greet() { :; }"],
         "fn-max": ["max() { echo \"$1\"; }", "max() { if (( $1 < $2 )); then echo $1; else echo $2; fi; }"],
         "loop-number-lines": ["while IFS= read -r line; do echo \"$line\"; done",
                               "n=0; while read line; do n=$((n+1)); echo \"$n $line\"; done"]}
RIGHT = {"fn-greet": ["function greet { printf 'Hello %s\\n' \"$1\"; }"],
         "fn-max": ["max() { echo $(( $1 > $2 ? $1 : $2 )); }"],
         "loop-number-lines": ["awk '{print NR \": \" $0}'"]}


def test_definition_tasks_are_judged_by_behaviour():
    from verifirst.verifiers.bash.feh import FehVerifier

    sandbox_mod = pytest.importorskip("verifirst.verifiers.bash.sandbox")
    try:
        sandbox_mod.default_sandbox()
    except Exception as e:  # no user namespaces / bwrap here
        pytest.skip(f"sandbox unavailable: {e}")
    v = PackVerifier(FehVerifier(embed=_alike))
    items = load_bash_pack().by_id()
    for tid, wrongs in WRONG.items():
        it = items[tid]
        assert v.verify(it, it.gold["command"]).passed, tid
        for cand in RIGHT[tid]:
            verdict = v.verify(it, cand)
            assert verdict.passed, (tid, cand, verdict.feedback)
        for cand in wrongs:
            assert subprocess.run(["bash", "-n", "-c", cand]).returncode == 0, cand  # it parses
            verdict = v.verify(it, cand)
            assert not verdict.passed and verdict.inconclusive is None, (tid, cand, verdict.feedback)
