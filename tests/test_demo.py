"""The demo's prompt invites no placeholder copies, a placeholder answer is no output (an LM error,
never a command to execute), and the demo configuration builds and runs (scripted models)."""
from __future__ import annotations

import re
from pathlib import Path

import dspy
import pytest

from verifirst import api
from verifirst import config, experiment
from verifirst.cli import demo_config, demo_outcome
from verifirst.loop.evaluation import ERROR, PASS, Scorer, evaluate
from verifirst.lm import USAGE, FastJSONAdapter, Models, UnusableReply
from verifirst.programs.bash import BashGenerator
from verifirst.core.task import Item
from verifirst.lm.testing import json_answer, scripted_lm
from verifirst.verifiers.exact import ExactMatch

PLACEHOLDER = re.compile(r"\{(command|task)\}")


def _contents(messages: list[dict]) -> str:
    return "\n".join(str(m["content"]) for m in messages)


def test_the_prompt_the_adapter_sends_has_no_field_placeholders():
    sig = BashGenerator().generate.signature
    demos = [dspy.Example(task="Count the files in /testbed.", command="ls /testbed | wc -l")]
    native = _contents(dspy.JSONAdapter().format(sig, demos, {"task": "List /tmp."}))
    assert PLACEHOLDER.search(native)  # what DSPy shows, and the 135M model copied back
    seen = []
    lm = scripted_lm(lambda m: (seen.append(m), json_answer(command="ls /tmp"))[1], name="demo-prompt")
    with dspy.context(lm=lm, adapter=FastJSONAdapter()):
        program = BashGenerator()
        program.generate.demos = demos
        assert program(task="List /tmp.").command == "ls /tmp"
    sent = _contents(seen[0])
    assert not PLACEHOLDER.search(sent), sent
    assert '"command": one bash command' in sent and "[[ ## task ## ]]" in sent
    assert "List /tmp." in sent and "ls /testbed | wc -l" in sent  # input and demonstration still shown


def test_the_structure_keeps_type_notes_of_non_text_outputs():
    class Check(dspy.Signature):
        """Decide."""
        text: str = dspy.InputField()
        ok: bool = dspy.OutputField(desc="whether it holds")

    text = FastJSONAdapter().format_field_structure(Check)
    assert "{ok}" not in text and "{text}" not in text
    assert '"ok": whether it holds; the value must be True or False' in text


@pytest.mark.parametrize("answer", ["{command}", "{task}", " {{command}} ", "<command>", "${command}", "[task]"])
def test_a_placeholder_answer_is_an_unusable_reply(answer):
    before = USAGE.total().unusable
    lm = scripted_lm(lambda m: json_answer(command=answer), name="demo-placeholder")
    with dspy.context(lm=lm, adapter=FastJSONAdapter()), pytest.raises(UnusableReply, match="placeholder"):
        BashGenerator()(task="List /tmp.")
    assert USAGE.total().unusable == before + 1


@pytest.mark.parametrize("answer", ["echo {a,b}", "[ -f /etc/hosts ]", "echo ${HOME}", "{ ls; }", "{command} x"])
def test_commands_with_braces_are_answers(answer):
    lm = scripted_lm(lambda m: json_answer(command=answer), name="demo-braces")
    with dspy.context(lm=lm, adapter=FastJSONAdapter()):
        assert BashGenerator()(task="List /tmp.").command == answer


class Recording(Scorer):
    """The exact-match scorer, remembering every candidate it was asked to verify."""

    def __init__(self):
        super().__init__(ExactMatch(), "command")
        self.candidates: list[str] = []

    def __call__(self, item, pred):
        self.candidates.append(pred.command)
        return super().__call__(item, pred)


def test_placeholder_answers_are_counted_apart_and_never_verified():
    items = [Item(id=f"i{k}", inputs={"task": f"say hi #{k}"}, gold={"command": "printf hi"}) for k in range(4)]

    def answer(messages):  # odd items get the format's placeholder back, even ones a real command
        k = int(re.search(r"say hi #(\d+)", messages[-1]["content"]).group(1))
        return json_answer(command="{command}" if k % 2 else "printf hi")

    scorer = Recording()
    with dspy.context(lm=scripted_lm(answer, name="demo-mixed"), adapter=FastJSONAdapter()):
        res = evaluate(BashGenerator(), items, scorer, split="val", retries=1, backoff_s=0)
    rows = res.by_id()
    assert [rows[f"i{k}"].status for k in range(4)] == [PASS, ERROR, PASS, ERROR]
    assert rows["i1"].error_kind == "lm" and "placeholder" in rows["i1"].error
    assert "{command}" not in scorer.candidates and len(scorer.candidates) == 2
    summary = res.summary()
    assert (summary["pass"], summary["scored"], summary["lm_errors"]) == (2, 2, 2)


def test_the_demo_configuration_builds(tmp_path):
    exp = config.from_dict(demo_config(tmp_path / "wd"))
    suite = experiment.load_suite(exp)
    manifest = experiment.make_manifest(exp, suite)
    assert len(suite) == 24 and (len(manifest.train), len(manifest.val), len(manifest.test)) == (8, 8, 8)
    assert isinstance(experiment.build_program(exp, items=suite.items), BashGenerator)
    assert exp.optimizer["name"] == "gepa" and exp.optimizer["max_metric_calls"] == 24
    assert exp.models["task"]["model"] == "local"
    real = config.from_dict(demo_config(tmp_path / "wd", 8, model="openai/gpt-4o-mini"))
    assert real.models["task"] == real.models["reflection"] == "openai/gpt-4o-mini"


def _report(before: int, after: int, task: str = "local") -> dict:
    return {"models": {"task": task}, "splits": {"test": {"before": {"pass": before, "scored": 8},
                                                          "after": {"pass": after, "scored": 8}}}}


def test_the_demo_says_in_one_line_when_nothing_improved():
    line = demo_outcome(_report(0, 0))
    assert "\n" not in line and line.startswith("no improvement on held-out items (test 0/8 -> 0/8 passed)")
    assert "embedded 135M" in line and "--model openai/gpt-4o-mini" in line
    assert demo_outcome(_report(3, 2, "openai/gpt-4o-mini")).startswith("no improvement")
    assert demo_outcome(_report(2, 5)).startswith("held-out result: test 2/8 -> 5/8 passed")


def test_the_demo_runs_end_to_end_with_placeholders_counted_apart(tmp_path):
    """The demo's experiment with scripted models: a placeholder answer is an LM error on its item
    (never executed), the others are verified by the pack's own checks in the sandbox."""
    exp = config.from_dict(demo_config(tmp_path / "wd", budget=8))
    exp.sections["suite"]["limit"] = 6
    exp.sections["tracking"]["enabled"] = False
    suite = experiment.load_suite(exp)
    gold = {it.inputs["task"]: it.gold["command"] for it in suite.items}
    stuck = sorted(gold)[0]  # this task always gets the placeholder back

    def task_answer(messages):
        text = messages[-1]["content"]
        task = next(t for t in gold if t in text)
        return json_answer(command="{command}" if task == stuck else gold[task])

    models = Models(task=scripted_lm(task_answer, name="demo-task"),
                    reflection=scripted_lm(lambda m: json_answer(new_instruction="Answer with one command."),
                                           role="reflection", name="demo-refl"))
    out = api.run(exp, run_dir=tmp_path / "run", progress=False, models=models, echo=lambda m: None)
    splits = out.report["splits"]
    errors = sum(splits[s]["before"]["lm_errors"] for s in splits)
    passed = sum(splits[s]["before"]["pass"] for s in splits)
    assert errors == 1 and passed == 5, splits
    assert "{command}" not in Path(tmp_path / "run" / "report.md").read_text()
