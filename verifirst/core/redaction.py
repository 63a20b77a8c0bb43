"""Credentials stay in memory: every copy of a config, params, report, trace or log line that
verifirst writes goes through `redact` first.

Two rules, applied together:
- by name: the value of a key that names a credential (`api_key`, `*_key`, `*token`, `*secret`,
  `*password`, `*credentials`; `Authorization` and `*-key` headers) becomes `***`. Counts that
  only mention tokens (`max_tokens`, `prompt_tokens`, `input_cost_per_token`) are not credentials.
- by value: every credential seen by name (and every credential-named environment variable) is
  registered, so the same secret inside free text (an error message, a log line, a header dump)
  is masked too.
"""
from __future__ import annotations

import logging
import os
import re
import threading
from typing import Any

REDACTED = "***"
MIN_SECRET_LEN = 8  # shorter values are too common to mask in free text without mangling it

_CREDENTIAL_NAME = re.compile(r"(?:^|_)(?:api_?key|key|token|secret|password|passwd|passphrase|credentials?)$")
# names that end like a credential but say what they are: counts, prices, tokenizer symbols, data keys
_NOT_CREDENTIAL = re.compile(r"(?:tokens|_per_token|^key|^(?:eos|bos|pad|stop|sep|cls|unk|mask|start|end)_token"
                             r"|^(?:sort|group|cache|primary|partition|foreign|dedup|join|lookup|stratify|item|label"
                             r"|id|row|index|split)_key)$")
_HEADER_DICTS = {"headers", "extra_headers", "default_headers"}
# an Authorization header's value in a dump ("authorization": "Bearer x", Authorization: Basic x),
# and a bearer token anywhere: their shape says what they are even when nobody registered them
_AUTH_VALUE = re.compile(r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?)(?:(bearer|basic)\s+)?[^\s\"',}]{8,}")
_BEARER = re.compile(r"\b([Bb]earer)\s+[A-Za-z0-9._~+/=-]{16,}")

_secrets: set[str] = set()
_pattern: list[re.Pattern | None] = [None]
_lock = threading.Lock()
_env_seen: list[bool] = [False]


def is_credential_name(name: Any) -> bool:
    """Whether a setting's name says its value is a credential.

    Args:
        name: a dict key, a param name (`config.models.task.api_key`) or a header name.
    """
    if not isinstance(name, str):
        return False
    last = name.rsplit(".", 1)[-1].strip().lower().replace("-", "_")
    if last == "authorization" or last == "proxy_authorization":
        return True
    return bool(_CREDENTIAL_NAME.search(last)) and not _NOT_CREDENTIAL.search(last)


def register_secret(value: Any) -> None:
    """Remember a credential so that it is masked wherever it appears in text.

    Args:
        value: the secret; non-strings and values shorter than MIN_SECRET_LEN are ignored.
    """
    if not isinstance(value, str) or len(value.strip()) < MIN_SECRET_LEN:
        return
    value = value.strip()
    with _lock:
        if value in _secrets:
            return
        _secrets.add(value)
        # longest first, so a secret that contains another is masked whole
        _pattern[0] = re.compile("|".join(re.escape(s) for s in sorted(_secrets, key=len, reverse=True)))


def register_secrets(obj: Any) -> None:
    """Register every credential-named value inside a config structure.

    Args:
        obj: a dict, list or tuple (nested), as a model config or params.
    """
    if isinstance(obj, dict):
        for k, v in obj.items():
            if is_credential_name(k) and isinstance(v, str):
                register_secret(v)
            elif isinstance(k, str) and k.lower() in _HEADER_DICTS and isinstance(v, dict):
                for hk, hv in v.items():
                    if is_credential_name(hk) and isinstance(hv, str):
                        register_secret(hv.split()[-1] if hv.split() else hv)
                        register_secret(hv)
            else:
                register_secrets(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            register_secrets(v)


def register_env_secrets() -> None:
    """Register the value of every credential-named environment variable (OPENAI_API_KEY, ...):
    the keys LiteLLM reads by itself. Called when models are built; text masking scans once more."""
    _env_seen[0] = True
    for k, v in list(os.environ.items()):
        if is_credential_name(k):
            register_secret(v)


def _register_env() -> None:
    if not _env_seen[0]:
        register_env_secrets()


def redact_text(text: str) -> str:
    """`text` with every registered secret and every bearer/basic credential replaced by ***.

    Args:
        text: free text (an error message, a log line, a file's content).
    """
    if not isinstance(text, str) or not text:
        return text
    _register_env()
    pat = _pattern[0]
    if pat is not None:
        text = pat.sub(REDACTED, text)
    if "uthorization" in text or "UTHORIZATION" in text:
        text = _AUTH_VALUE.sub(lambda m: m.group(1) + (f"{m.group(2)} " if m.group(2) else "") + REDACTED, text)
    if "earer" in text:
        text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    return text


def redact(obj: Any, register: bool = False) -> Any:
    """A copy of `obj` with credentials replaced by `***` (the original is left unchanged).

    Dicts, lists and tuples are walked; a credential-named key's value is masked; strings lose
    registered secrets.

    Args:
        obj: params, a config, a report, a span's attributes: anything JSON-like.
        register: also register its credential-named values (a model config: then other copies
            of them in text are masked too). Data never registers: a dataset field that happens
            to be called `token` would otherwise mask that text everywhere.
    """
    if register:
        register_secrets(obj)
    return _redact(obj)


def _redact(obj: Any) -> Any:
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if is_credential_name(k) and v not in (None, "") and not isinstance(v, (bool, int, float)):
                out[k] = REDACTED
            else:
                out[k] = _redact(v)
        return out
    if isinstance(obj, list):
        return [_redact(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_redact(v) for v in obj)
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


def redact_values(obj: Any) -> Any:
    """A copy of `obj` whose strings lose every registered secret; keys are not looked at (data).

    Args:
        obj: anything JSON-like.
    """
    if isinstance(obj, dict):
        return {k: redact_values(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact_values(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(redact_values(v) for v in obj)
    return redact_text(obj) if isinstance(obj, str) else obj


class RedactingFilter(logging.Filter):
    """Masks credentials in a log record's message (its arguments merged in first)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # a record whose args do not fit its format: leave it to logging
            return True
        clean = redact_text(msg)
        if clean != msg:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            # the traceback text is cached on the record, so formatters print the masked one
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        return True


_FILTER = RedactingFilter()
_installed: list[bool] = [False]


def install_log_redaction() -> None:
    """Mask credentials in every log record this process makes (idempotent).

    A Filter on a logger misses records of its child loggers (`dspy.clients.lm` under `dspy`), so
    the filter runs where every record is made: in the log record factory.
    """
    with _lock:
        if _installed[0]:
            return
        _installed[0] = True
        make = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        _FILTER.filter(record)
        return record

    logging.setLogRecordFactory(factory)


def span_processor(span: Any) -> None:
    """An MLflow span processor: a span's inputs, outputs and attributes lose their credentials
    before the trace is exported (DSPy LM spans carry the LM's kwargs, headers among them).

    Args:
        span: the mlflow LiveSpan about to be exported.
    """
    for key, value in list((span.attributes or {}).items()):  # an LM span's attributes are its settings
        if is_credential_name(key) and isinstance(value, str):
            register_secret(value)
        clean = REDACTED if is_credential_name(key) and value not in (None, "") else redact(value, register=True)
        if clean != value:
            span.set_attribute(key, clean)
    # inputs and outputs are the program's data: a field that happens to be called `token` stays,
    # only registered secrets inside them are masked
    inputs, outputs = span.inputs, span.outputs
    if inputs is not None:
        clean = redact_values(inputs)
        if clean != inputs:
            span.set_inputs(clean)
    if outputs is not None:
        clean = redact_values(outputs)
        if clean != outputs:
            span.set_outputs(clean)
    _redact_events(getattr(span, "_span", None))


def _redact_events(otel_span: Any) -> None:
    """Exception events (their message and stack trace quote what the provider said, a key it
    echoed too) rewritten in place: the span is not ended yet, and OpenTelemetry has no setter."""
    events = getattr(otel_span, "_events", None)
    store = getattr(events, "_dq", events)
    if not store:
        return
    from opentelemetry.sdk.trace import Event

    for i, ev in enumerate(list(store)):
        attrs = dict(ev.attributes or {})
        clean = redact(attrs)
        if clean != attrs:
            store[i] = Event(ev.name, attributes=clean, timestamp=ev.timestamp)
