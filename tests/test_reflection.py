import dspy
import pytest
from dspy.utils import DummyLM

from verifirst.programs._extract import ExtractionStats, extract_command, looks_like_command
from verifirst.programs.bash_judges import BashJudgeError
from verifirst.programs.reflection import EvaluatorReflectionAgent, SelfReflectionAgent


class ScriptedJudge(dspy.Module):
    """Verdicts in order; records the commands it was asked about."""

    name = "scripted"

    def __init__(self, verdicts):
        super().__init__()
        self.verdicts, self.seen = list(verdicts), []

    def forward(self, task, command):
        self.seen.append(command)
        v = self.verdicts.pop(0)
        if isinstance(v, Exception):
            raise v
        return dspy.Prediction(verdict=v, feedback="" if v else f"wrong: {command}", reasoning="r", score=float(v))


def gen(cmd):
    return {"command": cmd}


def rev(text):
    return {"revised_command": text}


def test_evaluator_stops_when_the_judge_accepts():
    judge = ScriptedJudge([False, True, True])
    lm = DummyLM([gen("seq 0 10"), rev("The fix:\n```bash\nseq 1 10\n```")])
    with dspy.context(lm=lm):
        p = EvaluatorReflectionAgent(judge, max_attempts=5)(task="print 1 to 10")
    assert p.command == "seq 1 10" and p.accepted is True and p.stop_reason == "judge_accepted"
    assert p.n_attempts == 2 and judge.seen == ["seq 0 10", "seq 1 10"]
    assert len(lm.history) == 2  # one draft, one rewrite, nothing after acceptance
    assert "wrong: seq 0 10" in lm.history[1]["messages"][-1]["content"]  # feedback reached the reviser
    assert p.extraction_failures == 0


@pytest.mark.parametrize("max_attempts", [1, 2, 4])
def test_evaluator_respects_max_attempts(max_attempts):
    judge = ScriptedJudge([False] * 10)
    lm = DummyLM([gen("ls")] + [rev(f"ls -{'a' * i}") for i in range(1, 10)])
    with dspy.context(lm=lm):
        p = EvaluatorReflectionAgent(judge, max_attempts=max_attempts)(task="list files")
    assert p.n_attempts == max_attempts == len(judge.seen) == len(lm.history)
    assert p.accepted is False and p.stop_reason == "max_attempts"
    assert p.command == (f"ls -{'a' * (max_attempts - 1)}" if max_attempts > 1 else "ls")


def test_unusable_rewrite_keeps_command_is_counted_and_not_rejudged():
    judge = ScriptedJudge([False, True])
    lm = DummyLM([gen("ls"), rev("I am not sure what to do here."), rev("`ls -a`")])
    agent = EvaluatorReflectionAgent(judge, max_attempts=3)
    with dspy.context(lm=lm):
        p = agent(task="list all files")
    assert [a["command"] for a in p.attempts] == ["ls", "ls", "ls -a"]
    assert p.extraction_failures == 1 and judge.seen == ["ls", "ls -a"] and p.accepted is True
    assert agent.extraction.failures == 1 and agent.extraction.total == 3


def test_judge_error_stops_without_a_verdict_and_initial_skips_the_generator():
    judge = ScriptedJudge([BashJudgeError("lm down")])
    lm = DummyLM([])
    with dspy.context(lm=lm):
        p = EvaluatorReflectionAgent(judge)(task="t", initial="echo hi")
    assert p.stop_reason == "judge_error" and p.accepted is None and p.command == "echo hi"
    assert len(lm.history) == 0


def test_self_reflection_accepts_or_rewrites_within_max_attempts():
    ok = {"critique": "fine", "correct": True, "revised_command": "seq 10"}
    with dspy.context(lm=DummyLM([gen("seq 10"), ok])):
        p = SelfReflectionAgent(max_attempts=3)(task="print 1 to 10")
    assert p.n_attempts == 1 and p.stop_reason == "self_accepted" and p.command == "seq 10"

    bad = {"critique": "starts at 0", "correct": False, "revised_command": "```sh\nseq 1 10\n```"}
    lm = DummyLM([gen("seq 0 10"), bad, bad, bad])
    with dspy.context(lm=lm):
        p = SelfReflectionAgent(max_attempts=2)(task="print 1 to 10")
    assert p.n_attempts == 2 and p.command == "seq 1 10" and p.stop_reason == "max_attempts"
    assert len(lm.history) == 2 and p.attempts[0]["critique"] == "starts at 0"
    with pytest.raises(ValueError):
        SelfReflectionAgent(max_attempts=0)


def test_deepcopy_gets_fresh_counters():
    agent = EvaluatorReflectionAgent(ScriptedJudge([]))
    agent.extraction.add(extract_command("nothing here."))
    assert agent.deepcopy().extraction.total == 0 and agent.extraction.failures == 1


@pytest.mark.parametrize("text, command, method", [
    ("```bash\nfind . -name '*.txt'\n```", "find . -name '*.txt'", "fence"),
    ("Old: `ls`\n```bash\nls\n```\nNew:\n```bash\nls -la\n```", "ls -la", "fence"),
    ("```console\n$ seq 3\n1\n2\n3\n```", "seq 3", "fence"),
    ("$ echo hi\nhi\n$ wc -l f", "echo hi\nwc -l f", "prompt"),
    ("**Corrected command:** `wc -l file.txt`", "wc -l file.txt", "label"),
    ("Answer: sort -u names.txt", "sort -u names.txt", "label"),
    ("You can use `sort -u` for this.", "sort -u", "inline"),
    ("To print them, run:\nseq 1 10\nThat prints ten lines.", "seq 1 10", "line"),
    ("Here it is:\nfor f in *.txt; do\n  wc -l \"$f\"\ndone\nThis counts lines.",
     "for f in *.txt; do\n  wc -l \"$f\"\ndone", "line"),
    ("greet() { echo \"Hello $1\"; }", "greet() { echo \"Hello $1\"; }", "line"),
    ("seq 1 10", "seq 1 10", "line"),
])
def test_extraction_formats(text, command, method):
    ex = extract_command(text)
    assert (ex.command, ex.method, ex.ok) == (command, method, True)


@pytest.mark.parametrize("text", ["", None, "I cannot help with that.", "The command is already correct.",
                                  "```python\nprint(1)\n```", "for i in; do"])
def test_extraction_failures_are_reported_and_counted(text):
    stats = ExtractionStats()
    ex = extract_command(text)
    stats.add(ex)
    assert ex.ok is False and ex.command is None
    assert stats.as_dict() == {"total": 1, "failures": 1, "by_method": {"none": 1}}


def test_looks_like_command():
    assert looks_like_command("find /testbed -name '*.sh'") and looks_like_command("X=1 echo $X")
    assert looks_like_command("[[ -f a ]] && echo y") and looks_like_command("/bin/ls")
    assert not looks_like_command("The command lists files") and not looks_like_command("frobnicate --x")


# ---- S0 Task 2 on a scripted setup ----------------------------------------------------------

from verifirst.benchmarks.studies.refinement import default_conditions, run_refinement  # noqa: E402
from verifirst.core.task import Item  # noqa: E402
from verifirst.verifiers.base import Verdict  # noqa: E402


class FakeVerifier:
    name = "fake"

    def __init__(self):
        self.calls = 0

    def verify(self, item, candidate):
        self.calls += 1
        ok = candidate == item.gold["command"]
        return Verdict(float(ok), ok)


def draft_generator(task):
    k = int(task[1:])
    return dspy.Prediction(command=f"c{k}" if k in (0, 1) else f"w{k}")


def fixer(task, initial):
    k = int(task[1:])
    cmd = f"c{k}" if k in (2, 3, 4) else ("bad" if k == 0 else initial)
    return dspy.Prediction(command=cmd, n_attempts=2, extraction_failures=1 if k == 5 else 0,
                           stop_reason="judge_accepted", accepted=True)


def crasher(task, initial):
    if task == "t5":
        raise ConnectionError("lm down")
    return dspy.Prediction(command=initial, n_attempts=1)


def items(n=6):
    return [Item(f"i{k}", {"task": f"t{k}"}, {"command": f"c{k}"}) for k in range(n)]


def test_refinement_accuracy_and_paired_mcnemar():
    v = FakeVerifier()
    rep = run_refinement({"s": items()}, draft_generator, {"fixer": fixer, "crash": crasher}, v)
    s = rep["suites"]["s"]
    g, f, c = s["conditions"]["generator"], s["conditions"]["fixer"], s["conditions"]["crash"]
    assert (g["passed"], g["n"], g["accuracy"]) == (2, 6, 2 / 6)
    assert (f["passed"], f["n"], f["extraction_failures"], f["mean_attempts"], f["accepted"]) == (4, 6, 1, 2.0, 6)
    assert (c["n"], c["lm_errors"], c["passed"]) == (5, 1, 2)  # the LM error is not scored as a FAIL
    m = s["mcnemar_vs_generator"]["fixer"]
    assert (m["fixed"], m["broken"], m["test"]["b"], m["test"]["c"]) == (3, 1, 3, 1)
    assert m["test"]["p_value"] == pytest.approx(10 / 16)
    assert s["mcnemar_vs_generator"]["crash"]["n_pairs"] == 5
    assert "generator" not in s["mcnemar_vs_generator"]
    # one execution per distinct command per item
    distinct = sum(len({r["command"] for r in row["conditions"].values() if r["command"]}) for row in rep["rows"])
    assert v.calls == distinct
    with pytest.raises(Exception, match="reserved"):
        run_refinement(items(), draft_generator, {"generator": fixer}, v)


def test_refinement_with_the_real_agents_and_a_scripted_judge():
    judge = ScriptedJudge([False, True])
    conds = default_conditions({"scripted": judge}, self_reflection=False, max_attempts=3)
    assert list(conds) == ["reflection+scripted"]
    item = Item("p", {"task": "print 1 to 10"}, {"command": "seq 1 10"})
    with dspy.context(lm=DummyLM([rev("Fixed:\n```bash\nseq 1 10\n```")])):
        rep = run_refinement([item], lambda task: dspy.Prediction(command="seq 0 10"), conds, FakeVerifier())
    s = rep["suites"]["suite"]
    assert s["conditions"]["generator"]["passed"] == 0
    assert s["conditions"]["reflection+scripted"]["passed"] == 1
    assert s["conditions"]["reflection+scripted"]["mean_attempts"] == 2
    assert s["mcnemar_vs_generator"]["reflection+scripted"]["fixed"] == 1
    assert judge.seen == ["seq 0 10", "seq 1 10"]
