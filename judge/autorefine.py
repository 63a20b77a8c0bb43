"""AutoRefine (S2): calibrate a judge prompt on workflow outcomes with an informed teacher.

1. The teacher reviews each training sample once (KEEP / CORRECT / SKIP); skipped samples
   leave calibration and disagreement analysis.
2. Each iteration runs the current prompt on the kept training samples, scores agreement
   with Scott's pi, turns every disagreement into balanced edits and rewrites the prompt
   under a length cap; rubric judges get their threshold chosen on train.
3. The uncurated validation split selects the final prompt (iteration 0, the starting
   prompt, is a candidate too). Stops at target pi, no disagreements, or max iterations.

Every step is checkpointed atomically into the run dir; a second call with the same run
dir continues where the first stopped, losing at most the iteration in flight.

As an engine (`AutoRefineEngine`) it runs inside the one driver, which scores the judge before
and after on every split; `judge_report` turns those evaluations into the report's `judge`
section (π against the uncalibrated judge, FAIL/PASS recall, McNemar, the teacher's decisions).
"""
from __future__ import annotations

import hashlib
import json
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import dspy

from verifirst.core import atomic
from verifirst.core.errors import ErrorRateExceeded, InputError, VerifirstError
from verifirst.judge.programs import JudgeError, RubricJudge
from verifirst.core.stats import judge_pi, paired_bootstrap, scotts_pi
from verifirst.core.task import ITEM_ID, Item
from verifirst.core.verdicts import FAIL, PASS, normalize_label

from verifirst.judge.edits import Disagreement, EditApplier, EditProposer, EditRound, balance, dedupe
from verifirst.judge.failfast import FIRST_CALLS_ALL_FAILED, not_sent
from verifirst.judge.pool import Pool, Threads, as_pool
from verifirst.judge.teacher import SKIP, InformedTeacher, TeacherDecision, abstention_stats, run_teacher
from verifirst.lm.spend import refused
from verifirst.core.engine import Budget, EngineContext, EngineResult

STATE_FILE = "autorefine_state.json"
STATE_VERSION = 1
DEFAULT_LENGTH_CAP = 4000
DEFAULT_TARGET_PI = 0.9
MAX_ERROR_RATE = 0.5  # more LM errors than this on a pass stops the run (checkpoint kept)


class CalibrationMismatch(VerifirstError):
    """The run dir holds a checkpoint of a different calibration."""


# -- running a judge ---------------------------------------------------------------------
def run_judge(judge, items: Sequence[Item], lm=None, threads: Threads = 1,
              fail_fast: bool = False, on_item: Callable[[Item, dict], None] | None = None) -> dict[str, dict]:
    """Per-item {verdict, reasoning, score, error}; an LM error leaves verdict None.

    Args:
        judge: the judge program.
        items: the items it judges.
        lm: its LM (None: the configured one).
        threads: judge calls in parallel (the run's Pool, or a count).
        fail_fast: stop asking once the first FIRST_CALLS_ALL_FAILED calls all failed and none
            succeeded (an endpoint that is down): the items not asked get verdict None and an error
            saying so, so a dead endpoint costs a handful of requests, not one per record.
        on_item: told each item and its row as it is judged, in the thread that judged it (progress).
    """

    def one(it: Item) -> tuple[str, dict]:
        try:
            with dspy.context(lm=lm) if lm is not None else nullcontext():
                out = judge(**it.inputs)
            row = {"verdict": out.verdict, "reasoning": out.reasoning, "score": getattr(out, "score", None),
                   "error": None}
        except JudgeError as e:
            row = {"verdict": None, "reasoning": "", "score": None, "error": str(e)}
        if on_item is not None:
            on_item(it, row)
        return it.id, row

    pool = as_pool(threads)
    if not fail_fast:
        return dict(pool.map(one, items))
    out: dict[str, dict] = {}
    items, k, step = list(items), 0, pool.threads
    while k < len(items):
        batch = items[k:k + step]  # a batch at a time: at most threads - 1 calls past the rule
        out.update(pool.map(one, batch))  # one thread: in this one, as without fail_fast (its dspy context)
        k += len(batch)
        done = list(out.values())
        if len(done) >= FIRST_CALLS_ALL_FAILED and not any(r["error"] is None for r in done):
            why = not_sent(next(r["error"] for r in done), len(done))
            out.update((it.id, {"verdict": None, "reasoning": "", "score": None, "error": why}) for it in items[k:])
            break
    return {it.id: out[it.id] for it in items}


def _guard_errors(errors: list[str], n: int, what: str, max_rate: float = MAX_ERROR_RATE) -> None:
    if n and len(errors) / n > max_rate:
        raise ErrorRateExceeded(f"{len(errors)} of {n} {what} calls failed (limit {max_rate:.0%}); "
                                f"first error: {errors[0]}")


def verdicts_at(run: dict[str, dict], threshold: float | None) -> dict[str, str | None]:
    """Verdicts from a run; for a rubric run at a given threshold on its scores."""
    if threshold is None:
        return {k: v["verdict"] for k, v in run.items()}
    return {k: (None if v["score"] is None else PASS if v["score"] >= threshold else FAIL)
            for k, v in run.items()}


def agreement(labels: dict[str, str], verdicts: dict[str, str | None]) -> dict:
    ids = [i for i in labels if verdicts.get(i) is not None]
    if not ids:
        return {"pi": None, "n": 0, "errors": len(labels)}
    return {"pi": scotts_pi([labels[i] for i in ids], [verdicts[i] for i in ids]), "n": len(ids),
            "errors": len(labels) - len(ids)}


def choose_threshold(run: dict[str, dict], labels: dict[str, str], default: float = 0.5) -> float:
    """The score threshold maximizing Scott's pi on these labels (ties: nearest the default)."""
    scores = sorted({v["score"] for i, v in run.items() if i in labels and v["score"] is not None})
    if not scores:
        return default
    cands = {default, scores[0] - 1e-9, scores[-1] + 1e-9}
    cands.update((a + b) / 2 for a, b in zip(scores, scores[1:]))
    best = max(sorted(cands), key=lambda t: ((agreement(labels, verdicts_at(run, t))["pi"] or -2.0),
                                             -abs(t - default)))
    return float(best)


# -- state ---------------------------------------------------------------------------------
@dataclass
class CalibrationResult:
    prompt: str
    threshold: float | None
    selected_iteration: int
    iterations: list[dict]
    teacher: dict[str, TeacherDecision]
    teacher_stats: dict
    stop_reason: str
    judge: Any = None
    initial_prompt: str = ""
    initial_threshold: float | None = None  # train-chosen threshold of the starting prompt
    default_threshold: float | None = None
    review_queue: list[dict] = field(default_factory=list)
    noise: dict | None = None

    def summary(self) -> dict:
        return {"selected_iteration": self.selected_iteration, "stop_reason": self.stop_reason,
                "threshold": self.threshold, "initial_threshold": self.initial_threshold,
                "iterations": [{k: v for k, v in it.items() if k not in ("disagreements", "train_run",
                                                                          "val_run", "val_repeat_verdicts")}
                               for it in self.iterations],
                "teacher": self.teacher_stats, "calibrated_prompt": self.prompt,
                "review_queue": self.review_queue, "noise": self.noise}


def _fingerprint(judge, train: Sequence[Item], val: Sequence[Item], use_teacher: bool) -> str:
    body = json.dumps({"kind": getattr(judge, "kind", type(judge).__name__), "prompt": judge.prompt,
                       "fields": list(getattr(judge, "view_fields", [])),
                       "train": [(i.id, i.gold["label"]) for i in train],
                       "val": [(i.id, i.gold["label"]) for i in val], "teacher": use_teacher},
                      sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


class _Checkpoint:
    def __init__(self, run_dir: Path | None, fingerprint: str):
        self.path = Path(run_dir) / STATE_FILE if run_dir else None
        self.state: dict = {"version": STATE_VERSION, "fingerprint": fingerprint, "teacher": {},
                            "teacher_done": False, "iterations": [], "done": False, "stop_reason": None}
        if self.path and self.path.exists():
            try:
                old = json.loads(self.path.read_text())
            except json.JSONDecodeError as e:
                raise InputError(f"checkpoint is not valid JSON: {e.msg}", path=str(self.path),
                                 line=e.lineno, expected="a file written by autorefine") from None
            if old.get("fingerprint") != fingerprint:
                raise CalibrationMismatch(
                    f"{self.path} is a checkpoint of another calibration (fingerprint "
                    f"{old.get('fingerprint')} != {fingerprint}); use a fresh run dir")
            self.state = old

    @property
    def resumed(self) -> bool:
        return bool(self.state["iterations"] or self.state["teacher"])

    def save(self) -> None:
        if self.path:
            atomic.write_json(self.path, self.state, indent=None)


# -- the loop ------------------------------------------------------------------------------
def _sampling_lm(judge_lm, temperature: float, rollout: int):
    """The judge LM sampling at `temperature`, its answers cached apart per repeat (rollout id)."""
    lm = judge_lm if judge_lm is not None else dspy.settings.lm
    return lm.copy(temperature=temperature, rollout_id=rollout)


def repeat_stats(labels: dict[str, str], runs: Sequence[dict[str, str | None]]) -> dict:
    """π over K repeated judge runs (mean, sd, min, max) and each item's flip rate.

    An item's flip rate is the share of its verdicts that differ from its most frequent verdict
    (0: the judge always answers the same; LM errors are left out of the item's verdicts).

    Args:
        labels: item id -> PASS/FAIL.
        runs: one {item id: verdict or None} per repeat.
    """
    pis = [agreement(labels, r)["pi"] for r in runs]
    got = [p for p in pis if p is not None]
    mean = sum(got) / len(got) if got else None
    sd = (sum((p - mean) ** 2 for p in got) / (len(got) - 1)) ** 0.5 if len(got) > 1 else 0.0
    flips, majority = {}, {}
    for i in labels:
        vs = [r.get(i) for r in runs if r.get(i) is not None]
        if not vs:
            continue
        top = max((PASS, FAIL), key=lambda v: (vs.count(v), v == labels[i]))
        majority[i] = top
        flips[i] = round(sum(v != top for v in vs) / len(vs), 4)
    return {"repeats": len(runs), "pi": pis, "pi_mean": mean, "pi_sd": sd,
            "pi_min": min(got) if got else None, "pi_max": max(got) if got else None,
            "flip_rate": flips, "mean_flip_rate": sum(flips.values()) / len(flips) if flips else None,
            "items_flipping": sum(1 for v in flips.values() if v > 0), "majority": majority}


def _evaluate(judge, prompt: str, train_ids: list[str], train_labels: dict, val_items: Sequence[Item],
              items_by_id: dict, judge_lm, threads: Threads, default_threshold: float | None,
              repeats: int = 1, temperature: float = 0.7) -> dict:
    cand = judge.copy_with_prompt(prompt)
    train_run = run_judge(cand, [items_by_id[i] for i in train_ids], judge_lm, threads)
    _guard_errors([v["error"] for v in train_run.values() if v["error"]], len(train_run), "judge")
    threshold = None
    if isinstance(cand, RubricJudge) or getattr(cand, "calibrates_threshold", False):  # rating judges too
        threshold = choose_threshold(train_run, train_labels, default_threshold)
    tv = verdicts_at(train_run, threshold)
    val_run = run_judge(cand, val_items, judge_lm, threads)
    val_labels = {it.id: it.gold["label"] for it in val_items}
    vv = verdicts_at(val_run, threshold)
    tr, va = agreement(train_labels, tv), agreement(val_labels, vv)
    disagreements = [i for i in train_ids if tv.get(i) is not None and tv[i] != train_labels[i]]
    out = {"prompt": prompt, "threshold": threshold, "train_pi": tr["pi"], "train_n": tr["n"],
           "train_errors": tr["errors"], "val_pi": va["pi"], "val_n": va["n"], "val_errors": va["errors"],
           "n_disagreements": len(disagreements), "disagreements": disagreements,
           "prompt_chars": len(prompt), "train_run": train_run, "val_run": val_run}
    if repeats > 1:
        # the judge's own noise on validation: K sampled runs; the edit must beat it to be kept
        runs = [verdicts_at(run_judge(cand, val_items, _sampling_lm(judge_lm, temperature, r), threads),
                            threshold) for r in range(1, repeats + 1)]
        stats = repeat_stats(val_labels, runs)
        out.update({"val_repeat_verdicts": runs, "val_pi_first": va["pi"], "val_pi": stats["pi_mean"],
                    "val_noise": {k: v for k, v in stats.items() if k != "majority"}})
    return out


def _select(iterations: list[dict], val_labels: dict[str, str] | None = None) -> dict:
    """Best validation π; ties go to the earlier (shorter-lived) prompt.

    With repeated runs (`val_noise`), a later prompt replaces the current best only when its mean
    validation π is higher by more than the repeat noise (the larger of the two π sds over repeats)
    or the paired bootstrap interval of Δπ (majority verdicts, same items) excludes zero; each
    iteration records whether it was accepted.
    """
    def pi(it):
        return it["val_pi"] if it["val_pi"] is not None else -2.0

    best = iterations[0]
    for it in iterations[1:]:
        if it.get("val_noise") and best.get("val_noise") and val_labels:
            delta = pi(it) - pi(best)
            noise = max(it["val_noise"]["pi_sd"], best["val_noise"]["pi_sd"])
            ci = _paired_majority_ci(val_labels, best, it)
            it["acceptance"] = {"delta": delta, "noise": noise, "paired_ci95": ci,
                                "against_iteration": best["iteration"],
                                "accepted": delta > noise or (ci is not None and ci[0] > 0)}
            if it["acceptance"]["accepted"]:
                best = it
        elif pi(it) > pi(best):
            best = it
    return best


def _paired_majority_ci(labels: dict[str, str], a: dict, b: dict) -> list[float] | None:
    ma = repeat_stats(labels, a["val_repeat_verdicts"])["majority"]
    mb = repeat_stats(labels, b["val_repeat_verdicts"])["majority"]
    ids = [i for i in labels if i in ma and i in mb]
    if len(ids) < 2:
        return None
    boot = paired_bootstrap(judge_pi, [ma[i] for i in ids], [mb[i] for i in ids], [labels[i] for i in ids],
                            n=1000, seed=0)
    return [boot.lo, boot.hi]


def refine_judge(judge, train_items: Sequence[Item], val_items: Sequence[Item], teacher_lm=None,
              proposer_lm=None, max_iters: int = 5, target_pi: float = DEFAULT_TARGET_PI,
              length_cap: int = DEFAULT_LENGTH_CAP, *, judge_lm=None, run_dir: str | Path | None = None,
              use_teacher: bool = True, teacher: InformedTeacher | None = None, batch_size: int = 6,
              threads: Threads = 1, meta_fields: Sequence[str] | None = None,
              log_metrics: Callable[[dict, int], None] | None = None, repeats: int = 1,
              temperature: float = 0.7) -> CalibrationResult:
    """Run the AutoRefine loop; returns the selected prompt (and threshold for rubric judges).

    `use_teacher=False` calibrates on the labels directly (trustworthy labels, S2 §III).
    `repeats` > 1 also runs the judge that many times per validation item at `temperature`: the
    result reports π's spread and each item's flip rate, and an edit is kept only when validation π
    improves by more than that noise (or its paired interval excludes zero).
    The result's review_queue lists the train/validation items the final judge still gets wrong and
    the teacher's abstentions, with the judge's reasoning beside the teacher's justification.
    """
    if not hasattr(judge, "prompt") or not hasattr(judge, "copy_with_prompt"):
        raise TypeError("refine_judge needs a judge with a settable `prompt` and `copy_with_prompt`")
    if len(judge.prompt) > length_cap:
        raise InputError(f"starting prompt has {len(judge.prompt)} chars, over the length cap {length_cap}",
                         field="length_cap", expected="a cap at least as long as the starting prompt")
    if not train_items or not val_items:
        raise InputError("calibration needs non-empty train and validation splits", field="splits")
    view_fields = list(judge.view_fields)
    for it in list(train_items) + list(val_items):
        if it.gold.get("label") not in (PASS, FAIL):
            raise InputError(f"item {it.id} has label {it.gold.get('label')!r}", field="label",
                             expected="PASS or FAIL")
    fp = _fingerprint(judge, train_items, val_items, use_teacher)
    if repeats > 1:  # a repeated-run calibration is another calibration (its checkpoint holds the repeats)
        fp = hashlib.sha256(f"{fp}|repeats={repeats}|t={temperature}".encode()).hexdigest()[:16]
    ck = _Checkpoint(Path(run_dir) if run_dir else None, fp)
    st = ck.state
    log = log_metrics or (lambda m, s: None)
    items_by_id = {it.id: it for it in list(train_items) + list(val_items)}
    default_threshold = getattr(judge, "threshold", None)

    # 1. teacher pass (once; partial progress checkpointed)
    if use_teacher:
        teacher = teacher or InformedTeacher(view_fields)
        if not st["teacher_done"]:
            done = {k: TeacherDecision(**v) for k, v in st["teacher"].items()}

            def progress(res):
                st["teacher"] = {k: v.to_dict() for k, v in res.items()}
                ck.save()

            run_teacher(teacher, train_items, teacher_lm, threads, done, progress)
            if refused() is not None:  # the teacher pass did not finish: no iteration can be kept
                raise refused()
            st["teacher_done"] = True
            ck.save()
        decisions = {k: TeacherDecision(**v) for k, v in st["teacher"].items()}
        _guard_errors([d.error for d in decisions.values() if d.error], len(decisions), "teacher")
    else:
        decisions = {it.id: TeacherDecision(it.id, it.gold["label"], "KEEP", it.gold["label"],
                                            "labels used directly") for it in train_items}
    kept_ids = [it.id for it in train_items if decisions[it.id].kept]
    train_labels = {i: decisions[i].final_label for i in kept_ids}
    tstats = abstention_stats(train_items, decisions, meta_fields) if use_teacher else {}
    if not kept_ids:
        raise VerifirstError("the teacher set aside every training sample: the judge's view cannot "
                             "explain these outcomes (it needs better inputs, not a better prompt)")

    proposer, applier = EditProposer(batch_size), EditApplier()
    iters: list[dict] = st["iterations"]

    def record(entry: dict) -> None:
        if refused() is not None:  # a call of this iteration was refused by the budget: it is not kept
            raise _BudgetStop
        iters.append(entry)
        ck.save()
        log({k: entry[k] for k in ("train_pi", "val_pi", "n_disagreements", "prompt_chars")
             if entry.get(k) is not None}, entry["iteration"])

    try:
        if not iters:
            e0 = _evaluate(judge, judge.prompt, kept_ids, train_labels, val_items, items_by_id, judge_lm,
                           threads, default_threshold, repeats, temperature)
            record({"iteration": 0, **e0, "edits": None})

        while not st["done"]:
            cur = iters[-1]
            reason = None
            if cur["train_pi"] is not None and cur["train_pi"] >= target_pi:
                reason = "target_pi"
            elif cur["n_disagreements"] == 0:
                reason = "no_disagreements"
            elif cur["iteration"] >= max_iters:
                reason = "max_iters"
            if reason:
                st["done"], st["stop_reason"] = True, reason
                ck.save()
                break
            rnd = EditRound()
            dis = [Disagreement(i, dict(items_by_id[i].inputs), train_labels[i], cur["train_run"][i]["verdict"],
                                cur["train_run"][i]["reasoning"], decisions[i].justification)
                   for i in cur["disagreements"]]
            with dspy.context(lm=proposer_lm) if proposer_lm is not None else nullcontext():
                proposed = dedupe(proposer(cur["prompt"], dis, rnd), cur["prompt"])
                kept, dropped = balance(proposed)
                rnd.proposed = [e.to_dict() for e in proposed]
                rnd.kept = [e.to_dict() for e in kept]
                rnd.dropped_unbalanced = [e.to_dict() for e in dropped]
                new_prompt = (applier(cur["prompt"], kept, length_cap, rnd, needs_checks=isinstance(judge, RubricJudge),
                                      variables=getattr(judge, "template_variables", ())) if kept else cur["prompt"])
                if not kept:
                    rnd.applier = "unchanged"
            entry = {"iteration": cur["iteration"] + 1, "edits": rnd.to_dict()}
            if new_prompt == cur["prompt"]:
                # nothing usable was proposed: evaluating the same prompt again would change nothing
                record({**{k: v for k, v in cur.items() if k not in ("iteration", "edits")}, **entry})
                st["done"], st["stop_reason"] = True, "no_usable_edits"
                ck.save()
                break
            ev = _evaluate(judge, new_prompt, kept_ids, train_labels, val_items, items_by_id, judge_lm,
                           threads, default_threshold, repeats, temperature)
            record({**entry, **ev})
    except Exception:  # the budget stops at the last completed iteration; the one in flight is not kept
        if refused() is None:
            raise
        if not iters:
            raise refused() from None
        st["stop_reason"] = "budget"

    val_labels = {it.id: it.gold["label"] for it in val_items}
    best = _select(iters, val_labels)
    calibrated = judge.copy_with_prompt(best["prompt"])
    if (isinstance(calibrated, RubricJudge) or getattr(calibrated, "calibrates_threshold", False)) \
            and best["threshold"] is not None:
        calibrated.threshold = best["threshold"]
    if st["stop_reason"] == "budget":
        queue = []  # its judge calls would be refused: no review queue for a stopped run
    else:
        if st.get("review_queue") is None:  # once per calibration: a finished run resumed calls nothing
            st["review_queue"] = review_queue(best, decisions, train_labels, val_labels, items_by_id,
                                              [it for it in train_items if decisions[it.id].decision == SKIP],
                                              calibrated, judge_lm, threads)
            ck.save()
        queue = st["review_queue"]
    noise = None
    if repeats > 1:
        noise = {"repeats": repeats, "temperature": temperature,
                 "initial": iters[0].get("val_noise"), "selected": best.get("val_noise"),
                 "acceptance": [{"iteration": it["iteration"], **it["acceptance"]}
                                for it in iters if it.get("acceptance")]}
    return CalibrationResult(prompt=best["prompt"], threshold=best["threshold"],
                             selected_iteration=best["iteration"], iterations=iters, teacher=decisions,
                             teacher_stats=tstats, stop_reason=st["stop_reason"], judge=calibrated,
                             initial_prompt=iters[0]["prompt"], initial_threshold=iters[0]["threshold"],
                             default_threshold=default_threshold, review_queue=queue, noise=noise)


class _BudgetStop(Exception):
    """A call of the iteration in flight was refused by the run's budget."""


def review_queue(best: dict, decisions: dict[str, TeacherDecision], train_labels: dict[str, str],
                 val_labels: dict[str, str], items_by_id: dict[str, Item], abstained: Sequence[Item], judge,
                 judge_lm, threads: Threads = 1) -> list[dict]:
    """What a human should look at: disagreements the loop could not fix and the teacher's abstentions.

    Train and validation only (the test split stays held out). A train disagreement is against the
    label the loop calibrated on (the teacher's); each row carries the recorded label, the final
    judge's verdict and reasoning and the teacher's decision and justification. Abstained items were
    never judged by the loop: the final judge is run on them once here.

    Args:
        best: the selected iteration (its train/validation runs and threshold).
        decisions: the teacher's decisions by train item id.
        train_labels: the calibration label of each kept train item.
        val_labels: the recorded label of each validation item.
        items_by_id: every train and validation item.
        abstained: the train items the teacher set aside.
        judge: the calibrated judge.
        judge_lm: the judge's LM.
        threads: judge calls in parallel (the run's Pool, or a count).
    """
    rows = []

    def row(iid: str, split: str, reason: str, run: dict, verdict) -> dict:
        d = decisions.get(iid)
        it = items_by_id[iid]
        return {"id": iid, "split": split, "reason": reason, "label": it.gold["label"],
                "calibration_label": train_labels.get(iid) if split == "train" else it.gold["label"],
                "verdict": verdict, "judge_reasoning": run.get("reasoning") or "", "judge_error": run.get("error"),
                "teacher_decision": d.decision if d else None,
                "teacher_justification": d.justification if d else None, "view": dict(it.inputs)}

    th = best.get("threshold")
    for split, labels, run in (("train", train_labels, best["train_run"]), ("val", val_labels, best["val_run"])):
        verdicts = verdicts_at(run, th)
        for iid, lab in labels.items():
            if verdicts.get(iid) is not None and verdicts[iid] != lab:
                rows.append(row(iid, split, "disagreement", run[iid], verdicts[iid]))
    if abstained:
        run = run_judge(judge, abstained, judge_lm, threads)
        verdicts = verdicts_at(run, th)
        rows += [row(it.id, "train", "teacher_abstained", run[it.id], verdicts.get(it.id)) for it in abstained]
    return rows


# -- Engine protocol -----------------------------------------------------------------------
def _items_from_examples(examples: Sequence, label_key: str = "label") -> list[Item]:
    out = []
    for ex in examples:
        inputs = {k: ex[k] for k in ex.inputs().keys()}
        iid = str(ex[ITEM_ID]) if ITEM_ID in ex else hashlib.sha256(
            json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:12]
        raw = ex[label_key]  # an unreadable label stays as written: refine_judge refuses it by name
        out.append(Item(iid, inputs, {"label": normalize_label(raw) or str(raw).upper()}))
    return out


@dataclass
class AutoRefineEngine:
    """Engine.compile over dspy Examples (view fields as inputs, `label` PASS/FAIL)."""

    name: str = "autorefine"
    target_pi: float = DEFAULT_TARGET_PI
    length_cap: int = DEFAULT_LENGTH_CAP
    use_teacher: bool = True
    batch_size: int = 6
    repeats: int = 1
    temperature: float = 0.7
    extra: dict = field(default_factory=dict)

    def compile(self, program, metric, trainset, valset, budget: Budget, ctx: EngineContext) -> EngineResult:
        # agreement (Scott's pi) on labels is the objective; `metric` is the driver's to report
        res = refine_judge(program, _items_from_examples(trainset), _items_from_examples(valset),
                        ctx.teacher_lm, ctx.reflection_lm, judge_lm=ctx.task_lm,
                        max_iters=5 if budget.max_iters is None else budget.max_iters, target_pi=self.target_pi,
                        length_cap=self.length_cap, run_dir=ctx.run_dir, use_teacher=self.use_teacher,
                        batch_size=self.batch_size, threads=Pool(budget.num_threads),  # the loop's one pool
                        log_metrics=ctx.log_metrics, repeats=self.repeats, temperature=self.temperature)
        history = [{k: it.get(k) for k in ("iteration", "train_pi", "val_pi", "n_disagreements",
                                           "prompt_chars", "threshold")} for it in res.iterations]
        details = {**res.summary(), "teacher_used": self.use_teacher,
                   "teacher_decisions": {k: d.to_dict() for k, d in res.teacher.items()}}
        return EngineResult(program=res.judge, history=history, details=details,
                            stopped="budget" if res.stop_reason == "budget" else None)

    def check_budget(self, budget: Budget, n_train: int, n_val: int) -> None:
        """Refuse a GEPA budget (vf.optimize asks before any LM call): AutoRefine counts iterations,
        and its objective is agreement with the labels, not metric calls, so max_metric_calls or
        auto would be ignored.

        Args:
            budget: the run's budget.
            n_train, n_val: training and validation items (unused: no budget here depends on them).

        Raises:
            InputError: naming the budget field and what AutoRefine takes instead.
        """
        for key in ("max_metric_calls", "auto"):
            if getattr(budget, key) is not None:
                raise InputError(f"{self.name} counts iterations, not metric calls: {key} would be ignored",
                                 field=f"budget.{key}",
                                 expected="budget.max_iters (AutoRefine iterations), or a spend limit such as "
                                          "budget.max_lm_calls or budget.max_usd")

    def estimate(self, builder) -> int:
        """The calls this engine makes, for the dry-run estimate (see optimizers._estimates)."""
        from verifirst.judge.estimates import autorefine_lines

        return autorefine_lines(self, builder)
