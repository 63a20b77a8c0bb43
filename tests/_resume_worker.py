"""One run of an experiment with scripted LMs, for the kill -9 resume tests.

    python tests/_resume_worker.py MODE RUN_DIR WORKDIR LOG

MODE: eval | gepa | simba | simba-cached | autorefine. The scripted LMs are uncached (but in
simba-cached, which uses the workdir's DSPy disk cache as a real run does), so work a resumed run
redoes shows up as LM calls: every LM call and every verifier call appends a line to LOG, so the parent can count what a resumed run redid.
The LMs are deterministic functions of the prompt, so an interrupted-then-resumed run and an
uninterrupted one must end with the same report.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")

LATENCY_S = float(os.environ.get("RESUME_LATENCY_S", "0.03"))
STEP = "Step."


def log(kind: str) -> None:
    path = os.environ.get("RESUME_LOG")
    if path:
        with open(path, "a") as fh:  # one short line per event: appends of this size are atomic
            fh.write(kind + "\n")


def difficulty(text: str) -> int:
    return 1 + int(hashlib.sha256(text.encode()).hexdigest(), 16) % 3


_sampling = threading.local()


def task_fn(messages):
    """Answers `ok` once the instruction has climbed to the item's difficulty; some sampled
    rollouts (SIMBA's) reach one step further, a deterministic function of rollout and item."""
    from verifirst.lm.testing import json_answer

    log("lm task")
    user = [m["content"] for m in messages if m["role"] == "user"][-1]
    rollout = getattr(_sampling, "rollout", None)
    lucky = rollout is not None and (rollout + difficulty(user)) % 2 == 0
    level = messages[0]["content"].count(STEP) + lucky
    return json_answer(command="ok" if level >= difficulty(user) else "no")


def reflection_fn(messages):
    """GEPA: one more step than the instruction it is shown. SIMBA: advice that adds a step."""
    from verifirst.lm.testing import json_answer

    log("lm reflection")
    text = "\n".join(m["content"] for m in messages)
    level = text.count(STEP)
    if "module_advice" in messages[0]["content"]:
        return json_answer(discussion="the better run followed more steps",
                           module_advice={"generate": STEP, "generate.predict": STEP})
    return json_answer(new_instruction="Translate the task into one bash command. " + " ".join([STEP] * (level + 1)))


class LevelVerifier:
    """Passes `ok`; counts every call."""

    name = "level"

    def verify(self, item, candidate):
        from verifirst.verifiers.base import Verdict

        log("metric")
        ok = (candidate or "").strip() == "ok"
        return Verdict(1.0 if ok else 0.0, ok, "PASS" if ok else "OUTPUT",
                       feedback="" if ok else "the instruction needs more steps", backend=self.name)


def task_lm(cache: bool = False):
    """A scripted task LM whose answers may depend on the rollout id (SIMBA samples by rollout)."""
    from verifirst.lm import AccountedLM
    from verifirst.lm.testing import ScriptedEngine

    class RolloutLM(AccountedLM):
        def __call__(self, *args, **kwargs):
            _sampling.rollout = self.kwargs.get("rollout_id")
            return super().__call__(*args, **kwargs)

    return RolloutLM("local/resume-task", role="task", spec="resume-task", engine=ScriptedEngine(task_fn, LATENCY_S),
                     cache=cache, num_retries=0)


def experiment_config(mode: str, workdir: Path) -> dict:
    optimizer = {"eval": {"name": "none"},
                 "gepa": {"name": "gepa", "max_metric_calls": 45},
                 "simba": {"name": "simba", "max_iters": 2,
                           "options": {"bsize": 4, "num_candidates": 2, "max_demos": 1}}}
    optimizer["simba-cached"] = optimizer["simba"]
    optimizer = optimizer[mode]
    return {
        "experiment": {"name": f"resume-{mode}", "workdir": str(workdir), "seed": 0, "threads": 1},
        "suite": {"name": "bash-builtin", "limit": 24 if mode == "eval" else 16},
        "program": {"name": "bash-generator"},
        "verifier": {"name": "_resume_worker:LevelVerifier"},
        "splits": {"ratios": [0.5, 0.25, 0.25]},
        "optimizer": optimizer,
        "models": {"task": "local"},  # replaced by the scripted models below
        "tracking": {"enabled": False},
    }


def run_experiment(mode: str, run_dir: Path, workdir: Path) -> dict:
    from verifirst import api, config, experiment
    from verifirst.report import html as html_report
    from verifirst.lm import Models
    from verifirst.lm.testing import scripted_lm

    # the plots of the HTML report take seconds of CPU and play no part in resuming
    html_report.write_html = lambda *a, **k: None
    exp = config.from_dict(experiment_config(mode, workdir))
    cached = mode == "simba-cached"
    models = Models(task=task_lm(cache=cached),
                    reflection=scripted_lm(reflection_fn, role="reflection", latency_s=LATENCY_S,
                                           name="resume-refl", cache=cached))
    out = api.run(exp, run_dir=run_dir, progress=False, models=models, echo=lambda m: None)
    rep = out.report
    return {"splits": {s: {"before": v["before"]["pass"], "after": v["after"]["pass"],
                           "n": v["after"]["n"], "errors": v["after"]["errors"]}
                       for s, v in rep["splits"].items()},
            "instructions": rep["instructions"], "history": rep["history"]}


def run_autorefine(run_dir: Path, workdir: Path) -> dict:
    """The AutoRefine loop with the rule-following LM of its own tests (judge, teacher, proposer
    and applier roles), slowed down and counted."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_autorefine import RuleFollowingLM, make_world

    from verifirst.lm import configure_cache
    from verifirst.judge.autorefine import refine_judge
    from verifirst.judge.programs import PassFailJudge
    from verifirst.loop.splits import make_splits

    import time

    class SlowCountedLM(RuleFollowingLM):
        def respond(self, system, user):
            time.sleep(LATENCY_S)
            log(f"lm {self.role(system)}")
            return super().respond(system, user)

    configure_cache(workdir / "cache")
    suite = make_world(n_groups=12)
    manifest = make_splits(suite.items, group="group", seed=1)
    train, val = manifest.select(suite.items, "train"), manifest.select(suite.items, "val")
    lm = SlowCountedLM()
    judge = PassFailJudge(["task", "code"])
    import dspy

    with dspy.context(lm=lm):
        res = refine_judge(judge, train, val, teacher_lm=lm, proposer_lm=lm, judge_lm=lm, max_iters=4,
                        run_dir=run_dir)
    return {"prompt": res.prompt, "selected_iteration": res.selected_iteration,
            "iterations": len(res.iterations), "stop_reason": res.stop_reason,
            "val_pi": [it["val_pi"] for it in res.iterations]}


def main(argv: list[str]) -> int:
    mode, run_dir, workdir, logfile = argv[0], Path(argv[1]), Path(argv[2]), argv[3]
    os.environ["RESUME_LOG"] = logfile
    result = run_autorefine(run_dir, workdir) if mode == "autorefine" else run_experiment(mode, run_dir, workdir)
    (run_dir / "worker_result.json").write_text(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
