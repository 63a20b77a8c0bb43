"""FEH embeds only what a similarity rule reads: equal texts never, decided pairs not at all."""
from __future__ import annotations

import numpy as np
import pytest

from verifirst.verifiers.bash._feh_compare import RunView, add_cosines, features
from verifirst.verifiers.bash.feh import FehVerifier

LONG = "\n".join(f"line {i}: " + "x" * 60 for i in range(200))


def recording_embed(calls: list):
    def embed(texts):
        calls.append(list(texts))
        v = np.zeros((len(texts), 4), dtype=np.float32)
        for i, t in enumerate(texts):
            v[i, hash(t) % 4] = 1.0
        return v
    return embed


def refuse_embed(texts):
    pytest.fail(f"embedded {len(texts)} texts for a pair decided without similarity")


def test_identical_long_outputs_are_not_embedded():
    calls: list = []
    g = RunView(stdout=LONG, exit_code=1)
    c = RunView(stdout=LONG, exit_code=2)
    f = features(g, c)
    add_cosines(f, g, c, "cmd-a", "cmd-b", recording_embed(calls))
    assert calls == [["cmd-a", "cmd-b"]]  # the outputs were equal: cosine 1 without the model
    assert f.cos_out == 1.0


def test_nothing_embedded_when_every_text_is_equal():
    g = RunView(stdout="same", exit_code=1)
    f = features(g, g)
    add_cosines(f, g, g, "echo same", "echo same", refuse_embed)
    assert (f.cos_out, f.cos_cmd) == (1.0, 1.0)


def test_different_texts_are_embedded_in_one_batch():
    calls: list = []
    g, c = RunView(stdout="alpha"), RunView(stdout="beta")
    f = features(g, c)
    add_cosines(f, g, c, "echo alpha", "echo beta", recording_embed(calls))
    assert calls == [["echo alpha", "echo beta", "alpha", "beta"]]


def test_exactly_equal_runs_never_load_the_embedder():
    v = FehVerifier(embed=refuse_embed)
    run = {"stdout": LONG, "exit_code": 0}
    verdict = v.compare("print lines", "cat f", "sed -n p f", run, dict(run))
    assert verdict.passed is True and verdict.details["rule"] == "identical"
    assert verdict.details["features"]["cos_out"] is None  # never needed, never computed


def test_similarity_rules_still_get_cosines():
    calls: list = []
    v = FehVerifier(embed=recording_embed(calls))
    verdict = v.compare("t", "echo alpha beta", "echo alpha beta gamma delta", {"stdout": "alpha beta"},
                        {"stdout": "alpha beta gamma delta"})  # no fact of either contradicts the other
    assert calls and verdict.details["rule"] in ("output_cosine", "output_overlap")
    assert verdict.details["features"]["cos_out"] is not None


def test_cold_cli_with_equal_outputs_imports_no_model_stack():
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "verifirst.cli", "verify", "bash",
                        "--gold", "echo same", "--pred", "printf 'same\\n'"], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}
    assert not imported & {"torch", "sentence_transformers", "transformers", "dspy", "mlflow", "litellm"}
    assert "verifirst.verifiers.bash.sandbox" in imported  # the pair did run


def test_rules_outside_the_similarity_list_never_read_cosines():
    """Deciding without cosines first is only safe if no other rule reads them: on random
    features, a decision whose rule is not in SIMILARITY_RULES is the same with any cosines."""
    import dataclasses
    import random

    from verifirst.verifiers.bash._feh_compare import FehParams, PairFeatures, decide
    from verifirst.verifiers.bash.feh import SIMILARITY_RULES

    rng = random.Random(7)
    params = [FehParams(), FehParams(fs_veto=False, overlap_threshold=0.5), FehParams(inconclusive=False)]
    names = [f.name for f in dataclasses.fields(PairFeatures)]
    for _ in range(3000):
        kw = {}
        for n in names:
            kind = PairFeatures.__dataclass_fields__[n].type
            kw[n] = (rng.random() < 0.5 if "bool" in str(kind) else
                     rng.randint(0, 5) if "int" in str(kind) else rng.random())
        kw["cos_out"] = kw["cos_cmd"] = None
        f = PairFeatures(**kw)
        for p in params:
            lazy = decide(f, p)
            if lazy.rule in SIMILARITY_RULES:
                continue
            for cos in (0.0, 0.5, 1.0):
                full = decide(dataclasses.replace(f, cos_out=cos, cos_cmd=cos), p)
                assert (full.rule, full.equivalent, full.inconclusive) == (lazy.rule, lazy.equivalent,
                                                                           lazy.inconclusive), kw


def test_embedder_thread_setting_is_checked(monkeypatch):
    from verifirst.core.errors import VerifirstError
    from verifirst.retrieval import embedder

    monkeypatch.delenv("VERIFIRST_EMBED_THREADS", raising=False)
    assert embedder._threads() == 1
    monkeypatch.setenv("VERIFIRST_EMBED_THREADS", "2")
    assert embedder._threads() == 2
    for bad in ("0", "two"):
        monkeypatch.setenv("VERIFIRST_EMBED_THREADS", bad)
        with pytest.raises(VerifirstError, match="VERIFIRST_EMBED_THREADS"):
            embedder._threads()
