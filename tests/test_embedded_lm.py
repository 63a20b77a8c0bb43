"""The embedded default for real: SmolLM2-135M in-process through llama.cpp.

These run the actual model (no scripted LM): batched prompts decode, JSON-schema grammar makes
typed outputs parse, threads share one model safely, and the engine counts its calls.
"""
from concurrent.futures import ThreadPoolExecutor

import dspy
import pytest

from verifirst.lm import FastJSONAdapter, make_lm

pytestmark = pytest.mark.integration


class Judge(dspy.Signature):
    """Say whether the command does the task."""

    task: str = dspy.InputField()
    command: str = dspy.InputField()
    verdict: bool = dspy.OutputField()
    confidence: float = dspy.OutputField()
    reason: str = dspy.OutputField()


@pytest.fixture(scope="module")
def lm():
    return make_lm("local", role="judge", cache=False, max_tokens=48)


def test_typed_outputs_parse_under_the_grammar(lm):
    judge = dspy.Predict(Judge)
    with dspy.context(lm=lm, adapter=FastJSONAdapter()):
        for cmd in ("ls -la /tmp", "rm -rf /", "find . -name '*.py' | wc -l"):
            p = judge(task="count the python files below the current directory", command=cmd)
            assert isinstance(p.verdict, bool) and isinstance(p.confidence, float)
            assert isinstance(p.reason, str)


def test_long_prompt_decodes(lm):
    # a multi-hundred-token prompt is decoded in batches; this is what crashed with AMX buffers
    with dspy.context(lm=lm, adapter=FastJSONAdapter()):
        p = dspy.Predict("text -> summary")(text="the sandbox copies the fixture and runs the command. " * 60)
    assert isinstance(p.summary, str)


def test_threads_share_one_model(lm):
    engine = lm.engine
    before = engine.calls
    judge = dspy.Predict(Judge)

    def call(i):
        with dspy.context(lm=lm, adapter=FastJSONAdapter()):
            return judge(task=f"print {i}", command=f"echo {i}").verdict

    with ThreadPoolExecutor(4) as pool:
        verdicts = list(pool.map(call, range(8)))
    assert all(isinstance(v, bool) for v in verdicts)
    assert engine.calls - before == 8
