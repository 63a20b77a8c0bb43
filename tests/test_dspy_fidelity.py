"""vf.optimize runs DSPy optimizers as DSPy would: a float metric bootstraps the demos native
BootstrapFewShot takes, the run's seed and compile_kwargs reach compile, MIPROv2 runs in the
test environment (a missing optuna names the extra), and AutoRefine refuses what it cannot use
before any LM call."""
from __future__ import annotations

import importlib.util
import json
import re

import dspy
import pytest

import verifirst as vf
from verifirst.core.errors import InputError
from verifirst.lm import FastJSONAdapter
from verifirst.lm.testing import json_answer, scripted_lm

RULE = "Always answer with the number 42."


class QA(dspy.Signature):
    """Answer the question."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


class Solver(dspy.Module):
    def __init__(self):
        super().__init__()
        self.qa = dspy.Predict(QA)

    def forward(self, question):
        return self.qa(question=question)


def records(n=12):
    return [{"id": f"q{k}", "question": f"what is the answer #{k}?", "answer": "42"} for k in range(n)]


def even_right(messages):  # right on even-numbered questions
    n = int(re.search(r"#(\d+)\?", messages[-1]["content"]).group(1))
    return json_answer(answer="42" if n % 2 == 0 else "41")


def partial(example, pred, trace=None):
    """A float metric in DSPy's style: 0.8 for a right answer, 0.0 for a wrong one."""
    return 0.8 if (pred.answer or "").strip() == example.answer else 0.0


def bootstrap():
    return dspy.BootstrapFewShot(max_bootstrapped_demos=2, max_labeled_demos=0, max_rounds=1)


def demo_questions(program) -> list[str]:
    return [d["question"] for d in program.qa.demos]


def test_a_float_metric_bootstraps_the_demos_native_bootstrap_fewshot_takes(tmp_path):
    data = records()
    res = vf.optimize(Solver(), data, partial, bootstrap(), models={"task": scripted_lm(even_right)},
                      run_dir=tmp_path / "r", workdir=tmp_path)
    train = set(res.manifest.train)
    native_set = [dspy.Example(question=r["question"], answer=r["answer"]).with_inputs("question")
                  for r in data if r["id"] in train]  # the driver's train split, in the same order
    with dspy.context(lm=scripted_lm(even_right), adapter=FastJSONAdapter()):
        native = bootstrap().compile(Solver(), trainset=native_set)
    assert len(demo_questions(native)) == 2
    assert demo_questions(res.program) == demo_questions(native)


def test_a_given_threshold_decides_bootstrapping_by_pass(tmp_path):
    res = vf.optimize(Solver(), records(), partial, bootstrap(), models={"task": scripted_lm(even_right)},
                      threshold=0.9, run_dir=tmp_path / "r", workdir=tmp_path)
    assert res.program.qa.demos == []  # 0.8 < 0.9: no right answer is a PASS, none is a demo


def test_a_verifiers_partial_credit_never_bootstraps_a_failing_demo(tmp_path):
    from verifirst.verifiers.base import Verdict

    class Near:  # FEH-like: a wrong answer still earns 0.7 of partial credit
        name = "near"

        def verify(self, item, candidate):
            ok = str(candidate).strip() == item.gold["answer"]
            return Verdict(1.0 if ok else 0.7, ok, "PASS" if ok else "OUTPUT")

    def fourth_right(messages):  # right on every fourth question: the split's first train items are wrong
        n = int(re.search(r"#(\d+)\?", messages[-1]["content"]).group(1))
        return json_answer(answer="42" if n % 4 == 0 else "41")

    res = vf.optimize(Solver(), records(), Near(), bootstrap(), models={"task": scripted_lm(fourth_right)},
                      output_field="answer", run_dir=tmp_path / "r", workdir=tmp_path)
    train = res.manifest.train
    assert any(int(i[1:]) % 4 for i in [r["id"] for r in records() if r["id"] in train][:2])  # a wrong one comes first
    demos = demo_questions(res.program)
    assert len(demos) == 2 and all(int(q.split("#")[1][:-1]) % 4 == 0 for q in demos)


class Recorder(dspy.teleprompt.Teleprompter):
    """A teleprompter whose compile takes a seed and options, as MIPROv2's does; it records them."""

    def __init__(self):
        super().__init__()
        self.metric = None
        self.got = None

    def compile(self, student, *, trainset, valset=None, seed=None, minibatch_size=35, eval_kwargs=None):
        self.got = {"seed": seed, "minibatch_size": minibatch_size, "eval_kwargs": eval_kwargs}
        return student


def counting_lm(counter: list):
    def fn(messages):
        counter.append(1)
        return json_answer(answer="42")
    return scripted_lm(fn)


def test_seed_and_compile_kwargs_reach_compile(tmp_path):
    tp = Recorder()
    vf.optimize(Solver(), records(), partial, tp, models={"task": scripted_lm(even_right)}, seed=7,
                compile_kwargs={"minibatch_size": 3, "eval_kwargs": {"display_progress": False}},
                run_dir=tmp_path / "r", workdir=tmp_path)
    assert tp.got == {"seed": 7, "minibatch_size": 3, "eval_kwargs": {"display_progress": False}}
    tp2 = Recorder()
    vf.optimize(Solver(), records(), partial, tp2, models={"task": scripted_lm(even_right)}, seed=7,
                compile_kwargs={"seed": 3}, run_dir=tmp_path / "r2", workdir=tmp_path)
    assert tp2.got["seed"] == 3  # compile_kwargs wins over the run's seed


def test_bad_compile_kwargs_are_refused_before_any_lm_call(tmp_path):
    calls: list = []
    with pytest.raises(InputError, match=r"\[compile_kwargs.minibatch\].*minibatch_size"):
        vf.optimize(Solver(), records(), partial, Recorder(), models={"task": counting_lm(calls)},
                    compile_kwargs={"minibatch": 3}, run_dir=tmp_path / "r", workdir=tmp_path)
    with pytest.raises(InputError, match=r"\[compile_kwargs.trainset\]"):
        vf.optimize(Solver(), records(), partial, Recorder(), models={"task": counting_lm(calls)},
                    compile_kwargs={"trainset": []}, run_dir=tmp_path / "r", workdir=tmp_path)
    with pytest.raises(InputError, match=r"optimizer 'gepa' takes no compile_kwargs"):
        vf.optimize(Solver(), records(), partial, "gepa", models={"task": counting_lm(calls)},
                    compile_kwargs={"minibatch_size": 3}, run_dir=tmp_path / "r", workdir=tmp_path)
    assert calls == [] and not (tmp_path / "r").exists()


def test_simba_and_gepa_engines_take_the_runs_seed(tmp_path, monkeypatch):
    from verifirst.core.engine import Budget, EngineContext
    from verifirst.optimizers import gepa as gepa_mod
    from verifirst.optimizers.simba import SIMBAEngine

    ctx = EngineContext(run_dir=tmp_path, reflection_lm=object(), seed=11, compile_kwargs={})
    assert SIMBAEngine().compile_arguments(ctx) == {"seed": 11}

    seen = {}

    class Stop(Exception):
        pass

    class FakeGEPA:
        def __init__(self, **kw):
            seen.update(kw)
            raise Stop

    monkeypatch.setattr(gepa_mod.dspy, "GEPA", FakeGEPA)
    with pytest.raises(Stop):
        gepa_mod.GEPAEngine().compile(dspy.Predict(QA), None, [], [], Budget(max_metric_calls=5), ctx)
    assert seen["seed"] == 11
    with pytest.raises(Stop):
        gepa_mod.GEPAEngine(seed=2).compile(dspy.Predict(QA), None, [], [], Budget(max_metric_calls=5), ctx)
    assert seen["seed"] == 2  # a seed given to the engine is kept


# -- MIPROv2 in the test environment ---------------------------------------------------------

def _output_fields(system: str) -> list[str]:
    m = re.search(r"Your output fields are:(.*?)(?:All interactions|\n\n[A-Z])", system, re.S)
    return re.findall(r"\d+\. `(\w+)`", m.group(1)) if m else []


def mipro_lm(counter: list):
    """The task model answers 42 only under RULE; MIPROv2's proposer steps get generic text and
    RULE as every proposed instruction."""
    def fn(messages):
        counter.append(1)
        system = messages[0]["content"]
        outs = _output_fields(system)
        if outs == ["answer"]:
            return json.dumps({"answer": "42" if "42" in system else "41"})
        return json.dumps({f: RULE if "instruction" in f else f"a {f}" for f in outs})
    return scripted_lm(fn, name="mipro")


def exact(example, pred, trace=None):
    return float((pred.answer or "").strip() == example.answer)


def test_miprov2_runs_through_vf_optimize(tmp_path):
    pytest.importorskip("optuna", reason="optuna comes with the test extra (make test)")
    calls: list = []
    lm = mipro_lm(calls)
    tp = dspy.MIPROv2(metric=None, prompt_model=lm, task_model=lm, auto=None, num_candidates=2,
                      max_bootstrapped_demos=1, max_labeled_demos=0, num_threads=1, verbose=False)
    res = vf.optimize(dspy.Predict(QA), records(), exact, tp, models={"task": lm}, seed=3,
                      compile_kwargs={"num_trials": 3, "minibatch": False}, run_dir=tmp_path / "r", workdir=tmp_path)
    assert res.report["engine"] == "MIPROv2" and res.program.signature.instructions == RULE
    val = res.report["splits"]["val"]
    assert val["before"]["pass_rate"] == 0.0 and val["after"]["pass_rate"] == 1.0
    assert calls  # the scripted model answered every step


def test_a_missing_optuna_names_the_extra_before_any_lm_call(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "optuna" else real(name, *a))
    calls: list = []
    lm = counting_lm(calls)
    tp = dspy.MIPROv2(metric=None, prompt_model=lm, task_model=lm, auto=None, num_candidates=2)
    with pytest.raises(InputError, match=r"MIPROv2 needs the Python package 'optuna'.*verifirst\[mipro\]"):
        vf.optimize(dspy.Predict(QA), records(), exact, tp, models={"task": lm}, run_dir=tmp_path / "r",
                    workdir=tmp_path)
    assert calls == [] and not (tmp_path / "r").exists()


# -- AutoRefine refusals -------------------------------------------------------------------

class Safety(dspy.Signature):
    code: str = dspy.InputField()
    verdict: str = dspy.OutputField(desc="PASS or FAIL")


class Opinion(dspy.Signature):
    code: str = dspy.InputField()
    opinion: str = dspy.OutputField()


def labelled(n=16):
    return [dspy.Example(code=f"def f{k}(s):\n    return {'eval(s)' if k % 2 else 'sorted(s)'}\n",
                         label="FAIL" if k % 2 else "PASS").with_inputs("code") for k in range(n)]


def test_autorefine_refuses_a_teacher_program_before_any_lm_call():
    calls: list = []
    lm = counting_lm(calls)
    tp = vf.AutoRefine(teacher=lm, proposer=lm, max_iters=1)
    with dspy.context(lm=lm), pytest.raises(InputError, match=r"\[teacher\].*teacher program \(Predict\)"):
        tp.compile(dspy.Predict(Safety), trainset=labelled(), teacher=dspy.Predict(Safety))
    with dspy.context(lm=lm), pytest.raises(InputError, match=r"takes no argument 'max_demos'"):
        tp.compile(dspy.Predict(Safety), trainset=labelled(), max_demos=2)
    assert calls == []


def test_autorefine_refuses_a_student_without_a_verdict_output_before_any_lm_call():
    calls: list = []
    lm = counting_lm(calls)
    tp = vf.AutoRefine(teacher=lm, proposer=lm, max_iters=1)
    with dspy.context(lm=lm), pytest.raises(InputError, match=r"\[verdict_field\].*no output 'verdict'.*'opinion'"):
        tp.compile(dspy.Predict(Opinion), trainset=labelled())
    assert calls == []


# -- a user's own LM runs with the adapter dspy.Evaluate would use ------------------------------

class Reasoned(dspy.Module):
    def __init__(self):
        super().__init__()
        self.qa = dspy.ChainOfThought(QA)

    def forward(self, question):
        return self.qa(question=question)


def dummy_answers(k: int) -> dict:
    """What a DummyLM says to question #k: right, near (a float metric's partial credit) or wrong."""
    answer = "42" if k % 3 == 0 else ("42." if k % 3 == 1 else "41")
    return {"reasoning": f"step {k}", "answer": answer}


def graded(example, pred, trace=None):
    """Exact 1.0, right but for a trailing period 0.5, else 0.0 (per-item scores that differ)."""
    return 1.0 if pred.answer == example.answer else (0.5 if pred.answer.rstrip(".") == example.answer else 0.0)


def dummy_lm(adapter=None):
    from dspy.utils.dummies import DummyLM

    return DummyLM({f"what is the answer #{k}?": dummy_answers(k) for k in range(12)}, adapter=adapter)


def evaluate_scores(res, program_factory, lm, adapter=None) -> tuple[dict, dict]:
    """Per-item scores of vf's baseline evaluation and of dspy.Evaluate on the same items, by id."""
    ours, theirs = {}, {}
    by_id = {r["id"]: r for r in records()}
    for split, ev in res.before.items():
        ids = [row.id for row in ev.rows]
        ours.update({row.id: row.score for row in ev.rows})
        devset = [dspy.Example(question=by_id[i]["question"], answer=by_id[i]["answer"]).with_inputs("question")
                  for i in ids]
        with dspy.context(lm=lm, **({"adapter": adapter} if adapter else {})):
            out = dspy.Evaluate(devset=devset, metric=graded, num_threads=1, display_progress=False)(program_factory())
        theirs.update({i: float(score) for i, (_, _, score) in zip(ids, out.results)})
    return ours, theirs


def test_a_users_dummy_lm_scores_as_under_dspy_evaluate(tmp_path):
    res = vf.evaluate(Reasoned(), records(), graded, models={"task": dummy_lm()}, run_dir=tmp_path / "r",
                      workdir=tmp_path)
    ours, theirs = evaluate_scores(res, Reasoned, dummy_lm())
    assert len(ours) == 12 and ours == theirs
    assert sorted(set(ours.values())) == [0.0, 0.5, 1.0]  # every kind of answer was parsed and scored


def test_the_adapter_a_user_configured_is_used_for_their_lm(tmp_path):
    xml_lm = dummy_lm(adapter=dspy.XMLAdapter())  # answers in XML: neither ChatAdapter nor JSON parses them
    with dspy.context(adapter=dspy.XMLAdapter()):
        res = vf.evaluate(Reasoned(), records(), graded, models={"task": xml_lm}, run_dir=tmp_path / "r",
                          workdir=tmp_path)
    ours, theirs = evaluate_scores(res, Reasoned, dummy_lm(adapter=dspy.XMLAdapter()), dspy.XMLAdapter())
    assert len(ours) == 12 and ours == theirs and sorted(set(ours.values())) == [0.0, 0.5, 1.0]


def test_adapter_choice_verifirst_json_only_for_lms_verifirst_made():
    from verifirst.lm import adapter_for

    assert type(adapter_for(dummy_lm())) is dspy.ChatAdapter  # DSPy's default for a user's LM
    assert type(adapter_for(dspy.LM("openai/gpt-4o-mini"))) is dspy.ChatAdapter
    with dspy.context(adapter=dspy.XMLAdapter()):
        assert type(adapter_for(dummy_lm())) is dspy.XMLAdapter  # the one the user configured
        assert type(adapter_for(scripted_lm(even_right))) is FastJSONAdapter  # verifirst made this one
    mine = dspy.TwoStepAdapter(dspy.LM("openai/gpt-4o-mini"))
    assert adapter_for(scripted_lm(even_right), mine) is mine  # asked for: wins for every LM


def test_miprov2_uses_the_seed_the_run_records_zero_included(tmp_path, monkeypatch):
    pytest.importorskip("optuna", reason="optuna comes with the test extra (make test)")
    used: list = []
    real = dspy.MIPROv2._set_random_seeds

    def spy(self, seed):
        used.append(seed)
        return real(self, seed)

    monkeypatch.setattr(dspy.MIPROv2, "_set_random_seeds", spy)

    def run(seed, where):
        lm = mipro_lm([])
        tp = dspy.MIPROv2(metric=None, prompt_model=lm, task_model=lm, auto=None, num_candidates=2,
                          max_bootstrapped_demos=1, max_labeled_demos=1, num_threads=1, verbose=False)
        res = vf.optimize(dspy.Predict(QA), records(), exact, tp, models={"task": lm}, seed=seed,
                          compile_kwargs={"num_trials": 3, "minibatch": False}, run_dir=tmp_path / where,
                          workdir=tmp_path)
        state = json.loads((tmp_path / where / "split_manifest.json").read_text())
        return res, state, tp

    first, state, tp = run(0, "a")
    assert used == [0] and res_seed(first, state) == 0  # DSPy 3.4.1 alone would use its default 9
    assert tp.seed == 9  # the teleprompter's own setting is put back
    second, state2, _ = run(0, "b")
    assert used == [0, 0] and res_seed(second, state2) == 0
    assert first.program.dump_state() == second.program.dump_state()


def res_seed(res, state) -> int:
    """The seed a run records: its result's manifest and split_manifest.json (they must agree)."""
    assert res.manifest.seed == state["seed"]
    return state["seed"]
