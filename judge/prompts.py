"""Judge prompts: a file or a registry version (prompts:/NAME/VERSION, prompts:/NAME@ALIAS) read as a
StartPrompt, the kind and threshold it is judged with, the judge program over a suite's fields,
and one prompt's verdicts on items (the champion re-scored, the baseline)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy


from verifirst.core.errors import InputError
from verifirst.lm import FastJSONAdapter
from verifirst.core.task import Suite
from verifirst.tracking import Tracker
from verifirst.judge.options import JUDGE_KINDS, check_calibrate_options
from verifirst.judge.autorefine import run_judge, verdicts_at
from verifirst.judge.programs import make_judge


def make_judge_program(judge: str, suite: Suite, prompt: str | None, view: str | None = None):
    """The judge program on this suite's record fields (a prompt with variables: a template judge).

    Args:
        judge: the judge kind.
        suite: the records (their fields fill the view or the template's variables).
        prompt: the starting prompt, or None for the kind's default.
        view: the --view spec, or None.
    """
    fields = sorted(suite.items[0].inputs)
    if view is None:
        return make_judge(judge, fields, prompt)
    return make_judge(judge, fields, prompt, view=view)


@dataclass
class StartPrompt:
    """The user's starting prompt: its text and the registry name its calibrated version goes under."""

    text: str
    name: str
    source: str
    version: int | None = None  # the registry version started from
    alias: str | None = None
    tags: dict = field(default_factory=dict)


def missing_store(uri: str) -> Path | None:
    """The file of a local sqlite MLflow store that does not exist: opening it would create it (and
    find nothing), so a read from it is refused instead. None for any other store.

    Args:
        uri: the tracking URI.
    """
    prefix = "sqlite:///"
    if not uri.startswith(prefix):
        return None
    path = Path(uri[len(prefix):].split("?", 1)[0])
    return None if str(path) in ("", ":memory:") or path.exists() else path


def check_store_has(uri: str, what: str, field: str, expected: str) -> None:
    """Refuse to read `what` from a local store that does not exist, before it would be created.

    Args:
        uri: the tracking URI.
        what: what was asked for, e.g. "prompt 'x'".
        field: the option that asked for it.
        expected: what the option expects.
    """
    path = missing_store(uri)
    if path is not None:
        raise InputError(f"no {what}: there is no MLflow store at {path}", field=field,
                         expected=f"{expected} (--workdir or --tracking-uri where it was logged)")


def _registry_client(workdir: Path, tracking_uri: str | None):
    import mlflow

    uri = tracking_uri or Tracker(workdir, enabled=False).uri
    return mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)


def resolve_start_prompt(spec: str, workdir: Path, tracking_uri: str | None = None,
                         name: str | None = None) -> StartPrompt:
    """The `--prompt` value read: a file (registered under `name` or its stem) or a registry URI.

    Args:
        spec: a file path, prompts:/NAME/VERSION or prompts:/NAME@ALIAS.
        workdir: the workdir (its local MLflow store when no tracking URI is given).
        tracking_uri: the MLflow tracking URI holding the prompt registry.
        name: the registry name for a file's calibrated versions (default: the file's stem).
    """
    p = Path(spec)
    if p.exists() or p.is_symlink():
        from verifirst.core.textfile import read_text

        text = read_text(p, "prompt file").strip()  # a directory, a loop, binary: InputError
        if not text:
            raise InputError("the prompt file is empty", path=str(p), expected="a judge prompt")
        return StartPrompt(text, name or re.sub(r"[^A-Za-z0-9_.-]+", "-", p.stem), spec)
    m = re.fullmatch(r"prompts:/([^/@]+)(?:/(\d+)|@([^/@]+))", spec.strip())
    if not m:
        raise InputError(f"{spec!r} is not a file nor a registry URI", field="--prompt",
                         expected="a path, prompts:/NAME/VERSION or prompts:/NAME@ALIAS")
    pname, version, alias = m.groups()
    check_store_has(tracking_uri or Tracker(Path(workdir), enabled=False).uri, f"prompt {pname!r}", "--prompt",
                    "a registered prompt")
    client = _registry_client(Path(workdir), tracking_uri)
    try:
        pv = client.get_prompt_version_by_alias(pname, alias) if alias else client.get_prompt_version(pname, version)
    except Exception as e:  # MLflow raises for an unknown prompt, version or alias
        pv, why = None, str(e).splitlines()[0][:200]
    else:
        why = "not found"
    if pv is None:
        what = f"alias {alias!r}" if alias else f"version {version}"
        raise InputError(f"prompt {pname!r} has no {what} in the registry ({why})", field="--prompt",
                         expected="an existing prompt version or alias: " + _known_versions(client, pname))
    return StartPrompt(pv.template if isinstance(pv.template, str) else json.dumps(pv.template), pname, spec,
                       int(pv.version), alias, dict(getattr(pv, "tags", {}) or {}))


def _known_versions(client, name: str) -> str:
    try:
        versions = sorted(int(v.version) for v in client.search_prompt_versions(name))
        aliases = sorted({a for v in client.search_prompt_versions(name) for a in (getattr(v, "aliases", None) or [])})
    except Exception:
        return f"no prompt named {name!r} here"
    return f"versions {versions or 'none'}" + (f", aliases {aliases}" if aliases else "")


def score_prompt(judge: str, fields: list[str], text: str, threshold: float | None, items, judge_lm,
                  threads: Any, view: str | None = None) -> dict[str, str | None]:
    """Verdicts of one judge prompt on these items with this LM (None where the LM failed); `threads`: the run's
    judge Pool, or a count."""
    program = make_judge(judge, fields, text) if view is None else make_judge(judge, fields, text, view=view)
    with dspy.context(lm=judge_lm, adapter=FastJSONAdapter()):
        return verdicts_at(run_judge(program, items, judge_lm, threads, fail_fast=True), threshold)


def load_prompt_text(spec: str, workdir: Path, tracking_uri: str | None = None) -> tuple[str, dict]:
    """A prompt from a file path or the registry (prompts:/name/version or prompts:/name@alias)."""
    start = resolve_start_prompt(spec, workdir, tracking_uri)
    return start.text, start.tags


def judge_kind(given: str | None, tags: dict, source: str, field: str = "--kind") -> str:
    """The kind a prompt is judged as: the one it was registered with (its `judge` tag), else the one
    given, else passfail. A given kind that conflicts with the tag is refused: a prompt calibrated
    as a rubric judge run as pass/fail (or the reverse) gives verdicts nobody calibrated.

    Args:
        given: the kind asked for (--kind), or None.
        tags: the prompt version's tags (a prompt file has none).
        source: the prompt, for the error.
        field: the option that asks for a kind.
    """
    if given is not None:
        check_calibrate_options(given, field)
    tagged = tags.get("judge") if tags.get("judge") in JUDGE_KINDS else None
    if given is not None and tagged is not None and given != tagged:
        raise InputError(f"{source} was calibrated as a {tagged} judge (its 'judge' tag), not {given}",
                         field=field, expected=f"{field} {tagged}, or no {field} (the prompt's own kind)")
    return tagged or given or "passfail"


def judge_threshold(kind: str, given: float | None, tags: dict, field: str = "--threshold") -> float | None:
    """The score threshold a judge's verdicts are read at: a rubric's given one, else its registered
    `threshold` tag, else its own; a pass/fail judge has no score, so a threshold for it is refused.

    Args:
        kind: the judge kind.
        given: the threshold asked for, or None.
        tags: the prompt version's tags.
        field: the option that asks for a threshold.
    """
    if kind != "rubric":
        if given is not None:
            raise InputError(f"a threshold ({given}) applies to a rubric judge's score; this prompt is judged "
                             f"{kind}", field=field, expected=f"no {field}, or a rubric prompt")
        return None
    if given is not None:
        return float(given)
    raw = tags.get("threshold")
    if raw in (None, "", "None"):
        return None
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise InputError(f"the prompt's 'threshold' tag {raw!r} is not a number", field=field,
                         expected=f"{field} X, or a prompt version tagged with a numeric threshold") from None
