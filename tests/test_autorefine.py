"""AutoRefine loop, teacher, edits and reports, pinned with a rule-following scripted LM.

The scripted LM reads the prompt DSPy sends it and acts on what it finds there: as a judge
it applies the `FAIL if the code contains `X`` / `PASS if ...` rules present in its
instructions (and scores rubric check lines); as teacher, proposer and applier it follows
the documented roles. So the loop only improves the judge if it really writes rules into
the prompt.
"""
from __future__ import annotations

import json
import os
import random
import re

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy
import pytest
from dspy.lm15 import Message, Response, TextPart, Usage

from verifirst.benchmarks.studies.noise_injection import flip_labels, run_noise_injection
from verifirst.core.errors import ErrorRateExceeded, InputError, LeakageError
from verifirst.judge import edits as _edits
from verifirst.judge.autorefine import STATE_FILE, AutoRefineEngine, CalibrationMismatch, choose_threshold, refine_judge
from verifirst.judge.calibrate import run_calibration
from verifirst.judge.judge_report import held_out_report
from verifirst.optimizers.base import Budget, EngineContext
from verifirst.judge.programs import PassFailJudge, RubricJudge
from verifirst.loop.splits import make_splits
from verifirst.core.task import Item, Suite

FIELD_RE = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## \w+ ## \]\]|\n\nRespond with|\Z)", re.S)
FAIL_RULE = re.compile(r"FAIL if the code contains `([^`]+)`")
PASS_RULE = re.compile(r"PASS if the code contains `([^`]+)`")
CHECK_RE = re.compile(r"^\s*-\s*\[w=([\d.]+)\]\s*(\w+)\s*:\s*(.*)$", re.M)


class Interrupt(BaseException):
    """Raised by the scripted LM to simulate a kill mid-run (like KeyboardInterrupt, not an LM error)."""


class _Engine:
    def __init__(self, owner):
        self.owner = owner

    def complete(self, request):
        system = request.system if isinstance(request.system, str) else "".join(
            p.text for p in (request.system or []))
        user = "\n".join(m.text or "" for m in request.messages if m.role == "user")
        text = self.owner.respond(system or "", user)
        return Response(id=None, model="rule-following", message=Message.assistant([TextPart(text)]),
                        finish_reason="stop", usage=Usage(input_tokens=0, output_tokens=0, total_tokens=0))


def rule_verdict(rules: str, code: str, none_applies: str) -> dict:
    """The scripted judge: the first PASS rule in `rules` the code matches, else the first FAIL rule, else PASS."""
    passes = [t for t in PASS_RULE.findall(rules) if t in code]
    fails = [t for t in FAIL_RULE.findall(rules) if t in code]
    if passes:
        return {"reasoning": f"matches PASS rule `{passes[0]}`", "verdict": "PASS"}
    if fails:
        return {"reasoning": f"matches FAIL rule `{fails[0]}`", "verdict": "FAIL"}
    return {"reasoning": none_applies, "verdict": "PASS"}


class RuleFollowingLM(dspy.LM):
    """A deterministic LM whose answers depend on the rules in the prompt it receives."""

    def __init__(self, *, pair_edits: bool = True, pad_rewrite: int = 0, interrupt_after: int | None = None,
                 interrupt_role: str = "judge"):
        super().__init__("local/rule-following", engine=_Engine(self), cache=False)
        self.pair_edits, self.pad_rewrite = pair_edits, pad_rewrite
        self.interrupt_after, self.interrupt_role = interrupt_after, interrupt_role
        self.calls: list[tuple[str, dict]] = []  # (role, parsed input fields)

    # -- prompt parsing --
    @staticmethod
    def fields(user: str) -> dict:
        return {m.group(1): m.group(2).strip() for m in FIELD_RE.finditer(user)}

    @staticmethod
    def instructions(system: str) -> str:
        return system.split("your objective is:", 1)[-1]

    @staticmethod
    def role(system: str) -> str:
        if "`new_prompt`" in system:
            return "applier"
        if "`edits`" in system:
            return "proposer"
        if "`decision`" in system:
            return "teacher"
        if "`check_scores`" in system:
            return "rubric"
        return "judge"

    def respond(self, system: str, user: str) -> str:
        role, f = self.role(system), self.fields(user)
        self.calls.append((role, f))
        n_role = sum(1 for r, _ in self.calls if r == role)
        if self.interrupt_after is not None and role == self.interrupt_role and n_role > self.interrupt_after:
            raise Interrupt(f"killed after {self.interrupt_after} {role} calls")
        out = getattr(self, f"_{role}")(self.instructions(system), f)
        as_json = "JSON object" in user
        if as_json:
            return json.dumps(out)
        return "\n\n".join(f"[[ ## {k} ## ]]\n{v if isinstance(v, str) else json.dumps(v)}"
                           for k, v in out.items()) + "\n\n[[ ## completed ## ]]"

    # -- roles --
    def _judge(self, instr: str, f: dict) -> dict:
        return rule_verdict(instr, f.get("code", ""), "no rule in my instructions applies")

    def _rubric(self, instr: str, f: dict) -> dict:
        code, scores = f.get("code", ""), {}
        for _, name, desc in CHECK_RE.findall(instr):
            m = re.search(r"(does not contain|contains) `([^`]+)`", desc)
            if not m:
                scores[name] = 1.0
            elif m.group(1) == "contains":
                scores[name] = 1.0 if m.group(2) in code else 0.0
            else:
                scores[name] = 0.0 if m.group(2) in code else 1.0
        return {"reasoning": "scored each check", "check_scores": scores}

    def _teacher(self, instr: str, f: dict) -> dict:
        code, label = f.get("code", ""), f.get("outcome_label")
        bad = hazard(code)
        if "# opaque" in code:
            return {"justification": "the outcome is decided by something not in the view", "decision": "SKIP"}
        if bad and label == "FAIL":
            return {"justification": f"the code calls `{bad[0]}` on its input "
                                     f"(safe alternative: `{bad[1]}`)", "decision": "KEEP"}
        if bad and label == "PASS":
            return {"justification": f"the code clearly calls `{bad[0]}`", "decision": "CORRECT"}
        if label == "PASS":
            return {"justification": "no unsafe call is visible", "decision": "KEEP"}
        return {"justification": "nothing in the view explains a failure", "decision": "SKIP"}

    def _proposer(self, instr: str, f: dict) -> dict:
        edits = []
        asked_to_pair = "Unbalanced" in f.get("feedback", "")
        for just in re.findall(r"justification: (.*)", f.get("disagreements", "")):
            m = re.search(r"calls `([^`]+)`.*?safe alternative: `([^`]+)`", just)
            if not m:
                continue
            if f"`{m.group(1)}`" in f.get("judge_prompt", ""):
                continue
            edits.append({"op": "add", "direction": "FAIL", "rule": f"FAIL if the code contains `{m.group(1)}`"})
            if self.pair_edits and asked_to_pair:
                edits.append({"op": "add", "direction": "PASS",
                              "rule": f"PASS if the code contains `{m.group(2)}`"})
            break  # one precise rule per call: the loop needs iterations to find them all
        uniq = []
        for e in edits:
            if e not in uniq:
                uniq.append(e)
        return {"edits": uniq}

    def _applier(self, instr: str, f: dict) -> dict:
        edits = json.loads(f["edits"])
        text = f["judge_prompt"] + "".join(f"\n- {e['rule']}" for e in edits if e["op"] == "add")
        if self.pad_rewrite:
            text += "\n" + "Be thorough. " * self.pad_rewrite
        return {"new_prompt": text}


HAZARDS = [("eval(", "literal_eval("), ("os.system(", "subprocess.run(")]


def hazard(code: str):
    for bad, good in HAZARDS:
        if bad in code.replace(good, ""):
            return bad, good
    return None


def make_world(n_groups: int = 40, seed: int = 0, opaque_rate: float = 0.1) -> Suite:
    """Snippets whose true outcome is FAIL iff they call eval( (not literal_eval() or os.system(."""
    rng = random.Random(seed)
    kinds = ["clean", "clean", "eval", "literal", "system", "subprocess"]
    items = []
    for g in range(n_groups):
        for k in range(4):
            kind = rng.choice(kinds)
            body = {"clean": "return sorted(xs)", "eval": "return eval(s)",
                    "literal": "return ast.literal_eval(s)", "system": "os.system(cmd)",
                    "subprocess": "subprocess.run(cmd)"}[kind]
            code = f"def f{g}_{k}(s, xs, cmd):\n    {body}\n"
            label = "FAIL" if hazard(code) else "PASS"
            if rng.random() < opaque_rate:  # hidden-test failure: fails, reads as correct
                code += "    # opaque\n"
                label = "FAIL"
            items.append(Item(f"g{g}-{k}", {"task": f"task {g}", "code": code}, {"label": label},
                              group=f"g{g}", meta={"stage": rng.choice(["draft", "review"])}))
    return Suite("world", items)


@pytest.fixture
def world():
    suite = make_world()
    manifest = make_splits(suite.items, group="group", seed=1)
    return suite, manifest


def split(suite, manifest):
    return [manifest.select(suite.items, s) for s in ("train", "val", "test")]


# -- the loop -----------------------------------------------------------------------------
def test_loop_discovers_rules_and_beats_uncalibrated_on_held_out(world, tmp_path):
    suite, manifest = world
    lm = RuleFollowingLM()
    report = run_calibration(suite, manifest, "passfail", lm, lm, lm, batch_size=100, max_iters=5, run_dir=tmp_path,
                             n_boot=300)
    judged = report["judge"]  # the judge section of the driver's report
    prompt = judged["calibrated_prompt"]
    assert "FAIL if the code contains `eval(`" in prompt
    assert "PASS if the code contains `literal_eval(`" in prompt
    assert "FAIL if the code contains `os.system(`" in prompt
    t = judged["test"]
    cal, unc = t["judges"]["calibrated"]["pi"], t["judges"]["uncalibrated"]["pi"]
    assert unc <= 0.0 < 0.5 < cal
    cmp = t["comparisons"]["calibrated_vs_uncalibrated"]
    assert cmp["pi_ci95"][0] > 0 and cmp["mcnemar_exact"]["p_value"] < 0.05
    for key in ("fail_recall", "fail_precision", "pass_recall"):
        assert key in t["judges"]["calibrated"]
    teach = judged["teacher"]
    assert teach["abstain"] > 0 and teach["keep"] > 0 and teach["correct"] == 0
    assert set(teach["stats"]["by_label"]) == {"PASS", "FAIL"}
    assert "stage" in teach["stats"]["by_meta"]
    assert (tmp_path / "calibrated_prompt.txt").read_text().strip() == prompt.strip()
    assert json.loads((tmp_path / "report.json").read_text())["judge"]["calibrated_prompt"] == prompt
    # the loop's own record: train pi rises, selection by validation
    its = judged["loop"]["iterations"]
    assert its[0]["train_pi"] < its[-1]["train_pi"]
    assert judged["loop"]["selected_iteration"] == max(its, key=lambda i: (i["val_pi"], -i["iteration"]))["iteration"]


def test_abstained_samples_never_reach_disagreement_analysis(world, tmp_path):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    lm = RuleFollowingLM()
    res = refine_judge(PassFailJudge(["code", "task"]), train, val, lm, lm, judge_lm=lm, batch_size=100, run_dir=tmp_path)
    skipped = [i for i, d in res.teacher.items() if d.decision == "SKIP"]
    assert skipped
    by_id = {it.id: it for it in train}
    shown = "\n".join(f.get("disagreements", "") for r, f in lm.calls if r == "proposer")
    judged_train = {f["code"] for r, f in lm.calls if r == "judge"}
    for i in skipped:
        code = by_id[i].inputs["code"]
        assert code.splitlines()[0] not in shown  # function names are unique per item
        assert code not in judged_train or any(code == v.inputs["code"] for v in val)
    for it in res.iterations:
        assert not set(it["disagreements"]) & set(skipped)


def test_teacher_sees_exactly_view_plus_label(world, tmp_path):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    lm = RuleFollowingLM()
    refine_judge(PassFailJudge(["code", "task"]), train, val, lm, lm, judge_lm=lm, batch_size=100, max_iters=1)
    teacher_calls = [f for r, f in lm.calls if r == "teacher"]
    assert len(teacher_calls) == len(train)
    for f in teacher_calls:
        assert set(f) == {"code", "task", "outcome_label"}
        blob = json.dumps(f)
        assert "draft" not in blob and "review" not in blob  # metadata never shown
    ids = {it.id for it in train}
    assert not any(i in json.dumps(f) for f in teacher_calls for i in ids)  # nor ids


def test_no_test_item_reaches_the_optimizer(world, tmp_path):
    suite, manifest = world
    _, _, test = split(suite, manifest)
    lm = RuleFollowingLM()
    run_calibration(suite, manifest, "passfail", lm, lm, lm, batch_size=100, max_iters=2, run_dir=tmp_path, n_boot=50)
    test_codes = {it.inputs["code"] for it in test}
    optimizer_roles = ("teacher", "proposer", "applier")
    for role, f in lm.calls:
        if role in optimizer_roles:
            blob = json.dumps(f)
            assert not any(c.splitlines()[0] in blob for c in test_codes)
    assert not set(manifest.seen) & set(manifest.test)
    # and the guard refuses a leak outright
    with pytest.raises(LeakageError):
        manifest.admit_to_optimizer(manifest.test[:1])


def test_test_split_refused_once_seen(world, tmp_path):
    suite, manifest = world
    manifest.seen.add(manifest.test[0])
    with pytest.raises(LeakageError):
        run_calibration(suite, manifest, "passfail", RuleFollowingLM(), RuleFollowingLM(),
                        RuleFollowingLM(), max_iters=1, run_dir=tmp_path, n_boot=10)


# -- balance and length cap -------------------------------------------------------------
def test_unbalanced_proposal_is_reasked_and_pairs_land_together(world):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    lm = RuleFollowingLM()
    res = refine_judge(PassFailJudge(["code", "task"]), train, val, lm, lm, judge_lm=lm, batch_size=100, max_iters=3)
    rounds = [it["edits"] for it in res.iterations[1:]]
    assert rounds and all(r["rebalance_asked"] for r in rounds)
    for r in rounds:
        kept = r["kept"]
        assert sum(e["direction"] == "FAIL" for e in kept) == sum(e["direction"] == "PASS" for e in kept)


def test_unpaired_fail_reasons_are_dropped_not_applied(world):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    lm = RuleFollowingLM(pair_edits=False)
    res = refine_judge(PassFailJudge(["code", "task"]), train, val, lm, lm, judge_lm=lm, batch_size=100, max_iters=3)
    assert "FAIL if the code contains" not in res.prompt
    r = res.iterations[1]["edits"]
    assert r["dropped_unbalanced"] and not r["kept"]
    assert res.stop_reason == "no_usable_edits"


def test_length_cap_is_enforced_on_the_rewrite(world):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    lm = RuleFollowingLM(pad_rewrite=400)  # the applier bloats every rewrite past the cap
    judge = PassFailJudge(["code", "task"])
    cap = len(judge.prompt) + 200
    res = refine_judge(judge, train, val, lm, lm, judge_lm=lm, batch_size=100, max_iters=3, length_cap=cap)
    assert all(it["prompt_chars"] <= cap for it in res.iterations)
    assert len(res.prompt) <= cap
    r = res.iterations[1]["edits"]
    assert r["applier"] == "deterministic" and any("too long" in p for p in r["applier_problems"])
    assert "Be thorough" not in res.prompt
    assert "FAIL if the code contains `eval(`" in res.prompt  # the pair still fit


def test_length_cap_drops_whole_pairs_when_tight():
    prompt = "Judge the code."
    edits = [_edits.Edit("add", "FAIL", "FAIL if the code contains `eval(`"),
             _edits.Edit("add", "PASS", "PASS if the code contains `literal_eval(`"),
             _edits.Edit("add", "FAIL", "FAIL if the code contains `os.system(`"),
             _edits.Edit("add", "PASS", "PASS if the code contains `subprocess.run(`")]
    one_pair = _edits.apply_deterministic(prompt, edits[:2])
    lm = RuleFollowingLM(pad_rewrite=100)
    rnd = _edits.EditRound()
    with dspy.context(lm=lm):
        out = _edits.EditApplier()(prompt, edits, len(one_pair), rnd)
    assert out == one_pair and len(out) <= len(one_pair)
    assert len(rnd.dropped_for_length) == 2 and _edits.is_balanced(rnd.dropped_for_length and
                                                                  [_edits.Edit(**e) for e in rnd.dropped_for_length])


def test_balance_function():
    E = _edits.Edit
    kept, dropped = _edits.balance([E("add", "FAIL", "a"), E("add", "FAIL", "b"), E("add", "PASS", "c"),
                                    E("remove", "PASS", "", "old rule")])
    assert [e.rule for e in kept] == ["a", "c", ""] and [e.rule for e in dropped] == ["b"]
    assert _edits.is_balanced(kept)


# -- resume -------------------------------------------------------------------------------
def test_resume_after_interrupt_loses_at_most_one_iteration(world, tmp_path):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    full = refine_judge(PassFailJudge(["code", "task"]), train, val, RuleFollowingLM(), RuleFollowingLM(),
                     judge_lm=RuleFollowingLM(), max_iters=5, batch_size=100)
    per_eval = len([i for i, d in full.teacher.items() if d.kept]) + len(val)
    # kill during the evaluation of iteration 2 (iterations 0 and 1 done)
    lm = RuleFollowingLM(interrupt_after=2 * per_eval + 5)
    with pytest.raises(Interrupt):
        refine_judge(PassFailJudge(["code", "task"]), train, val, lm, lm, judge_lm=lm, batch_size=100, run_dir=tmp_path)
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert state["teacher_done"] and [i["iteration"] for i in state["iterations"]] == [0, 1]
    lm2 = RuleFollowingLM()
    res = refine_judge(PassFailJudge(["code", "task"]), train, val, lm2, lm2, judge_lm=lm2, batch_size=100, run_dir=tmp_path)
    assert not [c for c in lm2.calls if c[0] == "teacher"]  # teacher pass not redone
    judged = sum(1 for r, _ in lm2.calls if r == "judge")
    abstained = sum(d.decision == "SKIP" for d in full.teacher.values())  # judged once for the review queue
    assert judged == (len(full.iterations) - 2) * per_eval + abstained  # only the lost iteration onward
    assert res.prompt == full.prompt and res.selected_iteration == full.selected_iteration
    # a third call finds the run complete and calls nothing
    lm3 = RuleFollowingLM()
    refine_judge(PassFailJudge(["code", "task"]), train, val, lm3, lm3, judge_lm=lm3, batch_size=100, run_dir=tmp_path)
    assert not lm3.calls


def test_resume_mid_teacher_pass(world, tmp_path):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    lm = RuleFollowingLM(interrupt_after=20, interrupt_role="teacher")
    with pytest.raises(Interrupt):
        refine_judge(PassFailJudge(["code", "task"]), train, val, lm, lm, judge_lm=lm, batch_size=100, run_dir=tmp_path)
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert len(state["teacher"]) == 16 and not state["teacher_done"]
    lm2 = RuleFollowingLM()
    refine_judge(PassFailJudge(["code", "task"]), train, val, lm2, lm2, judge_lm=lm2, batch_size=100, run_dir=tmp_path,
              max_iters=1)
    assert sum(1 for r, _ in lm2.calls if r == "teacher") == len(train) - 16


def test_other_calibration_in_same_run_dir_is_refused(world, tmp_path):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    lm = RuleFollowingLM()
    refine_judge(PassFailJudge(["code", "task"]), train, val, lm, lm, judge_lm=lm, batch_size=100, run_dir=tmp_path, max_iters=1)
    with pytest.raises(CalibrationMismatch):
        refine_judge(PassFailJudge(["code", "task"], prompt="Other prompt."), train, val, lm, lm, judge_lm=lm, batch_size=100,
                  run_dir=tmp_path, max_iters=1)


# -- rubric -------------------------------------------------------------------------------
RUBRIC = ("Score each check from 0 to 1.\nChecks:\n- [w=2] correct: the code does what the task asks\n"
          "- [w=1] clear: the code is readable")


class RubricRuleLM(RuleFollowingLM):
    """Proposes rubric checks instead of rules when the judge prompt is a rubric."""

    def _proposer(self, instr, f):
        edits = []
        for just in re.findall(r"justification: (.*)", f.get("disagreements", "")):
            m = re.search(r"calls `([^`]+)`.*?safe alternative: `([^`]+)`", just)
            if m:
                name = re.sub(r"\W", "", m.group(1))
                edits += [{"op": "add", "direction": "FAIL",
                           "rule": f"- [w=1] no_{name}: the code does not contain `{m.group(1)}`"},
                          {"op": "add", "direction": "PASS",
                           "rule": f"- [w=1] uses_{re.sub(chr(92) + 'W', '', m.group(2))}: the code contains `{m.group(2)}`"}]
        return {"edits": [e for n, e in enumerate(edits) if e not in edits[:n]]}

    def _applier(self, instr, f):
        edits = json.loads(f["edits"])
        return {"new_prompt": f["judge_prompt"] + "".join("\n" + e["rule"] for e in edits)}


def test_rubric_threshold_chosen_on_train_and_reported_both_ways(world, tmp_path):
    suite, manifest = world
    lm = RubricRuleLM()
    report = run_calibration(suite, manifest, "rubric", lm, lm, lm, batch_size=100, max_iters=3, run_dir=tmp_path,
                             prompt=RUBRIC, n_boot=200)
    judged = report["judge"]
    t = judged["test"]
    assert {"calibrated", "uncalibrated_default_threshold", "uncalibrated_train_threshold"} <= set(t["judges"])
    assert "calibrated_vs_uncalibrated_train_threshold" in t["comparisons"]
    assert "no_eval: the code does not contain `eval(`" in judged["calibrated_prompt"]
    thr = judged["calibrated_threshold"]
    assert thr is not None and 0 < thr < 1 and thr != 0.5
    assert t["judges"]["calibrated"]["pi"] > t["judges"]["uncalibrated_train_threshold"]["pi"]


def test_choose_threshold_maximizes_pi():
    run = {"a": {"score": 0.2}, "b": {"score": 0.4}, "c": {"score": 0.7}, "d": {"score": 0.9}}
    labels = {"a": "FAIL", "b": "FAIL", "c": "PASS", "d": "PASS"}
    t = choose_threshold(run, labels, 0.5)
    assert 0.4 < t <= 0.7
    labels2 = {"a": "FAIL", "b": "FAIL", "c": "FAIL", "d": "PASS"}
    assert 0.7 < choose_threshold(run, labels2, 0.5) <= 0.9


# -- report ---------------------------------------------------------------------------------
def test_held_out_report_from_per_item_verdicts():
    labels = {f"i{k}": ("FAIL" if k % 3 == 0 else "PASS") for k in range(30)}
    good = dict(labels)
    good["i1"] = "FAIL"
    base = {k: "PASS" for k in labels}
    base["i2"] = None  # an LM error: left out of every row, counted
    r = held_out_report(labels, {"cal": good, "base": base}, "cal", ["base"], n_boot=200)
    assert r["n_scored"] == 29 and r["excluded_lm_errors"] == 1
    cal = r["judges"]["cal"]
    assert cal["fail_recall"] == 1.0 and cal["fail_precision"] == pytest.approx(10 / 11)
    assert r["judges"]["base"]["fail_recall"] == 0.0 and r["judges"]["base"]["pass_recall"] == 1.0
    cmp = r["comparisons"]["cal_vs_base"]
    assert cmp["pi_delta"] > 0.5 and cmp["pi_ci95"][0] > 0
    assert cmp["mcnemar_exact"]["b"] == 10 and cmp["mcnemar_exact"]["c"] == 1


# -- engine protocol ---------------------------------------------------------------------
def test_engine_compile(world, tmp_path):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    lm = RuleFollowingLM()
    ctx = EngineContext(run_dir=tmp_path, reflection_lm=lm, teacher_lm=lm, task_lm=lm)
    logged = []
    ctx.log_metrics = lambda m, s: logged.append((s, m))
    res = AutoRefineEngine(batch_size=100).compile(PassFailJudge(["code", "task"]), None, [i.example() for i in train],
                                     [i.example() for i in val], Budget(max_iters=3), ctx)
    assert "FAIL if the code contains `eval(`" in res.program.prompt
    assert res.history[0]["iteration"] == 0 and len(res.history) >= 2
    assert [s for s, _ in logged] == [h["iteration"] for h in res.history]
    assert res.details["calibrated_prompt"] == res.program.prompt


def test_calibrate_rejects_bad_input(world):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    with pytest.raises(InputError):
        refine_judge(PassFailJudge(["code"]), train, val, None, None, length_cap=10)
    with pytest.raises(InputError):
        refine_judge(PassFailJudge(["code"]), train, [], None, None)


# -- noise injection --------------------------------------------------------------------
def test_flip_labels_is_seeded():
    items = make_world(10).items
    a, fa = flip_labels(items, 0.25, seed=3)
    b, fb = flip_labels(items, 0.25, seed=3)
    assert fa == fb and len(fa) == round(0.25 * len(items))
    for it, orig in zip(a, items):
        assert (it.gold["label"] != orig.gold["label"]) == (it.id in fa)


def test_noise_injection_teacher_sets_aside_flipped_labels():
    items = make_world(30, opaque_rate=0.0).items
    lm = RuleFollowingLM()
    r = run_noise_injection(items, ["code", "task"], teacher_lm=lm, fraction=0.25, seed=0, n_random=300)
    assert r["n_flipped"] == round(0.25 * len(items))
    fl, ge = r["set_aside"]["flipped"], r["set_aside"]["genuine"]
    assert fl["rate"] > 2 * ge["rate"]
    assert r["fisher"]["p_value"] < 0.01
    assert r["noise"]["after_teacher"] < r["noise"]["before"]
    assert r["noise"]["after_teacher"] < r["noise"]["random_drop"]["mean"]
    assert r["noise"]["random_drop"]["p_value"] < 0.05
    assert "drop_all_fail" in r["noise"]  # the rule the teacher's gain must beat (S2 §IV-A)
    assert set(r["by_shown_label"]) == {"PASS", "FAIL"}


class GarbageJudgeLM(RuleFollowingLM):
    """Answers the judge role with text no adapter can parse."""

    def respond(self, system, user):
        if self.role(system) == "judge":
            self.calls.append(("judge", {}))
            return "I cannot decide."
        return super().respond(system, user)


def test_lm_errors_are_not_fails(world, tmp_path):
    suite, manifest = world
    train, val, _ = split(suite, manifest)
    lm = GarbageJudgeLM()
    with pytest.raises(ErrorRateExceeded):
        refine_judge(PassFailJudge(["code", "task"]), train, val, lm, lm, judge_lm=lm, run_dir=tmp_path)
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert state["teacher_done"] and not state["iterations"]  # the teacher pass is kept
    from verifirst.judge.autorefine import run_judge
    run = run_judge(PassFailJudge(["code", "task"]), train[:3], lm)
    assert all(v["verdict"] is None and v["error"] for v in run.values())


def test_one_label_class_on_test_is_flagged_and_validation_verdicts_are_reported(tmp_path, capsys):
    from verifirst.judge.printing import print_calibration
    from verifirst.loop.splits import SplitManifest

    suite = make_world(n_groups=10, seed=3, opaque_rate=0.0)
    passing = [it.id for it in suite.items if it.gold["label"] == "PASS"]
    test = passing[:4]
    rest = [it.id for it in suite.items if it.id not in test]
    manifest = SplitManifest(rest[::2], rest[1::2], test, 0, (0.5, 0.25, 0.25))
    lm = RuleFollowingLM()
    report = run_calibration(suite, manifest, "passfail", lm, lm, lm, batch_size=100, max_iters=1,
                             run_dir=tmp_path, n_boot=50)
    judged = report["judge"]
    assert judged["test"]["label_counts"] == {"PASS": 4, "FAIL": 0}
    assert any("test split has one label class (all PASS): π is undefined/degenerate" in w
               for w in judged["warnings"])
    assert not any(w.startswith("validation split") for w in judged["warnings"])
    print_calibration(report)
    assert "test split has one label class (all PASS): π is undefined/degenerate" in capsys.readouterr().out
    val = judged["validation"]
    assert set(val["labels"]) == set(manifest.val) and set(val["verdicts"]["calibrated"]) == set(manifest.val)
    chosen = judged["loop"]["iterations"][judged["loop"]["selected_iteration"]]
    assert val["pi"] == chosen["val_pi"]


def test_rubric_calibration_resumed_after_the_engine_keeps_its_threshold(world, tmp_path):
    """The driver reloads a finished engine's program from optimized_program.json: the rubric's
    train-chosen threshold must come back with its prompt, or the after-evaluation judges at 0.5."""
    suite, manifest = world
    lm = RubricRuleLM()
    first = run_calibration(suite, manifest, "rubric", lm, lm, lm, batch_size=100, max_iters=3, run_dir=tmp_path,
                            prompt=RUBRIC, n_boot=50)
    assert first["judge"]["calibrated_threshold"] not in (None, 0.5)
    for f in (tmp_path / "eval").glob("after_*.jsonl"):
        f.unlink()  # killed after the engine finished, before the after-evaluation
    again = run_calibration(suite, manifest, "rubric", lm, lm, lm, batch_size=100, max_iters=3, run_dir=tmp_path,
                            prompt=RUBRIC, n_boot=50)
    assert again["splits"]["test"]["after"] == first["splits"]["test"]["after"]
    assert again["judge"]["test"]["judges"]["calibrated"] == first["judge"]["test"]["judges"]["calibrated"]


# -- judge noise (--repeats) -----------------------------------------------------------------
class _TemperatureEngine(_Engine):
    def complete(self, request):
        self.owner.temperature = request.config.temperature  # single-threaded test: one call at a time
        return super().complete(request)


class NoisyJudgeLM(RuleFollowingLM):
    """Follows the rules, but a sampled judge (temperature > 0) flips some answers, by item and draw."""

    def __init__(self, flip: float = 0.2):
        dspy.LM.__init__(self, "local/noisy-rule-following", engine=_TemperatureEngine(self), cache=False)
        self.pair_edits, self.pad_rewrite, self.interrupt_after, self.interrupt_role = True, 0, None, "judge"
        self.calls = []
        self.flip, self.temperature, self.draws = flip, None, {}

    def _judge(self, instr: str, f: dict) -> dict:
        out = super()._judge(instr, f)
        if (self.temperature or 0) > 0:
            import hashlib

            key = f.get("code")
            self.draws[key] = self.draws.get(key, 0) + 1
            h = hashlib.sha256(f"{key}|{self.draws[key]}".encode()).digest()[0] / 255
            if h < self.flip:
                out = {"reasoning": "sampled the other way", "verdict": "FAIL" if out["verdict"] == "PASS" else "PASS"}
        return out


def test_repeats_report_pi_spread_and_flip_rates(world):
    from verifirst.judge.autorefine import repeat_stats

    suite, manifest = world
    train, val = manifest.select(suite.items, "train"), manifest.select(suite.items, "val")
    lm = NoisyJudgeLM()
    res = refine_judge(PassFailJudge(["code", "task"]), train, val, lm, lm, judge_lm=lm, max_iters=2, batch_size=100,
                    repeats=4, temperature=0.8)
    noise = res.noise
    assert noise["repeats"] == 4 and noise["temperature"] == 0.8
    sel = noise["selected"]
    assert len(sel["pi"]) == 4 and sel["pi_min"] <= sel["pi_mean"] <= sel["pi_max"] and sel["pi_sd"] > 0
    assert set(sel["flip_rate"]) == {it.id for it in val} and sel["items_flipping"] > 0
    assert all(0 <= r <= 0.5 for r in sel["flip_rate"].values())
    for a in noise["acceptance"]:  # each later prompt was judged against the noise
        assert a["accepted"] == (a["delta"] > a["noise"] or (a["paired_ci95"] is not None and a["paired_ci95"][0] > 0))
    stats = repeat_stats({"a": "PASS", "b": "FAIL"}, [{"a": "PASS", "b": "FAIL"}, {"a": "FAIL", "b": "FAIL"},
                                                      {"a": "PASS", "b": None}])
    assert stats["flip_rate"] == {"a": round(1 / 3, 4), "b": 0.0} and stats["items_flipping"] == 1


def test_an_edit_within_the_repeat_noise_is_not_accepted():
    from verifirst.judge.autorefine import _select

    labels = {f"i{k}": ("PASS" if k % 2 else "FAIL") for k in range(8)}
    right = dict(labels)
    one_wrong = {**labels, "i0": "PASS"}

    def it(n, mean, sd, runs):
        return {"iteration": n, "val_pi": mean, "val_noise": {"pi_sd": sd}, "val_repeat_verdicts": runs}

    start = it(0, 0.70, 0.15, [right, one_wrong, one_wrong])
    edited = it(1, 0.75, 0.15, [right, right, one_wrong])
    assert _select([start, edited], labels)["iteration"] == 0, "+0.05 inside a noise of 0.15 is not an improvement"
    assert edited["acceptance"]["accepted"] is False and edited["acceptance"]["noise"] == 0.15
    clear = it(1, 0.98, 0.01, [right, right, right])
    assert _select([it(0, 0.70, 0.01, [one_wrong] * 3), clear], labels)["iteration"] == 1
    # without repeats the higher validation π wins, as before
    assert _select([{"iteration": 0, "val_pi": 0.70}, {"iteration": 1, "val_pi": 0.75}])["iteration"] == 1


def test_repeats_reach_the_loop_through_the_driver_and_the_report_prints_them(tmp_path, capsys):
    from verifirst.judge.printing import print_calibration

    suite = make_world(n_groups=6, seed=2)
    manifest = make_splits(suite.items, group="group", seed=1)
    lm = NoisyJudgeLM()
    rep = run_calibration(suite, manifest, teacher_lm=lm, proposer_lm=lm, judge_lm=lm, max_iters=1,
                          run_dir=tmp_path / "run", repeats=3, temperature=0.9, batch_size=100)
    noise = rep["judge"]["loop"]["noise"]
    assert noise["repeats"] == 3 and noise["temperature"] == 0.9 and len(noise["initial"]["pi"]) == 3
    assert set(noise["initial"]["flip_rate"]) == {it.id for it in manifest.select(suite.items, "val")}
    print_calibration(rep)
    assert "judge noise (initial prompt, 3 runs at temperature 0.9)" in capsys.readouterr().out
