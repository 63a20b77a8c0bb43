"""OpenAI-compatible endpoint over an in-process engine: what clients send reaches the engine."""
from __future__ import annotations

import json
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pytest
import requests

from verifirst.lm.local_server import BadRequest, parse_chat_body, serve_local
from verifirst.lm.testing import ScriptedEngine


class RecordingEngine(ScriptedEngine):
    def __init__(self, fn=lambda msgs: json.dumps({"answer": "ok"})):
        super().__init__(fn)
        self.requests = []

    def complete(self, request):
        self.requests.append(request)
        return super().complete(request)


def _failing(msgs):
    if "boom" in msgs[-1]["content"]:
        raise RuntimeError("engine fault")
    return "fine"


@pytest.fixture(scope="module")
def served():
    eng = RecordingEngine(_failing)
    url, stop = serve_local(eng, max_tokens_cap=64)
    yield url, eng
    stop()


def _client(url):
    import openai

    return openai.OpenAI(base_url=url, api_key="unused", max_retries=0)


def test_openai_client_round_trip_reaches_engine(served):
    url, eng = served
    r = _client(url).chat.completions.create(
        model="smollm2", messages=[{"role": "system", "content": "be brief"},
                                   {"role": "user", "content": [{"type": "text", "text": "hello"}]}],
        max_completion_tokens=20, temperature=0.3, seed=7, stop="END")
    assert r.choices[0].message.content == "fine"
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens > 0
    req = eng.requests[-1]
    assert req.system == "be brief"
    assert [m.text for m in req.messages] == ["hello"]
    # max_completion_tokens is honoured like max_tokens (llama_cpp.server ignores it)
    assert (req.config.max_tokens, req.config.temperature, req.config.seed, req.config.stop) == (20, 0.3, 7, ("END",))


def test_max_tokens_capped_and_models_listed(served):
    url, eng = served
    _client(url).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], max_tokens=10**6)
    assert eng.requests[-1].config.max_tokens == 64
    ids = [m.id for m in _client(url).models.list().data]
    assert ids == ["smollm2"]


def test_response_formats_reach_engine_as_schema(served):
    url, eng = served
    schema = {"type": "object", "properties": {"result": {"type": "string", "enum": ["PASS", "FAIL"]}},
              "required": ["result"]}
    c = _client(url)
    c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], response_format={
        "type": "json_schema", "json_schema": {"name": "R", "schema": schema, "strict": True}})
    assert eng.requests[-1].config.response_format["schema"] == schema
    c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                              response_format={"type": "json_object"})
    assert eng.requests[-1].config.response_format == {"type": "json_object"}
    c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                              response_format={"type": "text"})
    assert eng.requests[-1].config.response_format is None


def test_engine_fault_is_500_and_server_keeps_serving(served):
    import openai

    url, _ = served
    with pytest.raises(openai.InternalServerError, match="engine fault"):
        _client(url).chat.completions.create(model="m", messages=[{"role": "user", "content": "boom"}])
    r = _client(url).chat.completions.create(model="m", messages=[{"role": "user", "content": "again"}])
    assert r.choices[0].message.content == "fine"


@pytest.mark.parametrize("body,needle", [
    ({"messages": []}, "messages must be a non-empty list"),
    ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}]},
     "tools"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "only text parts"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "role"),
    ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "positive integer"),
    ({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema"}}, "schema"),
])
def test_bad_requests_are_400_with_reason(served, body, needle):
    url, _ = served
    r = requests.post(f"{url}/chat/completions", json=body, timeout=10)
    assert r.status_code == 400
    assert needle in r.json()["error"]["message"]


def test_invalid_json_body_is_400(served):
    url, _ = served
    r = requests.post(f"{url}/chat/completions", data=b"{not json", timeout=10,
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]


def test_stream_and_n(served):
    url, _ = served
    c = _client(url)
    chunks = list(c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stream=True))
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == "fine"
    r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], n=2)
    assert [ch.index for ch in r.choices] == [0, 1]


def test_litellm_and_dspy_openai_route(served, monkeypatch):
    import dspy
    import litellm

    url, eng = served
    r = litellm.completion(model="openai/smollm2", api_base=url, api_key="unused",
                           messages=[{"role": "user", "content": "hi"}], max_tokens=5, num_retries=0)
    assert r.choices[0].message.content == "fine"
    assert eng.requests[-1].config.max_tokens == 5

    json_eng = RecordingEngine(lambda msgs: json.dumps({"answer": "forty-two"}))
    url2, stop = serve_local(json_eng)
    try:
        monkeypatch.setenv("OPENAI_API_BASE", url2)
        monkeypatch.setenv("OPENAI_API_KEY", "unused")
        lm = dspy.LM("openai/smollm2", cache=False, num_retries=0, max_tokens=33)
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            out = dspy.Predict("question -> answer")(question="what?")
        assert out.answer == "forty-two"
        # DSPy's openai route sends max_completion_tokens; it must arrive as the token budget
        assert json_eng.requests[-1].config.max_tokens == 33
    finally:
        stop()


def test_stop_closes_port_and_loopback_only():
    url, stop = serve_local(RecordingEngine())
    assert requests.get(url.rsplit("/v1", 1)[0] + "/health", timeout=5).json()["status"] == "ok"
    stop()
    stop()  # idempotent
    with pytest.raises(requests.ConnectionError):
        requests.get(url + "/models", timeout=2)
    with pytest.raises(ValueError, match="loopback"):
        serve_local(RecordingEngine(), host="0.0.0.0")


def test_parse_chat_body_roles_and_defaults():
    req, n, stream = parse_chat_body({"messages": [
        {"role": "developer", "content": "d"}, {"role": "system", "content": "s"},
        {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"},
        {"role": "tool", "content": "t"}]})
    assert req.system == "d\n\ns"
    assert [(m.role, m.text) for m in req.messages] == [("user", "u"), ("assistant", "a"), ("user", "t")]
    assert (n, stream, req.config.max_tokens, req.config.temperature) == (1, False, None, None)
    req, _, _ = parse_chat_body({"messages": [{"role": "user", "content": "x"}],
                                 "response_format": {"type": "json_object", "schema": {"type": "object"}}})
    assert req.config.response_format["schema"] == {"type": "object"}
    with pytest.raises(BadRequest):
        parse_chat_body({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"})
    req, _, _ = parse_chat_body({"messages": [{"role": "user", "content": "x"}]}, default_max_tokens=99,
                                max_tokens_cap=50)
    assert req.config.max_tokens == 50
    req, _, _ = parse_chat_body({"messages": [{"role": "user", "content": "x"}], "max_tokens": 7},
                                default_max_tokens=40)
    assert req.config.max_tokens == 7
