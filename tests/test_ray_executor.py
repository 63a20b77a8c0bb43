"""Verifier calls on a Ray cluster: a local head plus two worker nodes on 127.0.0.1, started once
for the module and stopped by the process sessions this module created.

Under Ray the same scripted-LM experiment gives the same per-item verdicts and report as under
threads; each worker builds its verifier once; a worker killed mid-item is restarted and the item
retried (its verdict is the thread run's), and an item that kills its worker every time is a
verifier ERROR, counted apart, never FAIL.
"""
import json
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

import dspy
import pytest

import verifirst as vf
from verifirst import api
from verifirst import config, experiment
from verifirst.lm import Models
from verifirst.lm.testing import json_answer, scripted_lm
from verifirst.verifiers.exact import ExactMatch

QUIET = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_DISABLE_IMPORT_WARNING": "1"}


@pytest.fixture(scope="module")
def cluster():
    """The address of a head (1 CPU) plus two worker nodes (1 CPU each), all on 127.0.0.1, in a
    temporary directory of their own; `Cluster.shutdown` stops exactly the processes it started."""
    import ray
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    tmp = tempfile.mkdtemp(prefix="vfrt", dir="/tmp")  # short: Ray's socket paths must fit
    os.chmod(tmp, 0o755)  # the sandbox may run as an unprivileged uid
    os.makedirs(f"{tmp}/ray")
    mp = pytest.MonkeyPatch()
    for k, v in dict(QUIET, RAY_TMPDIR=tmp).items():
        mp.setenv(k, v)
    # loopback for every node and this driver (Ray would otherwise pick the host's address)
    mp.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
    node = {"num_cpus": 1, "node_ip_address": "127.0.0.1"}
    t0 = time.time()
    c = Cluster(initialize_head=True, head_node_args=dict(node, include_dashboard=False, temp_dir=f"{tmp}/ray"))
    try:
        for _ in range(2):
            c.add_node(wait=False, **node)
        c.wait_for_nodes()
        print(f"ray cluster (head + 2 workers) up in {time.time() - t0:.1f} s", file=sys.stderr)
        yield c.address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()
        mp.undo()
        shutil.rmtree(tmp, ignore_errors=True)


# -- the same scripted-LM experiment under threads and under Ray ---------------------------------

def task_fn(messages):
    """The gold command for half the tasks, all of them once the instructions carry the rule."""
    from verifirst.benchmarks.bash_pack import load_bash_pack

    golds = [(it.inputs["task"], it.gold["command"]) for it in load_bash_pack().items]
    k, gold = next((k, g) for k, (t, g) in enumerate(golds) if t in messages[-1]["content"])
    ruled = "Always answer with the reference." in messages[0]["content"]
    return json_answer(command=gold if ruled or k % 2 == 0 else "echo hi")


def models():
    return Models(task=scripted_lm(task_fn, name="t1"),
                  reflection=scripted_lm(lambda m: json_answer(new_instruction="Always answer with the reference."),
                                         role="reflection", name="r1"))


def exp_cfg(tmp_path, executor: str, address: str | None = None):
    ex = {"name": "t-ray", "workdir": str(tmp_path / executor), "seed": 0, "threads": 2, "executor": executor}
    if address:
        ex["ray_address"] = address
    return config.from_dict({
        "experiment": ex, "suite": {"name": "bash-builtin", "limit": 8}, "program": {"name": "bash-generator"},
        "verifier": {"name": "exact"}, "splits": {"ratios": [0.5, 0.25, 0.25]},
        "optimizer": {"name": "gepa", "max_metric_calls": 12}, "models": {"task": "local"},
        "tracking": {"enabled": False}})


# what differs between two runs of one experiment anyway: times, places, and the process's usage so far
TIMINGS = {"wall_s", "run_dir", "run_id", "tracking_uri", "usage", "log_dir"}


def _without_timings(x):
    if isinstance(x, dict):
        return {k: _without_timings(v) for k, v in x.items() if k not in TIMINGS}
    if isinstance(x, list):
        return [_without_timings(v) for v in x]
    return x


def _rows(run_dir: Path) -> dict:
    out = {}
    for f in sorted((run_dir / "eval").glob("*.jsonl")):
        rows = [json.loads(line) for line in f.read_text().splitlines()]
        out[f.stem] = {r["id"]: _without_timings(r) for r in rows}
    return out


def test_ray_experiment_equals_the_thread_experiment(tmp_path, cluster):
    runs = {}
    for ex in ("thread", "ray"):
        exp = exp_cfg(tmp_path, ex, cluster if ex == "ray" else None)
        assert isinstance(experiment.make_executor(exp), vf.Ray if ex == "ray" else vf.Threads)
        runs[ex] = api.run(exp, run_dir=tmp_path / f"run-{ex}", progress=False, models=models(), echo=lambda m: None)
    rows = {ex: _rows(out.run_dir) for ex, out in runs.items()}
    assert set(rows["thread"]) == {f"{p}_{s}" for p in ("before", "after") for s in ("train", "val", "test")}
    assert rows["ray"] == rows["thread"]
    verdicts = [r["status"] for split in rows["ray"].values() for r in split.values()]
    assert "PASS" in verdicts and "FAIL" in verdicts  # the optimizer's printf rule changes verdicts
    rep = {ex: _without_timings(out.report) for ex, out in runs.items()}
    assert rep["ray"]["details"]["metric"]["calls"] > 0  # GEPA's metric calls went through the executor
    for k in set(rep["ray"]["details"]) | set(rep["thread"]["details"]):
        assert rep["ray"]["details"].get(k) == rep["thread"]["details"].get(k), k
    assert rep["ray"] == rep["thread"]


# -- verifiers that show where they ran and die on marked items ----------------------------------

class LoggedExact(ExactMatch):
    """Exact match that appends `build PID` once per construction and `ITEM PID` per call."""

    def __init__(self, log: str):
        super().__init__("answer")
        self.log = log
        self._write("build")

    def _write(self, what: str) -> None:
        with open(self.log, "a") as fh:
            fh.write(f"{what} {os.getpid()}\n")

    def verify(self, item, candidate):
        self._write(item.id)
        return super().verify(item, candidate)


class Dying(ExactMatch):
    """Exact match whose process dies on `once` the first time (a marker file says it did) and on
    `always` every time; `armed=False` for the thread run in the test's own process."""

    def __init__(self, marker: str, once: str, always: str, armed: bool = True):
        super().__init__("answer")
        self.marker, self.once, self.always, self.armed = marker, once, always, armed

    def verify(self, item, candidate):
        if self.armed and item.id == self.once and not os.path.exists(self.marker):
            Path(self.marker).touch()
            os.kill(os.getpid(), signal.SIGKILL)
        if self.armed and item.id == self.always:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().verify(item, candidate)


@pytest.fixture(scope="module", autouse=True)
def _ship_this_module_by_value():
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import a test module
    yield
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


class QA(dspy.Signature):
    """Answer the question."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


def qa_records(n=8):
    return [{"id": f"q{k}", "question": f"question {k}", "answer": "42"} for k in range(n)]


def qa_lm():  # even questions right, odd ones wrong
    def answer(messages):
        k = int(re.search(r"question (\d+)", messages[-1]["content"]).group(1))
        return json_answer(answer="42" if k % 2 == 0 else "41")

    return scripted_lm(answer)


class ScoreAll(dspy.teleprompt.Teleprompter):
    """An optimizer that scores every train and val example once through its metric."""

    def __init__(self):
        super().__init__()
        self.metric = None

    def compile(self, student, *, trainset, teacher=None, valset=None, **kw):
        for ex in trainset + (valset or []):
            self.metric(ex, student(**ex.inputs()))
        return student


def test_each_worker_builds_its_verifier_once_and_metric_calls_run_there(tmp_path, cluster):
    log = tmp_path / "calls.log"
    ray_ex = vf.Ray(address=cluster, num_workers=2, verifier_factory=lambda: LoggedExact(str(log)))
    res = vf.optimize(dspy.Predict(QA), qa_records(), LoggedExact(str(tmp_path / "driver.log")), ScoreAll(),
                      models={"task": qa_lm()}, run_dir=tmp_path / "run", workdir=tmp_path, threads=2,
                      executor=ray_ex)
    lines = [line.split() for line in log.read_text().splitlines()]
    builders = [int(pid) for what, pid in lines if what == "build"]
    callers = {int(pid) for what, pid in lines if what != "build"}
    assert len(builders) == 2 and len(set(builders)) == 2 and os.getpid() not in builders
    assert callers == set(builders)  # every verify ran in a worker that built its verifier once
    m = res.manifest
    # evaluations score every item twice (before, after); the optimizer's metric, train + val once more
    n_calls = sum(what != "build" for what, _ in lines)
    assert n_calls == 2 * len(m.train + m.val + m.test) + len(m.train + m.val)
    assert res.report["details"]["metric"]["calls"] == len(m.train + m.val)
    assert res.report["splits"]["train"]["before"]["pass"] > 0
    assert not ray_ex._pools  # the driver closed the executor at the end of the run


def test_a_killed_worker_is_retried_and_one_that_keeps_dying_is_a_verifier_error(tmp_path, cluster):
    marker = tmp_path / "died-once"
    prog = dspy.Predict(QA)
    kw = dict(models={"task": qa_lm()}, workdir=tmp_path, threads=2)
    ref = vf.evaluate(prog, qa_records(), Dying(str(marker), "q3", "q6", armed=False), run_dir=tmp_path / "thread",
                      **kw)
    ray_ex = vf.Ray(address=cluster, num_workers=2, max_retries=1)
    res = vf.evaluate(prog, qa_records(), Dying(str(marker), "q3", "q6"), run_dir=tmp_path / "ray", executor=ray_ex,
                      **kw)
    assert marker.exists()  # q3's worker did die once
    a = {i: r for e in ref.before.values() for i, r in e.by_id().items()}
    b = {i: r for e in res.before.values() for i, r in e.by_id().items()}
    assert set(a) == set(b) == {f"q{k}" for k in range(8)}
    for i in a:
        if i != "q6":
            assert (b[i].status, b[i].score, b[i].stage, b[i].feedback) == \
                   (a[i].status, a[i].score, a[i].stage, a[i].feedback), i
    assert a["q3"].status == "FAIL" and a["q6"].status == "PASS"
    assert b["q6"].status == "ERROR" and b["q6"].error_kind == "verifier" and "died" in b["q6"].error
    summ = [s["before"] for s in res.report["splits"].values()]
    assert sum(x["verifier_errors"] for x in summ) == 1 and sum(x["scored"] for x in summ) == 7
    assert sum(x["pass"] for x in summ) == 3  # q0, q2, q4: the q6 that kills its worker is not a FAIL
    ckpts = [json.loads(line) for f in (tmp_path / "ray" / "eval").glob("before_*.jsonl")
             for line in f.read_text().splitlines()]
    assert sorted(r["id"] for r in ckpts) == sorted(b)  # written by the driver as rows arrived


def test_a_ray_address_nothing_answers_at_is_refused_naming_file_and_line(tmp_path):
    from verifirst.core.errors import ConfigError

    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = tmp_path / "exp.toml"
    path.write_text(
        f'[experiment]\nname = "r"\nworkdir = "{tmp_path / "wd"}"\nexecutor = "ray"\nray_address = "127.0.0.1:{port}"\n'
        '[suite]\nname = "bash-builtin"\nlimit = 4\n[program]\nname = "bash-generator"\n'
        '[verifier]\nname = "exact"\n[tracking]\nenabled = false\n')
    t0 = time.time()
    with pytest.raises(ConfigError) as e:  # the CLI prints it and exits 2
        api.run(config.load(path), progress=False, models=models(), echo=lambda m: None)
    assert f"{path}:5 [experiment.ray_address]" in str(e.value) and "no Ray cluster answers" in str(e.value)
    assert time.time() - t0 < 30  # not Ray's own minutes-long wait for a cluster
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["exp.toml"]  # nothing written


def test_a_driver_stopped_mid_run_resumes_from_its_checkpoint_losing_only_items_in_flight(tmp_path, cluster):
    from verifirst.core.data import to_suite
    from verifirst.loop.evaluation import evaluate
    from verifirst.core.metric import Metric

    items = to_suite(qa_records(), inputs=["question"]).items
    calls, seen = [], []

    def program(question):  # no LM: even questions answered right
        calls.append(question)
        return {"answer": "42" if int(question.split()[-1]) % 2 == 0 else "41"}

    def stop_at_the_sixth(item, row):  # the driver is interrupted as the sixth result arrives
        seen.append(item.id)
        if len(seen) == 6:
            raise KeyboardInterrupt

    ckpt = tmp_path / "ckpt.jsonl"
    scorer = Metric(ExactMatch("answer"), "answer")
    ray_ex = vf.Ray(address=cluster, num_workers=2)
    try:
        with pytest.raises(KeyboardInterrupt):
            evaluate(program, items, scorer, split="train", threads=2, checkpoint=ckpt, on_row=stop_at_the_sixth,
                     executor=ray_ex)
        kept = [json.loads(line)["id"] for line in ckpt.read_text().splitlines()]
        assert len(seen) - len(kept) <= 2 * 2  # lost: at most the items in flight (threads x 2 queued)
        calls.clear()
        res = evaluate(program, items, scorer, split="train", threads=2, checkpoint=ckpt, executor=ray_ex)
    finally:
        ray_ex.close()
    assert len(calls) == len(items) - len(kept)  # the resumed run redid only what the checkpoint lacked
    ref = evaluate(program, items, scorer, split="train")
    assert [(r.id, r.status, r.score, r.feedback) for r in res.rows] == \
           [(r.id, r.status, r.score, r.feedback) for r in ref.rows]


def test_a_budget_holds_under_ray_and_resumes_to_the_uncapped_rows(tmp_path, cluster):
    """LM calls stay in the driver under Ray, so its spend meter admits every one: a cap reached in
    the evaluations after GEPA sends nothing past it, keeps the test split scored, and a resume with
    a larger cap ends on the rows of an uncapped run."""
    full = api.run(exp_cfg(tmp_path / "full", "ray", cluster), run_dir=tmp_path / "full-run", progress=False,
                   models=models(), echo=lambda m: None)
    total = full.report["usage_this_run"]["lm_calls"]
    cap = total - 3
    exp = exp_cfg(tmp_path / "capped", "ray", cluster)
    capped = api.run(exp, run_dir=tmp_path / "capped-run", progress=False, models=models(), echo=lambda m: None,
                     limits={"max_lm_calls": cap})
    assert capped.report["stopped"]["by"].startswith(f"stopped by budget: max_lm_calls {cap}")
    assert capped.report["usage_this_run"]["lm_calls"] <= cap
    # GEPA finished within the cap; the evaluations after it took the test split first
    assert capped.report["stopped"]["kept"] == "the optimizer's finished result"
    assert capped.report["stopped"]["test"] == "scored" and capped.report["splits"]["test"]["after"]["n"] == 2
    again = api.run(exp, run_dir=tmp_path / "capped-run", progress=False, models=models(), echo=lambda m: None,
                    limits={"max_lm_calls": 10 * total})
    assert "stopped" not in again.report
    assert _rows(tmp_path / "capped-run") == _rows(tmp_path / "full-run")
