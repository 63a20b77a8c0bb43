"""The scripted world of the AutoRefine tests: a rule-following LM and code snippets.

The scripted LM reads the prompt DSPy sends it and acts on what it finds there: as a judge
it applies the `FAIL if the code contains `X`` / `PASS if ...` rules present in its
instructions (and scores rubric check lines); as teacher, proposer and applier it follows
the documented roles. So the loop only improves the judge if it really writes rules into
the prompt.
the prompt. Its tests: test_autorefine (loop, edits, resume), test_autorefine_rubric,
test_autorefine_report and test_autorefine_noise; other test files import RuleFollowingLM and
make_world from here or through test_autorefine.
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

from verifirst.core.task import Item, Suite
from verifirst.loop.splits import make_splits

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

