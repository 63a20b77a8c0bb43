"""Experiment files (TOML): schema, defaults, validation with errors naming file, line and key."""
from __future__ import annotations

import difflib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from verifirst.core.errors import ConfigError, InputError
from verifirst.loop.splits import DEFAULT_RATIOS
from verifirst.core.textfile import lines as text_lines
from verifirst.core.textfile import read_text  # noqa: F401  (config.read_text: the reader experiment files use)

DEFAULT_MAX_ERROR_RATE = 0.5  # the one default for files, the CLI and the Python API

# section -> key -> (types, default, help)
SCHEMA: dict[str, dict[str, tuple[tuple[type, ...], Any, str]]] = {
    "experiment": {
        "name": ((str,), "experiment", "name of the MLflow experiment and run"),
        "workdir": ((str,), ".verifirst", "directory for cache, runs and the local MLflow store (where the command "
                                          "runs; ~ expands)"),
        "seed": ((int,), 0, "seed for splits and optimizers"),
        "threads": ((int,), 1, "parallel program calls during evaluation and optimization"),
        "max_error_rate": ((float, int), DEFAULT_MAX_ERROR_RATE, "stop (exit 1) when more than this fraction of items are LM errors "
                                              "(checked from 10 items on); whatever the rate, an evaluation also stops "
                                              "when its first 5 requests to the model all failed"),
        "executor": ((str,), "thread", "where items run: thread (this process) | ray (Ray tasks)"),
        "ray_address": ((str,), None, "Ray cluster: 'auto', a ray:// URL, or empty for a local cluster"),
        "description": ((str,), "", "free text"),
    },
    "suite": {
        "name": ((str,), None, "suite to load (see `verifirst components`)"),
        "path": ((str,), None, "file or directory the suite reads, where it needs one (relative to this file's "
                                "folder)"),
        "limit": ((int,), None, "use only the first N items (after a seeded shuffle)"),
        "options": ((dict,), {}, "suite-specific options"),
    },
    "program": {
        "name": ((str,), None, "program to optimize (see `verifirst components`)"),
        "options": ((dict,), {}, "program-specific options, e.g. variant = \"cot\""),
    },
    "verifier": {
        "name": ((str,), None, "verifier that scores each output"),
        "options": ((dict,), {}, "verifier-specific options"),
    },
    "splits": {
        "ratios": ((list,), list(DEFAULT_RATIOS), "train, val, test fractions"),
        "stratify": ((str,), None, "item meta field to stratify on"),
        "manifest": ((str,), None, "reuse a saved split manifest instead of splitting (relative to this file's "
                                    "folder)"),
        "no_val": ((bool,), False, "run with an empty validation split (ratios give val 0)"),
        "no_test": ((bool,), False, "run without a held-out test split (ratios give test 0): no test number"),
        "by": ((str,), "random", "random (seeded hash, grouped, stratified) | time (train oldest, test newest)"),
        "time_field": ((str,), None, "by = time: the item field holding its time (ISO 8601, naive = UTC; a date; "
                                     "or epoch seconds)"),
        "windows": ((str, int), None, "by = time: evaluation windows, a duration (\"7d\", \"12h\") or a count (4)"),
    },
    "optimizer": {
        "name": ((str,), "gepa", "gepa | simba | autorefine | none"),
        "max_metric_calls": ((int,), None, "budget in metric calls (GEPA; SIMBA takes the steps that fit it; "
                                          "AutoRefine refuses it: it counts max_iters)"),
        "auto": ((str,), None, "GEPA budget preset: light | medium | heavy"),
        "max_iters": ((int,), None, "SIMBA steps / AutoRefine iterations"),
        "options": ((dict,), {}, "engine-specific options"),
    },
    "models": {
        "task": ((str, dict, list), "local", "model for the program: 'local' or a LiteLLM model string; a table "
                                             "may set timeout_s, seconds per request (default 60, every role) and "
                                             "num_retries (default 3, each attempt counted)"),
        "reflection": ((str, dict, list), None, "model that proposes instructions (GEPA, SIMBA)"),
        "teacher": ((str, dict, list), None, "informed teacher (AutoRefine)"),
        "judge": ((str, dict, list), None, "model for LLM checks inside verifiers"),
        "temperature": ((float, int), None, "sampling temperature for every role unless set per role"),
    },
    "budget": {
        "max_usd": ((float, int), None, "hard cap in US dollars for the whole run, every role (a call that would "
                                        "cross it is not sent; prices from LiteLLM's map or [budget.prices])"),
        "max_tokens": ((int,), None, "hard cap on prompt + completion tokens for the whole run"),
        "max_lm_calls": ((int,), None, "hard cap on requests sent to models (retries count; cache hits are free)"),
        "max_wall_s": ((float, int), None, "hard cap on wall time in seconds"),
        "per_role": ((dict,), {}, "limits for one role: [budget.per_role.reflection] max_usd = 2"),
        "prices": ((dict,), {}, "USD per 1M tokens for models LiteLLM does not price: "
                                "\"hosted_vllm/m\" = {input = 0.2, output = 0.6}"),
    },
    "objective": {
        "kind": ((str,), "quality", "quality | cheapest-not-worse | fastest-not-worse (docs/spend.md)"),
        "margin": ((float, int), None, "non-inferiority margin on the validation pass rate, in (0, 1)"),
        "models": ((list,), [], "task models to choose from, each priced: [\"openai/gpt-4o-mini\", \"openai/gpt-4o\"]"),
        "reference": ((dict,), None, "the configuration deployed now: {model = \"...\", prompt = \"...\"}"),
        "candidates": ((list,), [], "your own (model, prompt) pairs, scored as given: [{model = ..., prompt = ...}]"),
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

MAX_THREADS = 256  # more threads than this is a typo, not a machine
# (section, key) -> (lowest, highest) allowed, inclusive; None is unbounded
RANGES: dict[tuple[str, str], tuple[float | None, float | None]] = {
    ("experiment", "seed"): (0, None),
    ("experiment", "threads"): (1, MAX_THREADS),
    ("experiment", "max_error_rate"): (0.0, 1.0),
    ("suite", "limit"): (1, None),
    ("optimizer", "max_metric_calls"): (1, None),
    ("optimizer", "max_iters"): (1, None),
    ("models", "temperature"): (0.0, 2.0),
}
CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("experiment", "executor"): ("thread", "ray"),
    ("optimizer", "auto"): ("light", "medium", "heavy"),
}

# A model dict (one endpoint for a role): key -> (types, lowest, highest); an endpoint list is
# checked by verifirst.lm.router.parse_endpoints.
MODEL_KEYS: dict[str, tuple[tuple[type, ...], float | None, float | None]] = {
    "model": ((str,), None, None),
    "api_base": ((str,), None, None),
    "api_key": ((str,), None, None),
    "api_version": ((str,), None, None),
    "temperature": ((float, int), 0.0, 2.0),
    "top_p": ((float, int), 0.0, 1.0),
    "max_tokens": ((int,), 1, None),
    "num_retries": ((int,), 0, 20),
    "timeout_s": ((float, int), 0.001, None),
    "cache": ((bool,), None, None),
    "seed": ((int,), None, None),
    "stop": ((str, list), None, None),
    "headers": ((dict,), None, None),
    "extra_headers": ((dict,), None, None),
}


def _suggest(key: str, known) -> str:
    close = difflib.get_close_matches(str(key), list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _type_ok(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):  # bool is an int to Python, never to an experiment file
        return bool in types
    return isinstance(value, types)


def check_number(value: Any, low: float | None, high: float | None, field: str, *, path: str | None = None,
                 line: int | None = None, integer: bool = False) -> None:
    """Refuse a number outside [low, high] (NaN included) with an error naming the field.

    Args:
        value: the number given.
        low: the lowest allowed value, or None.
        high: the highest allowed value, or None.
        field: the option's name in the message (`experiment.threads`, `--threads`).
        path: the file it came from, if any.
        line: its line in that file, if known.
        integer: the value must be an int.
    """
    types = (int,) if integer else (int, float)
    if not _type_ok(value, types):
        raise ConfigError(f"{value!r} is not {'an integer' if integer else 'a number'}", path=path, line=line,
                          field=field, expected=_range_text(low, high, integer))
    if not ((low is None or value >= low) and (high is None or value <= high)):  # False for NaN
        raise ConfigError(f"{value!r} is out of range", path=path, line=line, field=field,
                          expected=_range_text(low, high, integer))


def _range_text(low, high, integer: bool) -> str:
    kind = "an integer" if integer else "a number"
    if low is not None and high is not None:
        return f"{kind} from {low} to {high}"
    if low is not None:
        return f"{kind} >= {low}"
    return f"{kind} <= {high}" if high is not None else kind


def check_model_dict(spec: dict, where: str, *, path: str | None = None, line: int | None = None) -> None:
    """Refuse a model dict with an unknown key (a typo such as `temprature`), a wrong type or a
    value out of range, naming the key.

    Args:
        spec: {model = ..., api_base = ..., temperature = ...} for one role.
        where: the role's field, e.g. `models.task`.
        path: the experiment file, if any.
        line: the role's line in that file, if known.
    """
    for key, value in spec.items():
        if key not in MODEL_KEYS:
            raise ConfigError(f"unknown key {key!r}{_suggest(key, MODEL_KEYS)}", path=path, line=line,
                              field=f"{where}.{key}", expected="one of " + ", ".join(MODEL_KEYS))
        types, low, high = MODEL_KEYS[key]
        if not _type_ok(value, types):
            raise ConfigError(f"wrong type {type(value).__name__}", path=path, line=line, field=f"{where}.{key}",
                              expected=" or ".join(t.__name__ for t in types))
        if low is not None or high is not None:
            check_number(value, low, high, f"{where}.{key}", path=path, line=line, integer=types == (int,))
    if "model" not in spec:
        raise ConfigError("model dict without `model`", path=path, line=line, field=f"{where}.model",
                          expected="'local' or a LiteLLM model string")


WORKDIR_EXPECTED = "a directory for cache, runs and the MLflow store"
RUN_DIR_EXPECTED = "a directory for one run's state and report: a new one, or an unfinished run's to resume"


def check_workdir(workdir: str | Path, field: str = "experiment.workdir", *, path: str | None = None,
                  line: int | None = None, expected: str = WORKDIR_EXPECTED) -> None:
    """Refuse a work directory that is a file or cannot be written, before anything is written.

    Args:
        workdir: the directory (it may not exist yet: its nearest existing parent is probed).
        field: the option's name in the message.
        path: the experiment file it came from, if any.
        line: its line there, if known.
        expected: what the directory is for, said when it is a file (RUN_DIR_EXPECTED for a run's).
    """
    import tempfile

    d = Path(workdir)
    try:
        if d.exists() and not d.is_dir():
            raise ConfigError(f"{str(d)!r} is not a directory", path=path, line=line, field=field,
                              expected=expected)
        probe = d
        while not probe.exists():
            if probe.is_symlink():  # a dangling link: mkdir would fail
                raise ConfigError(f"{str(probe)!r} is a broken symbolic link", path=path, line=line, field=field,
                                  expected="a directory that exists or can be created")
            probe = probe.parent
        if not probe.is_dir():
            raise ConfigError(f"{str(probe)!r} is not a directory", path=path, line=line, field=field,
                              expected="a directory path")
        tempfile.TemporaryDirectory(dir=probe, prefix=".verifirst-probe-").cleanup()
    except ConfigError:
        raise
    except OSError as e:
        raise ConfigError(f"cannot write in {str(d)!r}: {e.strerror or e}", path=path, line=line, field=field,
                          expected="a writable directory") from None


def _line_of(text: str, section: str, key: str | None) -> int | None:
    lines = text_lines(text)  # an editor's line numbers: a BOM dropped, no break at U+2028
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


def _key_line(text: str, section: str, key: str, sub: str | None = None) -> int | None:
    """The line of `key` in [section] (or in the inline or nested table `sub` there)."""
    if sub is None:
        return _line_of(text, section, key)
    return _line_of(text, f"{section}.{sub}", key) or _line_of(text, section, sub)


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
    """An experiment from parsed TOML: every key known, typed and in range, checked before any work.

    Args:
        data: the parsed file (or a dict written in Python).
        path: the file, named in every error.
        text: the file's text, to find the line of a key.

    Raises:
        ConfigError: naming file, line (where known), the field and what is expected.
    """
    src = str(path) if path else "<experiment>"
    for sec, body in data.items():
        if sec not in SCHEMA:
            raise ConfigError(f"unknown section [{sec}]{_suggest(sec, SCHEMA)}", path=src,
                              line=_line_of(text, sec, None),
                              field=sec, expected="one of " + ", ".join(f"[{s}]" for s in SCHEMA))
        if not isinstance(body, dict):
            raise ConfigError("must be a table", path=src, field=sec, expected=f"[{sec}] with keys")
    sections: dict[str, dict[str, Any]] = {}
    for sec, keys in SCHEMA.items():
        body = data.get(sec, {})
        out: dict[str, Any] = {}
        for k, v in body.items():
            line = _line_of(text, sec, k)
            if k not in keys:
                raise ConfigError(f"unknown key {k!r}{_suggest(k, keys)}", path=src, line=line,
                                  field=f"{sec}.{k}", expected="one of " + ", ".join(keys))
            types = keys[k][0]
            if not _type_ok(v, types):
                names = " or ".join(t.__name__ for t in types)
                raise ConfigError(f"wrong type {type(v).__name__}", path=src, line=line,
                                  field=f"{sec}.{k}", expected=names)
            if (sec, k) in RANGES:
                low, high = RANGES[(sec, k)]
                check_number(v, low, high, f"{sec}.{k}", path=src, line=line, integer=types == (int,))
            if (sec, k) in CHOICES and v not in CHOICES[(sec, k)]:
                raise ConfigError(f"unknown {k} {v!r}", path=src, line=line, field=f"{sec}.{k}",
                                  expected=" | ".join(CHOICES[(sec, k)]))
            if sec in ("suite", "program", "verifier", "optimizer") and k == "options":
                bad = [o for o in v if not isinstance(o, str) or not o.isidentifier()]
                if bad:
                    raise ConfigError(f"option name {bad[0]!r} is not an identifier", path=src, line=line,
                                      field=f"{sec}.options", expected="option names like variant, k")
            out[k] = v
        for k, (_, default, _) in keys.items():
            out.setdefault(k, default if not isinstance(default, (dict, list)) else type(default)(default))
        sections[sec] = out
    for sec, k in sorted(REQUIRED):
        if sections[sec].get(k) is None:
            raise ConfigError("missing required key", path=src, line=_line_of(text, sec, None),
                              field=f"{sec}.{k}", expected=SCHEMA[sec][k][2])
    o = sections["optimizer"]
    if o["name"] == "none" and o["options"]:
        raise ConfigError("options given for optimizer none (evaluation only), which takes none", path=src,
                          line=_line_of(text, "optimizer", "options"), field="optimizer.options",
                          expected="an optimizer name (gepa, simba, autorefine), or no options")
    from verifirst.loop.splits import check_ratios

    sp = sections["splits"]
    sp["ratios"] = list(check_ratios(sp["ratios"], no_val=sp["no_val"], no_test=sp["no_test"], source=src,
                                     line=_line_of(text, "splits", "ratios"), field="splits.ratios",
                                     flags=("no_val = true", "no_test = true")))
    from verifirst.loop.splits import check_split_method

    check_split_method(sp["by"], sp["time_field"], sp["windows"], source=src,
                       line=_line_of(text, "splits", "by") or _line_of(text, "splits", "windows"), error=ConfigError)
    resolve_paths(sections, path)
    _validate_models(sections["models"], src, text)
    _validate_budget(sections["budget"], src, text)
    check_objective_section(sections["objective"], src, text)
    return Experiment(path, data, sections)


def file_path(value: str, base: Path | None) -> str:
    """A path an experiment file gives, as verifirst reads it: `~` expanded, a relative path joined
    to the file's folder (`base`; None for an experiment built in Python: the working directory).

    Args:
        value: the path as written.
        base: the experiment file's folder.
    """
    from verifirst.core.request import expand_user

    p = expand_user(value)
    return str(p if p.is_absolute() or base is None else base / p)


def resolve_paths(sections: dict[str, dict[str, Any]], path: Path | None) -> None:
    """Input paths (suite.path, splits.manifest) read against the file's folder, so a file runs the
    same from any directory; workdir only has `~` expanded: it is where this command's outputs go,
    as `verifirst ui` and `report` look for them (default ./.verifirst).

    Args:
        sections: the validated sections (changed in place).
        path: the experiment file, or None.
    """
    base = Path(path).parent if path else None
    for sec, key in (("suite", "path"), ("splits", "manifest")):
        if isinstance(sections[sec].get(key), str) and sections[sec][key]:
            sections[sec][key] = file_path(sections[sec][key], base)
    if str(sections["experiment"]["workdir"]).startswith("~"):
        sections["experiment"]["workdir"] = file_path(sections["experiment"]["workdir"], None)


def objective_flags(exp: Experiment, kind: str | None, margin: float | None) -> None:
    """`verifirst run --objective/--margin`: the file's [objective] with these keys replaced, checked
    as a whole; InputError naming the flag. `--objective quality` drops the file's cost settings.

    Args:
        exp: the loaded experiment (its objective section is replaced).
        kind: --objective, or None.
        margin: --margin, or None.
    """
    from verifirst.loop.objective import OBJECTIVES, check_objective

    if kind is None and margin is None:
        return
    if kind is not None and kind not in OBJECTIVES:
        raise InputError(f"unknown objective {kind!r}", field="--objective", expected=", ".join(OBJECTIVES))
    section = dict(exp.objective)
    if kind == "quality":
        section = {k: ([] if isinstance(v, list) else None) for k, v in section.items()}
    section.update({k: v for k, v in (("kind", kind), ("margin", margin)) if v is not None})
    try:
        check_objective({k: v for k, v in section.items() if v not in (None, [], {})}, field="objective")
    except InputError as e:
        flag = "--margin" if margin is not None and (e.field or "").endswith("margin") else "--objective"
        raise InputError(e.message, field=flag, expected=e.expected) from None
    exp.sections["objective"] = section


def check_objective_section(objective: dict, src: str, text: str) -> Any:
    """The [objective] table as a checked Objective, or ConfigError at the key's line.

    Args:
        objective: the section's values (defaults filled in).
        src: the file, for the error.
        text: the file's text, to find the line.
    """
    from verifirst.loop.objective import check_objective

    body = {k: v for k, v in objective.items() if v not in (None, [], {})}
    try:
        return check_objective(body, field="objective")
    except InputError as e:
        key = (e.field or "objective").split(".")[1].split("[")[0] if "." in (e.field or "") else None
        raise ConfigError(e.message, path=src, line=_line_of(text, "objective", key), field=e.field,
                          expected=e.expected) from None


def _validate_budget(budget: dict, src: str, text: str) -> None:
    """Each limit a positive number (0 is never "unlimited"), per-role limits under known roles, prices
    as {input, output}: refused naming the file and line before anything runs."""
    from verifirst.core.engine import Budget
    from verifirst.core.errors import InputError
    from verifirst.lm import ROLES

    for role in budget.get("per_role") or {}:
        if role not in ROLES:
            raise ConfigError(f"unknown role {role!r}{_suggest(role, ROLES)}", path=src,
                              line=_line_of(text, "budget.per_role", role) or _line_of(text, f"budget.per_role.{role}",
                                                                                     None),
                              field=f"budget.per_role.{role}", expected="one of " + ", ".join(ROLES))
    try:
        Budget(**{k: v for k, v in budget.items() if v is not None})
    except InputError as e:
        parts = (e.field or "").split(".")
        line = None
        if len(parts) == 2:
            line = _line_of(text, "budget", parts[1])
        elif len(parts) > 2:
            line = _line_of(text, ".".join(parts[:-1]), parts[-1]) or _line_of(text, ".".join(parts[:3]), None)
        raise ConfigError(e.message, path=src, line=line, field=e.field, expected=e.expected) from None


def _validate_models(models: dict, src: str, text: str) -> None:
    """Each role's model string, dict or endpoint list: routable, known keys, values in range."""
    from verifirst.lm import check_spec

    for role in ("task", "reflection", "teacher", "judge"):
        spec = models.get(role)
        if spec is None:
            continue
        line = _line_of(text, "models", role) or _line_of(text, f"models.{role}", None)
        # A list names several endpoints for one role (served through LiteLLM's Router).
        endpoints = spec if isinstance(spec, list) else [spec]
        if not endpoints:
            raise ConfigError("empty endpoint list", path=src, line=line,
                              field=f"models.{role}", expected="one or more {model = ..., api_base = ...}")
        if isinstance(spec, dict):
            bad = next((k for k in spec if k not in MODEL_KEYS), None)  # a [models.task] table: the key's line
            check_model_dict(spec, f"models.{role}", path=src,
                             line=(_key_line(text, "models", bad, role) if bad else None) or line)
        for i, one in enumerate(endpoints):
            where = f"models.{role}" + (f"[{i}]" if isinstance(spec, list) else "")
            model = one if isinstance(one, str) else one.get("model") if isinstance(one, dict) else None
            try:
                check_spec(model, field_name=where)
            except ConfigError as e:
                raise ConfigError(str(e).split(": ", 1)[-1], path=src, line=line, field=where) from None
        if isinstance(spec, list):  # keys, router settings and their agreement across endpoints
            from verifirst.lm.router import parse_endpoints

            try:
                parse_endpoints(role, spec)
            except ConfigError as e:
                raise ConfigError(str(e).split(": ", 1)[-1], path=src, line=line, field=e.field) from None


def load(path: str | Path) -> Experiment:
    """Read and validate an experiment file.

    Args:
        path: the TOML file.
    """
    path = Path(path)
    text = read_text(path, "experiment file", ConfigError)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+)", str(e))
        raise ConfigError(f"not valid TOML: {e}", path=str(path), line=int(m.group(1)) if m else None) from None
    return validate(data, path, text)


def from_dict(data: dict) -> Experiment:
    return validate(data, None, "")
