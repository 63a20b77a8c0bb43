"""An OpenAI-compatible chat-completions endpoint over an in-process engine, on 127.0.0.1.

Tools that only speak HTTP to a model (MLflow judges, LiteLLM, the openai client) can then use
the embedded SmolLM2 (or any object with `complete(dspy.lm15.Request) -> Response`), e.g.
MLflow's `openai:/smollm2` with OPENAI_API_BASE=<base_url> and any API key.

Differences from llama_cpp.server that matter here: `response_format` json_schema is honoured
(the engine turns the schema into a grammar), and `max_completion_tokens` is read like
`max_tokens`, with a server-side cap, so no client can start a runaway generation.
"""
from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from typing import Any, Callable

DEFAULT_MODEL_NAME = "smollm2"
DEFAULT_MAX_TOKENS_CAP = 1024
_TOOLLESS_CHOICES = (None, "none", "auto")


class BadRequest(ValueError):
    """The request body cannot be served; answered with HTTP 400 and this message."""


def _content_text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for j, part in enumerate(content):
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and part.get("type") in ("text", "input_text"):
                out.append(str(part.get("text") or ""))
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise BadRequest(f"{where}.content[{j}]: only text parts are served, got {kind!r}")
        return "".join(out)
    raise BadRequest(f"{where}.content must be a string or a list of text parts")


def _response_format(fmt: Any) -> dict | None:
    """OpenAI response_format -> what our engines read (a `schema` key, or json_object)."""
    if fmt is None:
        return None
    if not isinstance(fmt, dict):
        raise BadRequest("response_format must be an object")
    kind = fmt.get("type")
    if kind in (None, "text"):
        return None
    if kind == "json_object":  # llama.cpp-style json_object may carry a schema
        if isinstance(fmt.get("schema"), dict):
            return {"type": "json_schema", "schema": fmt["schema"]}
        return {"type": "json_object"}
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise BadRequest("response_format.json_schema.schema must be a JSON schema object")
        return {"type": "json_schema", "schema": schema, "name": spec.get("name") or "response"}
    raise BadRequest(f"response_format.type {kind!r} is not one of text, json_object, json_schema")


def parse_chat_body(body: Any, *, max_tokens_cap: int = DEFAULT_MAX_TOKENS_CAP,
                    default_max_tokens: int | None = None):
    """A chat-completions body -> (dspy.lm15.Request, n, stream). Raises BadRequest.

    default_max_tokens applies when the body names no budget (else the engine's default)."""
    from dspy.lm15 import Config, Message, Request

    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("messages must be a non-empty list")
    if body.get("tools") and body.get("tool_choice") != "none":
        raise BadRequest("tools / function calling are not served by this endpoint")
    if body.get("tool_choice") not in _TOOLLESS_CHOICES:
        raise BadRequest("tool_choice needs tools, which this endpoint does not serve")
    system: list[str] = []
    turns = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise BadRequest(f"messages[{i}] must be an object")
        role, text = m.get("role"), _content_text(m.get("content"), f"messages[{i}]")
        if role in ("system", "developer"):
            system.append(text)
        elif role == "assistant":
            turns.append(Message.assistant(text))
        elif role in ("user", "tool"):
            turns.append(Message.user(text))
        else:
            raise BadRequest(f"messages[{i}].role {role!r} is not system, user, assistant or tool")
    if not turns:  # a system-only chat still has to be answered
        turns.append(Message.user(""))
    # max_completion_tokens is what current OpenAI clients (and DSPy's openai/ route) send
    asked = body.get("max_completion_tokens", body.get("max_tokens"))
    if asked is not None and (not isinstance(asked, int) or isinstance(asked, bool) or asked < 1):
        raise BadRequest("max_tokens / max_completion_tokens must be a positive integer")
    if asked is None:
        asked = default_max_tokens
    max_tokens = min(int(asked), max_tokens_cap) if asked is not None else None
    stop = body.get("stop")
    stop = (stop,) if isinstance(stop, str) else tuple(stop or ())
    n = body.get("n", 1) or 1
    if not isinstance(n, int) or n < 1 or n > 16:
        raise BadRequest("n must be an integer from 1 to 16")

    def num(key):
        v = body.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise BadRequest(f"{key} must be a number")
        return v

    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise BadRequest("seed must be an integer")
    cfg = Config(max_tokens=max_tokens, temperature=num("temperature"), top_p=num("top_p"), stop=stop,
                 response_format=_response_format(body.get("response_format")), seed=seed)
    req = Request(model=str(body.get("model") or DEFAULT_MODEL_NAME), messages=tuple(turns),
                  system="\n\n".join(system) if system else None, config=cfg)
    return req, n, bool(body.get("stream"))


def _response_text(resp) -> str:
    msg = getattr(resp, "message", None)
    text = getattr(msg, "text", None) if msg is not None else None
    if text is None and msg is not None:
        text = "".join(getattr(p, "text", "") or "" for p in getattr(msg, "parts", ()))
    return text or ""


def complete_chat(engine, body: dict, *, model_name: str = DEFAULT_MODEL_NAME,
                  max_tokens_cap: int = DEFAULT_MAX_TOKENS_CAP, default_max_tokens: int | None = None) -> dict:
    """One chat.completion object (OpenAI shape) from the engine. Raises BadRequest."""
    req, n, _ = parse_chat_body(body, max_tokens_cap=max_tokens_cap, default_max_tokens=default_max_tokens)
    choices, p_tok, c_tok = [], 0, 0
    for i in range(n):
        resp = engine.complete(req)
        finish = "length" if getattr(resp, "finish_reason", "stop") == "length" else "stop"
        choices.append({"index": i, "message": {"role": "assistant", "content": _response_text(resp)},
                        "finish_reason": finish, "logprobs": None})
        usage = getattr(resp, "usage", None)
        p_tok = int(getattr(usage, "input_tokens", 0) or 0)  # same prompt for every choice
        c_tok += int(getattr(usage, "output_tokens", 0) or 0)
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion",
            "created": int(time.time()), "model": str(body.get("model") or model_name),
            "choices": choices,
            "usage": {"prompt_tokens": p_tok, "completion_tokens": c_tok, "total_tokens": p_tok + c_tok}}


def _stream_chunks(out: dict):
    """A finished completion as server-sent events (clients that ask for a stream still work)."""
    base = {"id": out["id"], "object": "chat.completion.chunk", "created": out["created"], "model": out["model"]}
    for ch in out["choices"]:
        first = {"index": ch["index"], "delta": {"role": "assistant", "content": ch["message"]["content"]},
                 "finish_reason": None}
        yield f"data: {json.dumps({**base, 'choices': [first]})}\n\n"
        last = {"index": ch["index"], "delta": {}, "finish_reason": ch["finish_reason"]}
        yield f"data: {json.dumps({**base, 'choices': [last], 'usage': out['usage']})}\n\n"
    yield "data: [DONE]\n\n"


def _error(status: int, message: str, kind: str):
    from fastapi.responses import JSONResponse

    return JSONResponse(status_code=status, content={"error": {"message": message, "type": kind,
                                                               "param": None, "code": None}})


def make_app(engine, *, model_name: str = DEFAULT_MODEL_NAME, max_tokens_cap: int = DEFAULT_MAX_TOKENS_CAP,
             default_max_tokens: int | None = None):
    """The FastAPI app: POST /v1/chat/completions, GET /v1/models, GET /health."""
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    app = FastAPI(title="verifirst local model", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.requests = 0

    @app.get("/health")
    def health():
        return {"status": "ok", "model": model_name}

    @app.get("/v1/models")
    def models():
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": 0,
                                            "owned_by": "verifirst"}]}

    async def chat(request):  # a plain route: the body is read as is, not validated by FastAPI
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "the body is not valid JSON", "invalid_request_error")
        from starlette.concurrency import run_in_threadpool

        try:  # engines block; keep the event loop free for other requests
            out = await run_in_threadpool(complete_chat, engine, body, model_name=model_name,
                                          max_tokens_cap=max_tokens_cap, default_max_tokens=default_max_tokens)
        except BadRequest as e:
            return _error(400, str(e), "invalid_request_error")
        except Exception as e:  # an engine fault is a server error, never a verdict
            from verifirst.lm._local_engine import LocalSchemaTooLarge

            if isinstance(e, LocalSchemaTooLarge):  # the client's schema, past the engine's ceiling
                return _error(400, str(e), "invalid_request_error")
            return _error(500, f"{type(e).__name__}: {e}", "server_error")
        app.state.requests += 1
        if isinstance(body, dict) and body.get("stream"):
            return StreamingResponse(_stream_chunks(out), media_type="text/event-stream")
        from fastapi.responses import JSONResponse

        return JSONResponse(out)

    app.router.add_route("/v1/chat/completions", chat, methods=["POST"])
    return app


def serve_local(engine=None, port: int = 0, *, host: str = "127.0.0.1", model_name: str = DEFAULT_MODEL_NAME,
                max_tokens_cap: int = DEFAULT_MAX_TOKENS_CAP, default_max_tokens: int | None = None,
                start_timeout_s: float = 30.0) -> tuple[str, Callable[[], None]]:
    """Serve `engine` (default: the embedded SmolLM2) in a background thread.

    Returns (base_url ending in /v1, stop). port=0 picks a free port. Loopback only.
    default_max_tokens: the budget for requests that name none (MLflow's aligned judges
    cannot pass one: align() drops inference_params).
    """
    import uvicorn

    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError(f"serve_local binds loopback only, not {host!r}")
    if engine is None:
        from verifirst.lm import local_engine

        engine = local_engine()
    sock = socket.socket(socket.AF_INET6 if host == "::1" else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    app = make_app(engine, model_name=model_name, max_tokens_cap=max_tokens_cap,
                   default_max_tokens=default_max_tokens)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                              name=f"verifirst-local-server-{bound}")
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise RuntimeError(f"local model server on {host}:{bound} did not start")
        time.sleep(0.01)
    stopped = threading.Event()

    def stop() -> None:
        if stopped.is_set():
            return
        stopped.set()
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()

    url_host = f"[{host}]" if ":" in host else host
    return f"http://{url_host}:{bound}/v1", stop


def cli_serve(port: int = 8000, model_name: str = DEFAULT_MODEL_NAME, echo=print) -> int:
    """Serve the embedded model until interrupted (for `verifirst serve`)."""
    url, stop = serve_local(port=port, model_name=model_name)
    echo(f"serving {model_name} at {url} (OPENAI_API_BASE={url}, any OPENAI_API_KEY); Ctrl-C stops")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        stop()
    return 0


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--model-name", default=DEFAULT_MODEL_NAME)
    a = ap.parse_args()
    raise SystemExit(cli_serve(a.port, a.model_name))
