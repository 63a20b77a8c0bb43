"""The test-reuse ledger: append-only JSONL, whole lines under concurrent writers, reuse counts,
and the optimize driver recording every test evaluation."""
import json
import multiprocessing as mp

import dspy

from verifirst.loop.evaluation import Scorer
from verifirst.loop.ledger import LEDGER_FILE, TestLedger, ledger_for_run_dir, program_hash
from verifirst.loop.driver import optimize
from verifirst.optimizers import Budget, EngineContext, EngineResult
from verifirst.programs.bash import BashGenerator
from verifirst.loop.splits import make_splits
from verifirst.core.task import Item
from verifirst.lm.testing import json_answer, scripted_lm
from verifirst.verifiers.base import Verdict


def test_record_counts_other_programs_and_is_idempotent_per_run(tmp_path):
    led = TestLedger(tmp_path / LEDGER_FILE)
    assert led.reuse("d1", ["a"]) == {"digest": "d1", "other_programs": 0, "evaluations": 0, "message": ""}
    assert led.record("d1", "a", tmp_path / "r1", "before") is True
    assert led.record("d1", "a", tmp_path / "r1", "before") is False, "a resumed run is not a new use"
    led.record("d1", "b", tmp_path / "r1", "after")
    led.record("d2", "c", tmp_path / "r2", "after")
    r = led.reuse("d1", ["a", "z"])
    assert r["other_programs"] == 1 and r["evaluations"] == 2
    assert "test split d1 was already scored for 1 other program(s): adaptive reuse" in r["message"]
    rec = led.entries()[0]
    assert set(rec) == {"digest", "program", "run_dir", "what", "time"} and rec["run_dir"].endswith("r1")


def test_a_line_cut_by_a_kill_is_skipped_and_the_next_stays_whole(tmp_path):
    led = TestLedger(tmp_path / LEDGER_FILE)
    led.record("d", "a", "r", "before")
    with open(led.path, "a") as fh:
        fh.write('{"digest": "d", "prog')
    led.record("d", "b", "r", "after")
    assert [e["program"] for e in led.entries()] == ["a", "b"]


def _append_many(path, worker):
    led = TestLedger(path)
    for k in range(25):
        led.record("d", f"p{worker}-{k}", f"run{worker}", "after")


def test_concurrent_writers_append_whole_lines(tmp_path):
    path = tmp_path / LEDGER_FILE
    procs = [mp.get_context("fork").Process(target=_append_many, args=(path, w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    lines = path.read_text().splitlines()
    assert len(lines) == 100 and all(json.loads(x)["digest"] == "d" for x in lines)


def test_program_hash_follows_instructions_and_demos():
    a = BashGenerator()
    assert program_hash(a) == program_hash(a.deepcopy()) == program_hash(BashGenerator())
    b = a.deepcopy()
    name, pred = b.named_predictors()[0]
    pred.signature = pred.signature.with_instructions("Always answer with printf.")
    assert program_hash(b) != program_hash(a)
    c = a.deepcopy()
    c.named_predictors()[0][1].demos = [dspy.Example(task="t", command="printf hi")]
    assert program_hash(c) != program_hash(a)
    assert program_hash("judge prompt") != program_hash("judge prompt.")


def test_ledger_lives_in_the_workdir_of_a_run_dir(tmp_path):
    assert ledger_for_run_dir(tmp_path / "wd" / "runs" / "exp-1").path == tmp_path / "wd" / LEDGER_FILE
    assert ledger_for_run_dir(tmp_path / "mine").path == tmp_path / LEDGER_FILE


class Exact:
    name = "exact"

    def verify(self, item, candidate):
        ok = (candidate or "").strip() == item.gold["command"]
        return Verdict(1.0 if ok else 0.0, ok, "PASS" if ok else "OUTPUT")


class Rewriter:
    """An engine that sets fixed instructions (one program per instruction text)."""

    name = "rewriter"

    def __init__(self, text):
        self.text = text

    def compile(self, program, metric, trainset, valset, budget, ctx):
        for _, p in program.named_predictors():
            p.signature = p.signature.with_instructions(self.text)
        return EngineResult(program)


def test_optimize_records_test_evaluations_and_reports_adaptive_reuse(tmp_path):
    items = [Item(id=f"i{k}", inputs={"task": f"say hi #{k}"}, gold={"command": "printf hi"}) for k in range(12)]
    manifest = make_splits(items, seed=0)
    lm = scripted_lm(lambda m: json_answer(command="printf hi"))

    def run(name, text):
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            return optimize(BashGenerator(), Scorer(Exact(), "command"), items, manifest, Rewriter(text), Budget(),
                            EngineContext(tmp_path / "wd" / "runs" / name), progress=False).report

    first = run("one", "Answer with printf.")
    assert first["test_reuse"] == {"digest": manifest.digest, "other_programs": 0, "evaluations": 2, "message": ""}
    second = run("two", "Answer with printf, always.")
    tr = second["test_reuse"]
    assert tr["other_programs"] == 1 and tr["evaluations"] == 4, "the first run's optimized program"
    assert f"test split {manifest.digest} was already scored for 1 other program(s)" in tr["message"]
    entries = TestLedger(tmp_path / "wd" / LEDGER_FILE).entries()
    assert [e["what"] for e in entries] == ["before", "after", "before", "after"]
    assert {e["digest"] for e in entries} == {manifest.digest}
