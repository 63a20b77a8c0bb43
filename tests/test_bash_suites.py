import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from verifirst.benchmarks.eabench import load_eabench
from verifirst.benchmarks.intercode import load_intercode
from verifirst.benchmarks.nl2sh import json_array_with_lines, load_nl2sh, nl2sh_pairs
from verifirst.core.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
INTERCODE = ROOT.parent / "shared" / "data" / "intercode-bash"
EATINY = ROOT / "tests" / "data" / "eabench_tiny"
needs_icalfa = pytest.mark.skipif(importlib.util.find_spec("icalfa") is None,
                                  reason="PyPI icalfa==0.3.6 not installed (NL2SH-ALFA test set)")
needs_intercode = pytest.mark.skipif(not INTERCODE.is_dir(), reason=f"InterCode data not at {INTERCODE}")


@needs_icalfa
def test_nl2sh_from_icalfa_without_importing_it():
    sys.modules.pop("icalfa", None)
    s = load_nl2sh()
    assert "icalfa" not in sys.modules  # importing it would pull in docker
    assert len(s) == 300
    counts = {}
    for it in s.items:
        counts[it.gold["fixture"]] = counts.get(it.gold["fixture"], 0) + 1
    assert counts == {"nl2sh-fs1": 153, "nl2sh-fs2": 49, "nl2sh-fs3": 57, "nl2sh-fs4": 23, "nl2sh-fs5": 18}
    first = s.items[0]
    assert first.id == "nl2sh-000" and first.group == "nl2sh-000"
    assert first.inputs == {"task": "list files in the current directory"}
    assert first.gold == {"command": "ls", "command2": "ls -l", "fixture": "nl2sh-fs1"}
    assert s.items[153].gold["fixture"] == "nl2sh-fs2" and s.items[153].id == "nl2sh-153"
    assert len({it.id for it in s.items}) == 300
    ex = first.example()
    assert ex.item_id == "nl2sh-000" and set(ex.inputs().keys()) == {"task"}


@needs_icalfa
def test_nl2sh_pairs_rotate_by_ten_in_gold_fixture():
    s = load_nl2sh()
    pairs = nl2sh_pairs(s)
    assert len(pairs) == 600 and sum(p["label"] for p in pairs) == 300
    rot = [p for p in pairs if not p["label"]]
    assert rot[0]["gold"] == s.items[0].gold["command"]
    assert rot[0]["candidate"] == s.items[10].gold["command2"]
    assert rot[0]["fixture"] == "nl2sh-fs1"
    assert rot[295]["candidate"] == s.items[5].gold["command2"]  # wraps around
    assert rot[295]["fixture"] == s.items[295].gold["fixture"]


def test_nl2sh_from_dir_and_flat_files(tmp_path):
    for n in range(1, 6):
        (tmp_path / f"nl2bash_fs_{n}.json").write_text(json.dumps(
            [{"query": f"q{n}", "gold": f"echo {n}", "gold2": f"printf '{n}\\n'", "difficulty": 1}]))
    s = load_nl2sh(tmp_path)
    assert [it.gold["fixture"] for it in s.items] == [f"nl2sh-fs{n}" for n in range(1, 6)]
    # a Hugging Face style csv with nl/bash/bash2 columns: 300 rows map onto the five fixtures
    d = tmp_path / "hf"
    d.mkdir()
    rows = ["nl,bash,bash2,difficulty"] + [f'"task {i}","echo {i}","echo  {i}",1' for i in range(300)]
    (d / "test.csv").write_text("\n".join(rows) + "\n")
    h = load_nl2sh(d)
    assert len(h) == 300 and h.items[152].gold["fixture"] == "nl2sh-fs1"
    assert h.items[153].gold["fixture"] == "nl2sh-fs2" and h.items[299].gold["fixture"] == "nl2sh-fs5"
    assert h.items[7].gold["command2"] == "echo  7" and h.items[7].inputs["task"] == "task 7"


def test_bad_nl2sh_rows_name_file_line_and_field(tmp_path):
    f = tmp_path / "nl2bash_fs_1.json"
    f.write_text('[\n  {"query": "a", "gold": "ls"},\n  {"query": "b"}\n]\n')
    for n in range(2, 6):
        (tmp_path / f"nl2bash_fs_{n}.json").write_text("[]")
    with pytest.raises(InputError) as e:
        load_nl2sh(tmp_path)
    assert str(f) in str(e.value) and ":3" in str(e.value) and "[1].gold" in str(e.value)
    f.write_text('[\n  {"query": "a",\n   "gold": }\n]')
    with pytest.raises(InputError) as e:
        load_nl2sh(tmp_path)
    assert f"{f}:3" in str(e.value) and "invalid JSON" in str(e.value)
    f.write_text('{"query": "a"}')
    with pytest.raises(InputError, match="not a JSON array"):
        json_array_with_lines(f)
    f.write_text('[{"query": "a", "gold": 3}]')
    with pytest.raises(InputError, match=r"\[0\]\.gold"):
        load_nl2sh(tmp_path)
    with pytest.raises(InputError, match="no such dataset path"):
        load_nl2sh(tmp_path / "nope")


@needs_intercode
def test_intercode_from_shared_path():
    s = load_intercode(INTERCODE)
    assert len(s) == 60 + 53 + 60 + 27 + 24
    by = s.by_id()
    assert by["intercode-fs1-000"].gold["fixture"] == "intercode-fs1"
    assert by["intercode-fs4-026"].gold["fixture"] == "intercode-fs4"
    assert by["intercode-test-000"].gold == {"command": "find /testbed | wc -l", "fixture": "intercode-fs1"}
    assert all(it.group == it.id and set(it.inputs) == {"task"} for it in s.items)
    assert len(load_intercode(INTERCODE, include_test_queries=False)) == 200


def test_intercode_bad_input(tmp_path):
    with pytest.raises(InputError, match="no nl2bash_fs_N.json"):
        load_intercode(tmp_path)
    (tmp_path / "nl2bash_fs_2.json").write_text('[\n{"query": "x", "gold": "ls"},\n{"gold": "ls"}\n]')
    with pytest.raises(InputError) as e:
        load_intercode(tmp_path)
    assert "nl2bash_fs_2.json:3" in str(e.value) and "[1].query" in str(e.value)


def test_eabench_tiny_layout():
    s = load_eabench(EATINY)
    ids = [it.id for it in s.items]
    assert ids == ["eabench-bash_1-test1", "eabench-bash_1-test2", "eabench-bash_1-test4", "eabench-bash_1-test5",
                   "eabench-bash_1-test6", "eabench-bash_1-test10", "eabench-bash_2-test1", "eabench-bash_2-test2",
                   "eabench-bash_2-test3", "eabench-bash_3-test001", "eabench-bash_3-test002",
                   "eabench-bash_3-test003", "eabench-bash_3-test004"]
    assert s.meta["no_gold"] == ["eabench-bash_1-test3"]  # script under another name upstream
    t2 = s.by_id()["eabench-bash_1-test2"]
    assert t2.inputs == {"task": "Count the .txt files in the directory notes"}
    assert "mkdir notes" in t2.gold["prerequisite"] and t2.gold["fixture"].startswith("eabench-bash_1-test2-")
    multi = s.by_id()["eabench-bash_3-test001"]
    assert multi.meta["name"] == "Sum of squares" and multi.gold["command"].count("\n") >= 5
    assert multi.meta["kind"] == "multi-line scripts"
    assert [it.id for it in load_eabench(EATINY, suites=("bash_2",)).items][0] == "eabench-bash_2-test1"
    assert len(load_eabench(EATINY / "bash_3")) == 4


def test_eabench_bad_input(tmp_path):
    root = tmp_path / "ea"
    shutil.copytree(EATINY, root)
    with pytest.raises(InputError, match="test has no ground-truth script"):
        load_eabench(root, strict=True)
    with pytest.raises(InputError, match="unknown suite"):
        load_eabench(root, suites=("bash_9",))
    (root / "bash_2" / "test1" / "prompt").write_text("  \n")
    with pytest.raises(InputError) as e:
        load_eabench(root)
    assert "bash_2/test1/prompt:1" in str(e.value) and "empty" in str(e.value)
    (root / "bash_2" / "test1" / "prompt").unlink()
    with pytest.raises(InputError, match="bash.sh but no prompt"):
        load_eabench(root)
    with pytest.raises(InputError, match="no suite dirs"):
        load_eabench(tmp_path)


@pytest.mark.integration
def test_eabench_tiny_through_the_sandbox():
    try:
        from verifirst.verifiers.bash import sandbox
        sandbox.default_sandbox()
    except Exception as e:  # no bwrap / user namespaces on this host
        pytest.skip(f"sandbox unavailable: {e}")
    from verifirst.verifiers.bash.feh import FehVerifier

    s = load_eabench(EATINY).by_id()
    v = FehVerifier("nl2sh")
    counted = v.verify(s["eabench-bash_1-test2"], 'find notes -name "*.txt" | wc -l')  # needs prerequisite.sh
    assert counted.passed and counted.details["gold"]["stdout"] == "2\n"
    script = v.verify(s["eabench-bash_3-test001"], "echo 55")  # multi-line gold script
    assert script.passed and script.details["gold"]["stdout"] == "55\n"
    assert not v.verify(s["eabench-bash_3-test001"], "echo 15").passed


def _eabench_test(root: Path, suite: str, name: str, script: str, **files: str) -> None:
    t = root / suite / name
    t.mkdir(parents=True)
    (t / "prompt").write_text(f"task {name}\n")
    (t / "bash.sh").write_text("#!/bin/bash\n" + script + "\n")
    for rel, text in files.items():
        (t / rel.replace("__", "/")).parent.mkdir(parents=True, exist_ok=True)
        (t / rel.replace("__", "/")).write_text(text)


def test_eabench_tests_that_administer_users_get_the_sysadmin_fixture(tmp_path):
    from verifirst.verifiers.bash import fixtures

    root = tmp_path / "ea"
    _eabench_test(root, "bash_1", "test1", "useradd -m alice")
    _eabench_test(root, "bash_1", "test2", "sudo ls /app")  # bash_1's container has no sudo
    _eabench_test(root, "bash_1", "test3", "getent passwd | wc -l  # useradd")  # only reads
    _eabench_test(root, "bash_1", "test4", "grep -c alice /etc/shadow", **{"prerequisite.sh": "useradd alice\n"})
    _eabench_test(root, "bash_2", "test1", "sudo id -u")  # runs as `test` with passwordless sudo
    _eabench_test(root, "bash_2", "test2", "echo $1", **{"home__test__test.sh": "(. bash.sh 7)\n"})
    _eabench_test(root, "bash_3", "test001", "cat users.txt", **{"home__test__pre_test.sh": "groupadd devs\n",
                                                                 "home__test__users.txt": "x\n"})
    s = load_eabench(root).by_id()
    why = {iid: it.meta.get("sysadmin") for iid, it in s.items()}
    assert why == {"eabench-bash_1-test1": "bash.sh runs useradd", "eabench-bash_1-test2": None,
                   "eabench-bash_1-test3": None, "eabench-bash_1-test4": "bash.sh names /etc/shadow",
                   "eabench-bash_2-test1": "bash.sh runs sudo", "eabench-bash_2-test2": None,
                   "eabench-bash_3-test001": "home/test/pre_test.sh runs groupadd"}
    for iid, it in s.items():
        fx = fixtures.from_spec(it.gold["fixture"], it.gold["fixture_spec"])
        assert fx.sysadmin == bool(why[iid]) and (it.gold["fixture_spec"]["base"] == "sysadmin") == bool(why[iid])
    plain = load_eabench(root, admin_fixture=None).by_id()
    assert not any(it.meta.get("sysadmin") or it.gold["fixture_spec"]["base"] != "empty" for it in plain.values())


@pytest.mark.integration
def test_eabench_admin_task_is_judged_by_its_etc_effect(tmp_path):
    try:
        from verifirst.verifiers.bash import sandbox
        sandbox.default_sandbox()
    except Exception as e:  # no bwrap / user namespaces on this host
        pytest.skip(f"sandbox unavailable: {e}")
    from verifirst.verifiers.bash.feh import FehVerifier

    _eabench_test(tmp_path / "ea", "bash_1", "test1", "useradd -m alice")
    item = load_eabench(tmp_path / "ea").items[0]
    v = FehVerifier("nl2sh")
    same = v.verify(item, "useradd -m alice")
    assert same.passed is True and any(e["path"] == "/etc/passwd" for e in same.details["gold"]["fs_diff"])
    assert v.verify(item, "useradd -m bob").passed is False
