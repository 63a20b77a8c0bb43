"""Experiment files (TOML): schema, defaults, validation with errors naming file, line and key."""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from .errors import ConfigError

# section -> key -> (types, default, help)
SCHEMA: dict[str, dict[str, tuple[tuple[type, ...], Any, str]]] = {
    "experiment": {
        "name": ((str,), "experiment", "name of the MLflow experiment and run"),
        "workdir": ((str,), ".verifirst", "directory for cache, runs and the local MLflow store"),
        "seed": ((int,), 0, "seed for splits and optimizers"),
        "threads": ((int,), 1, "parallel program calls during evaluation and optimization"),
        "max_error_rate": ((float, int), 0.5, "stop when more than this fraction of items are LM errors"),
        "executor": ((str,), "thread", "where items run: thread (this process) | ray (Ray tasks)"),
        "ray_address": ((str,), None, "Ray cluster: 'auto', a ray:// URL, or empty for a local cluster"),
        "description": ((str,), "", "free text"),
    },
    "suite": {
        "name": ((str,), None, "suite to load (see `verifirst suites`)"),
        "path": ((str,), None, "file or directory the suite reads, where it needs one"),
        "limit": ((int,), None, "use only the first N items (after a seeded shuffle)"),
        "options": ((dict,), {}, "suite-specific options"),
    },
    "program": {
        "name": ((str,), None, "program to optimize (see `verifirst programs`)"),
        "options": ((dict,), {}, "program-specific options, e.g. variant = \"cot\""),
    },
    "verifier": {
        "name": ((str,), None, "verifier that scores each output"),
        "options": ((dict,), {}, "verifier-specific options"),
    },
    "splits": {
        "ratios": ((list,), [0.5, 0.25, 0.25], "train, val, test fractions"),
        "stratify": ((str,), None, "item meta field to stratify on"),
        "manifest": ((str,), None, "reuse a saved split manifest instead of splitting"),
    },
    "optimizer": {
        "name": ((str,), "gepa", "gepa | simba | autorefine | none"),
        "max_metric_calls": ((int,), None, "GEPA budget in metric calls"),
        "auto": ((str,), None, "GEPA budget preset: light | medium | heavy"),
        "max_iters": ((int,), None, "SIMBA steps / AutoRefine iterations"),
        "options": ((dict,), {}, "engine-specific options"),
    },
    "models": {
        "task": ((str, dict, list), "local", "model for the program: 'local' or a LiteLLM model string"),
        "reflection": ((str, dict, list), None, "model that proposes instructions (GEPA, SIMBA)"),
        "teacher": ((str, dict, list), None, "informed teacher (AutoRefine)"),
        "judge": ((str, dict, list), None, "model for LLM checks inside verifiers"),
        "temperature": ((float, int), None, "sampling temperature for every role unless set per role"),
    },
    "tracking": {
        "uri": ((str,), None, "MLflow tracking URI (default: sqlite in the workdir)"),
        "experiment": ((str,), None, "MLflow experiment name (default: experiment.name)"),
        "enabled": ((bool,), True, "log to MLflow"),
        "register_prompt": ((bool,), True, "register the optimized instruction in the prompt registry"),
        "traces": ((bool,), True, "trace each evaluated program call (DSPy autolog) with verifier feedback"),
    },
}
REQUIRED = {("suite", "name"), ("program", "name"), ("verifier", "name")}


def _line_of(text: str, section: str, key: str | None) -> int | None:
    lines = text.splitlines()
    in_sec = section == ""
    for i, line in enumerate(lines, 1):
        s = line.strip()
        if s.startswith("["):
            in_sec = s.strip("[] ") == section
            if key is None and in_sec:
                return i
            continue
        if in_sec and key is not None and re.match(rf"{re.escape(key)}\s*=", s):
            return i
    return None


@dataclass
class Experiment:
    path: Path | None
    raw: dict
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __getattr__(self, name: str) -> dict[str, Any]:
        try:
            return self.__dict__["sections"][name]
        except KeyError:
            raise AttributeError(name) from None

    def as_dict(self) -> dict:
        return {k: dict(v) for k, v in self.sections.items()}


def validate(data: dict, path: Path | None = None, text: str = "") -> Experiment:
    src = str(path) if path else "<experiment>"
    for sec, body in data.items():
        if sec not in SCHEMA:
            raise ConfigError(f"unknown section [{sec}]", path=src, line=_line_of(text, sec, None),
                              field=sec, expected="one of " + ", ".join(f"[{s}]" for s in SCHEMA))
        if not isinstance(body, dict):
            raise ConfigError("must be a table", path=src, field=sec, expected=f"[{sec}] with keys")
    sections: dict[str, dict[str, Any]] = {}
    for sec, keys in SCHEMA.items():
        body = data.get(sec, {})
        out: dict[str, Any] = {}
        for k, v in body.items():
            if k not in keys:
                raise ConfigError(f"unknown key {k!r}", path=src, line=_line_of(text, sec, k),
                                  field=f"{sec}.{k}", expected="one of " + ", ".join(keys))
            types = keys[k][0]
            if isinstance(v, bool) and bool not in types:
                ok = False
            else:
                ok = isinstance(v, types)
            if not ok:
                names = " or ".join(t.__name__ for t in types)
                raise ConfigError(f"wrong type {type(v).__name__}", path=src, line=_line_of(text, sec, k),
                                  field=f"{sec}.{k}", expected=names)
            out[k] = v
        for k, (_, default, _) in keys.items():
            out.setdefault(k, default if not isinstance(default, (dict, list)) else type(default)(default))
        sections[sec] = out
    for sec, k in sorted(REQUIRED):
        if sections[sec].get(k) is None:
            raise ConfigError("missing required key", path=src, line=_line_of(text, sec, None),
                              field=f"{sec}.{k}", expected=SCHEMA[sec][k][2])
    r = sections["splits"]["ratios"]
    if len(r) != 3 or not all(isinstance(x, (int, float)) for x in r) or abs(sum(r) - 1) > 1e-6:
        raise ConfigError(f"ratios {r} are not three numbers summing to 1", path=src,
                          line=_line_of(text, "splits", "ratios"), field="splits.ratios",
                          expected="e.g. [0.5, 0.25, 0.25]")
    if sections["experiment"]["threads"] < 1:
        raise ConfigError("threads must be >= 1", path=src, field="experiment.threads", expected="1 or more")
    from .lm import check_spec

    for role in ("task", "reflection", "teacher", "judge"):
        spec = sections["models"].get(role)
        if spec is None:
            continue
        # A list names several endpoints for one role (served through LiteLLM's Router).
        endpoints = spec if isinstance(spec, list) else [spec]
        if not endpoints:
            raise ConfigError("empty endpoint list", path=src, line=_line_of(text, "models", role),
                              field=f"models.{role}", expected="one or more {model = ..., api_base = ...}")
        for i, one in enumerate(endpoints):
            where = f"models.{role}" + (f"[{i}]" if isinstance(spec, list) else "")
            model = one if isinstance(one, str) else one.get("model") if isinstance(one, dict) else None
            try:
                check_spec(model, field_name=where)
            except ConfigError as e:
                raise ConfigError(str(e).split(": ", 1)[-1], path=src, line=_line_of(text, "models", role),
                                  field=where) from None
        if isinstance(spec, list):  # keys, router settings and their agreement across endpoints
            from .lm_router import parse_endpoints

            try:
                parse_endpoints(role, spec)
            except ConfigError as e:
                raise ConfigError(str(e).split(": ", 1)[-1], path=src, line=_line_of(text, "models", role),
                                  field=e.field) from None
    if sections["experiment"]["executor"] not in ("thread", "ray"):
        raise ConfigError(f"unknown executor {sections['experiment']['executor']!r}", path=src,
                          line=_line_of(text, "experiment", "executor"), field="experiment.executor",
                          expected="thread | ray")
    return Experiment(path, data, sections)


def load(path: str | Path) -> Experiment:
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError("experiment file not found", path=str(path)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+)", str(e))
        raise ConfigError(f"not valid TOML: {e}", path=str(path), line=int(m.group(1)) if m else None) from None
    return validate(data, path, text)


def from_dict(data: dict) -> Experiment:
    return validate(data, None, "")
