"""A fake OpenAI-compatible chat endpoint on 127.0.0.1 for fault-injection tests.

Modes (switchable while it runs, `server.mode = "ok"`):
  ok          a JSON object with every output field the prompt asks for
  500, 429    that HTTP status with an OpenAI-style error body
  hang        sleeps `hang_s` (bounded by MAX_HANG_S), then answers like ok
  malformed   HTTP 200 whose body is not JSON
  empty       a completion with `choices: []`
  truncated   finish_reason "length" and the JSON cut in the middle
  wrongschema valid JSON naming none of the asked fields
  flaky       every 3rd request is a 500, the others ok

Bounded: it serves in a daemon thread and stops itself after `lifetime_s` even if a test forgets.
Counts requests in total and by the mode that answered them.
"""
from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES = ("ok", "500", "429", "hang", "malformed", "empty", "truncated", "wrongschema", "flaky")
MAX_HANG_S = 10.0
# JSONAdapter's user message: "Respond with a JSON object in the following order of fields: `a`, then `b`."
_FIELDS = re.compile(r"order of fields: (.+?)\.?\s*$", re.M)
# The system message: "1. `verdict` (Literal['PASS', 'FAIL']): ..."
_LITERAL = re.compile(r"`(\w+)` \(Literal\[([^\]]*)\]\)")


def asked_fields(messages: list[dict]) -> tuple[list[str], dict[str, str]]:
    """The output fields a DSPy JSONAdapter prompt asks for, and a first allowed value of each Literal."""
    text = "\n".join(str(m.get("content") or "") for m in messages)
    fields: list[str] = []
    for m in _FIELDS.finditer(text):
        fields = re.findall(r"`(\w+)`", m.group(1))
    literals = {name: re.findall(r"'([^']*)'", values)[0] for name, values in _LITERAL.findall(text)
                if re.findall(r"'([^']*)'", values)}
    return fields, literals


def ok_content(messages: list[dict]) -> str:
    fields, literals = asked_fields(messages)
    return json.dumps({f: literals.get(f, "printf hi" if f == "command" else "ok") for f in fields or ["answer"]})


class FakeEndpoint:
    """`with FakeEndpoint("500") as fake:` -> fake.base_url is http://127.0.0.1:PORT/v1."""

    def __init__(self, mode: str = "ok", *, hang_s: float = 3.0, lifetime_s: float = 300.0):
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; one of {MODES}")
        self.mode = mode
        self.hang_s = min(hang_s, MAX_HANG_S)
        self.requests = 0
        self.by_mode: Counter = Counter()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._timer = threading.Timer(lifetime_s, self.stop)
        self._timer.daemon = True
        self._stopped = False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> "FakeEndpoint":
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()

    def reset_counts(self) -> None:
        with self._lock:
            self.requests = 0
            self.by_mode.clear()

    def __enter__(self) -> "FakeEndpoint":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _take(self) -> tuple[str, int]:
        with self._lock:
            self.requests += 1
            mode = self.mode
            if mode == "flaky":
                mode = "500" if self.requests % 3 == 0 else "ok"
            self.by_mode[mode] += 1
            return mode, self.requests

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet: tests read stderr
                pass

            def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
                    pass

            def do_GET(self):
                self._send(200, json.dumps({"object": "list", "data": [{"id": "whatever", "object": "model"}]}).encode())

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    body = {}
                mode, n = fake._take()
                messages = body.get("messages") or []
                if mode in ("500", "429"):
                    err = {"error": {"message": f"fake {mode}", "type": "server_error" if mode == "500" else
                                     "rate_limit_exceeded", "code": int(mode)}}
                    self._send(int(mode), json.dumps(err).encode())
                    return
                if mode == "malformed":
                    self._send(200, b'{"id": "x", "choices": [ this is not json')
                    return
                if mode == "hang":
                    time.sleep(fake.hang_s)
                content, finish = ok_content(messages), "stop"
                if mode == "truncated":
                    content, finish = content[: max(1, len(content) // 2)], "length"
                elif mode == "wrongschema":
                    content = json.dumps({"unrelated": "field", "n": 3})
                choices = [] if mode == "empty" else [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}]
                resp = {"id": f"fake-{n}", "object": "chat.completion", "created": int(time.time()),
                        "model": body.get("model") or "whatever", "choices": choices,
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
                self._send(200, json.dumps(resp).encode())

        return Handler
