"""FehVerifier's LLM check (confirm, arbiter): its answers decide, its failures are counted and
said, never read as false (shared stand-ins: _feh_testkit)."""
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402
import pytest  # noqa: E402
from dspy.utils import DummyLM  # noqa: E402

from _feh_testkit import bag_embed, cmp, run  # noqa: E402
from verifirst.core.errors import InputError  # noqa: E402
from verifirst.verifiers.bash._feh_compare import FehParams  # noqa: E402
from verifirst.verifiers.bash.feh import FehVerifier  # noqa: E402


class Boom(dspy.LM):
    def __init__(self):
        super().__init__("dummy/boom")

    def forward(self, *a, **k):
        raise RuntimeError("LM down")


def test_llm_confirm_and_arbiter_and_lm_errors():
    g, c = run("alpha beta gamma"), run("alpha beta gamma delta")  # no fact of either contradicts the other
    base = FehVerifier(FehParams(out_threshold=0.5), embed=bag_embed)
    assert cmp(g, c, v=base).passed
    no = FehVerifier(FehParams(out_threshold=0.5), embed=bag_embed, llm="confirm",
                     lm=DummyLM([{"equivalent": "false"}], adapter=dspy.JSONAdapter()))
    v = cmp(g, c, v=no)
    assert not v.passed and v.stage == "LLM" and v.details["llm"]["said"] is False
    assert "LLM check (confirm): false" in v.feedback
    yes = FehVerifier(FehParams(out_threshold=0.5), embed=bag_embed, llm="confirm",
                      lm=DummyLM([{"equivalent": "true"}], adapter=dspy.JSONAdapter()))
    assert cmp(g, c, v=yes).passed
    # identical outputs never reach the LM (DummyLM with no answers would raise)
    assert FehVerifier(embed=bag_embed, llm="confirm", lm=DummyLM([])).compare(
        "t", "a", "b", run("x"), run("x")).passed
    arb = FehVerifier(FehParams(out_threshold=0.9), embed=bag_embed, llm="arbiter", arbiter_margin=0.5,
                      lm=DummyLM([{"equivalent": "true"}], adapter=dspy.JSONAdapter()))
    v = cmp(g, c, v=arb)
    assert v.passed and v.details["rule"] == "output_cosine+llm"
    broken = FehVerifier(FehParams(out_threshold=0.5), embed=bag_embed, llm="confirm", lm=Boom())
    v = cmp(g, c, v=broken)
    assert v.passed and "LM down" in v.details["llm"]["error"] and "LLM check failed" in v.feedback
    with pytest.raises(InputError, match="llm"):
        FehVerifier(llm="maybe")


def test_lm_failures_are_counted_and_said():
    g, c = run("alpha beta gamma"), run("alpha beta gamma delta")  # no fact of either contradicts the other
    broken = FehVerifier(FehParams(out_threshold=0.5), embed=bag_embed, llm="confirm", lm=Boom())
    assert broken.lm_failures == 0
    v = cmp(g, c, v=broken)
    assert v.details["lm_failed"] is True and broken.lm_failures == 1
    cmp(g, c, v=broken)
    assert broken.lm_failures == 2
    # an answer that is neither true nor false is a failure too, never read as false
    from verifirst.verifiers.bash._feh_llm import as_bool

    assert as_bool("True.") is True and as_bool(" false") is False and as_bool(False) is False
    for text in ("maybe", "", "true or false"):
        with pytest.raises(ValueError, match="neither true nor false"):
            as_bool(text)
    ok = FehVerifier(FehParams(out_threshold=0.5), embed=bag_embed, llm="confirm",
                     lm=DummyLM([{"equivalent": "true"}], adapter=dspy.JSONAdapter()))
    assert cmp(g, c, v=ok).details["lm_failed"] is False and ok.lm_failures == 0
    # INCONCLUSIVE pairs never reach the LM (DummyLM without answers would fail)
    quiet = FehVerifier(embed=bag_embed, llm="arbiter", lm=DummyLM([]))
    assert cmp(run(), run(), v=quiet).inconclusive and quiet.lm_failures == 0
