"""The embedded model's ceilings (issue 38): its memory (a child process under RLIMIT_AS,
VERIFIRST_LOCAL_MEMORY_MB), its generation length (MAX_TOKENS_CAP per request) and its output
schema's grammar (MAX_GRAMMAR_CHARS), each exceeded with a clear error, never an OOM kill."""
from __future__ import annotations

import os
import time

import pytest

pytest.importorskip("llama_cpp")
from dspy.lm15 import Config, Message, Request  # noqa: E402
from dspy.utils.exceptions import LMProviderError  # noqa: E402

from verifirst.core.errors import ConfigError  # noqa: E402
from verifirst.lm import _local_engine  # noqa: E402
from verifirst.lm._local_engine import (MAX_GRAMMAR_CHARS, MAX_STRING_CHARS, MAX_TOKENS_CAP,  # noqa: E402
                                        LlamaCppEngine, LocalMemoryExceeded, LocalSchemaTooLarge,
                                        memory_ceiling_mb)

IAC_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["reasoning", "config"],
              "properties": {"reasoning": {"type": "string"}, "config": {"type": "string"}}}


def _request(max_tokens: int, schema: dict | None = None, text: str = "count") -> Request:
    fmt = {"type": "json_schema", "schema": schema} if schema else None
    return Request(model="local", messages=(Message.user(text),), config=Config(max_tokens=max_tokens,
                                                                                  response_format=fmt))


@pytest.mark.parametrize("n,required,why", [
    (1500, True, "a grammar of 6"),  # 612,574 characters
    (2000, False, "too deep a grammar"),  # llama_cpp's converter recursed once per optional field
])
def test_a_schema_whose_grammar_is_too_large_is_refused_before_any_model_or_process(n, required, why):
    eng = LlamaCppEngine()
    names = [f"field_{i}" for i in range(n)]
    wide = {"type": "object", "properties": {k: {"type": "string"} for k in names}}
    if required:
        wide["required"] = names
    with pytest.raises(LocalSchemaTooLarge, match=f"{why}.*ceiling of 200,000"):
        eng.complete(_request(384, wide))
    assert eng._worker is None and eng._llm is None and eng.calls == 0
    assert isinstance(LocalSchemaTooLarge("x"), LMProviderError)  # counted as the request's LM error


@pytest.mark.parametrize("max_tokens", [384, 1024, 100_000])
def test_the_iac_generator_schema_stays_far_under_the_grammar_ceiling(max_tokens):
    bounded = _local_engine._bounded(IAC_SCHEMA, min(max_tokens, MAX_TOKENS_CAP))
    assert all(p["maxLength"] <= MAX_STRING_CHARS for p in bounded["properties"].values())
    assert len(LlamaCppEngine().grammar(bounded)) < MAX_GRAMMAR_CHARS / 4


class FakeLlama:
    """Generates as many tokens as it is allowed to."""

    def __init__(self):
        self.asked = []

    def set_seed(self, seed):
        pass

    def create_chat_completion(self, *, messages, max_tokens, **kw):
        self.asked.append(max_tokens)
        return {"id": "fake", "choices": [{"message": {"content": "x" * max_tokens}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": max_tokens}}


def test_a_request_never_generates_past_the_token_cap(monkeypatch):
    eng = LlamaCppEngine(isolate=False)
    fake = FakeLlama()
    monkeypatch.setattr(eng, "_model", lambda: fake)
    out = eng.complete(_request(1_000_000))
    assert fake.asked == [MAX_TOKENS_CAP] and out.usage.output_tokens == MAX_TOKENS_CAP
    assert out.finish_reason == "length"  # cut, and said so: the caller's cache evicts a cut reply
    eng.complete(_request(1_000_000, IAC_SCHEMA))
    assert fake.asked[-1] == MAX_TOKENS_CAP + 48  # the JSON punctuation around bounded strings


@pytest.mark.parametrize("raw,ok", [("", True), ("4096", True), ("abc", False), ("100", False), ("-1", False)])
def test_the_memory_ceiling_comes_from_its_variable(monkeypatch, raw, ok):
    monkeypatch.setenv(_local_engine.MEMORY_ENV, raw)
    if ok:
        assert memory_ceiling_mb() == (int(raw) if raw else _local_engine.DEFAULT_MEMORY_MB)
    else:
        with pytest.raises(ConfigError, match="VERIFIRST_LOCAL_MEMORY_MB"):
            memory_ceiling_mb()


def _rss_mb(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.integration
def test_a_generation_past_the_memory_ceiling_fails_cleanly_and_the_next_one_runs():
    """Under a 512 MB ceiling the model cannot even set up its buffers: the request fails as
    LocalMemoryExceeded naming the ceiling, the child is gone, this process is untouched; under the
    default ceiling the same request is answered, by a child that stays under it."""
    small = LlamaCppEngine(memory_mb=512)
    before = _rss_mb()
    with pytest.raises(LocalMemoryExceeded, match="memory ceiling of 512 MB"):
        small.complete(_request(64, IAC_SCHEMA, "Write Terraform for an S3 bucket."))
    assert small._worker is None or not small._worker.alive()
    assert _rss_mb() - before < 100  # the model never loaded here
    eng = LlamaCppEngine()
    try:
        out = eng.complete(_request(64, IAC_SCHEMA, "Write Terraform for an S3 bucket."))
        assert out.message and eng._worker.alive()
        assert 100 < eng.worker_peak_rss_mb() < eng.memory_mb
        eng._worker.proc.kill()  # a child that died between requests is replaced
        eng._worker.proc.wait()
        t0 = time.monotonic()
        assert eng.complete(_request(8, text="hi")).message and time.monotonic() - t0 < 120
    finally:
        eng.release()
    assert eng._worker is None


def test_the_local_server_answers_a_too_large_schema_with_400_not_500():
    from fastapi.testclient import TestClient

    from verifirst.lm.local_server import make_app

    names = [f"field_{i}" for i in range(1500)]
    schema = {"type": "object", "properties": {k: {"type": "string"} for k in names}, "required": names}
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 16,
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}
    eng = LlamaCppEngine()
    got = TestClient(make_app(eng)).post("/v1/chat/completions", json=body)
    assert got.status_code == 400 and "ceiling of 200,000" in got.json()["error"]["message"]
    assert eng._worker is None  # refused before any model process
