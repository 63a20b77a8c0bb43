"""A user's own NL->Terraform tasks, as suite "iac-tasks".

Two layouts:
- a directory, one folder per task (the folder name is the task id):
    prompt.md          the task, as the generator sees it (required)
    *.rego             the task's policies, Rego v0 or v1 (any number; *_test.rego skipped)
    reference.tf       a configuration that meets the task (optional)
    variables.tfvars   variable values, given to terraform as terraform.tfvars (optional)
    other files        fixtures the configuration may read with file() (optional, text)
- a JSONL file, one task a line: {"id", "prompt", "policy", "reference"?}, where policy is a
  .rego path (relative to the JSONL file) or the Rego text itself; every value a string, any
  other key refused.

Everything is read and every policy compiled when the suite loads, so bad input (a folder without
a prompt, Rego that does not compile, a tfvars file or a reference that does not parse) stops
before any run, naming the file and line. An organisation's policy set is the verifier's
`policy_dir` option.
"""
from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

from verifirst.core.textfile import read_text
from verifirst.core.errors import InputError
from verifirst.core.task import Item, Suite
from verifirst.verifiers.terraform.confine import check_inside
from verifirst.verifiers.terraform.opa import MODES, Policy

TASK_FILES = "prompt.md, *.rego, reference.tf (optional), variables.tfvars (optional), fixture files"
JSONL_FIELDS = ("id", "prompt", "policy")
JSONL_OPTIONAL = ("reference",)
JSONL_EXPECTED = "fields id, prompt, policy (a .rego path or Rego text), reference? - each a string"


def _compile(text: str, path: str, mode: str | None) -> dict:
    Policy(text, path=path, mode=mode or "auto")  # InputError naming the file and line when it does not compile
    return {"path": path, "text": text}


def _task_text(path: Path, what: str) -> str:
    """A task file's text; not UTF-8 or binary is an InputError naming the file and line.
    Line endings as text mode reads them (CRLF and CR become LF), as they always were."""
    return read_text(path, what).replace("\r\n", "\n").replace("\r", "\n")


def _check_tfvars(path: Path) -> str:
    from verifirst.verifiers.terraform._hcl_ast import HclSyntaxError, parse_body

    text = _task_text(path, "tfvars file")
    try:
        parse_body(text, path.name)
    except HclSyntaxError as e:
        raise InputError(f"tfvars file does not parse: {e.summary}", path=str(path), line=e.line,
                         expected='variable assignments such as name = "value"') from None
    return text


def _check_reference(text: str, path: str, line: int | None = None, field: str | None = None) -> str:
    """A reference configuration that parses as HCL (the deceptive-repair check reads what it
    declares: one that does not parse would declare nothing, silently); else an InputError naming
    the file and line (a JSONL task's: its line and the field).

    Args:
        text: the configuration.
        path: the file it came from (reference.tf, or the tasks JSONL).
        line: the JSONL line; None: the error's own line in reference.tf.
        field: the JSONL field.
    """
    from verifirst.verifiers.terraform._hcl_ast import HclSyntaxError, parse_body

    try:
        parse_body(text, "reference.tf")
    except HclSyntaxError as e:
        at = f" (its line {e.line})" if line is not None and e.line else ""
        if "\n" not in text.strip() and text.strip().endswith(".tf"):
            at += " - the reference is the configuration's text, not a path (a path is never read)"
        raise InputError(f"reference configuration does not parse: {e.summary}{at}", path=path,
                         line=line if line is not None else e.line, field=field,
                         expected="a Terraform configuration that meets the task (HCL that terraform validate "
                                  "reads), or no reference") from None
    return text


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError("fixture file is not UTF-8 text", path=str(path),
                         expected="text fixtures (what file() reads)") from None


def load_task_folder(folder: Path, policy_mode: str | None = None) -> Item:
    """One task folder as an Item (id = the folder name).

    Args:
        folder: the task's folder.
        policy_mode: how the task's Rego is decided (auto | iac-eval | defaults); None leaves it
            to the verifier's policy_mode option.
    """
    prompt_path = folder / "prompt.md"
    if not prompt_path.is_file():
        raise InputError("task folder has no prompt.md", path=str(prompt_path), expected=TASK_FILES)
    prompt = _task_text(prompt_path, "task prompt").strip()
    if not prompt:
        raise InputError("prompt.md is empty", path=str(prompt_path), line=1, expected="the task in words")
    policies, files, reference = [], {}, None
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
        check_inside(f, folder)  # a symlink out of the task folder is refused, never read
        rel = f.relative_to(folder).as_posix()
        if rel == "prompt.md":
            continue
        if f.suffix == ".rego":
            if not f.name.endswith("_test.rego"):
                policies.append(_compile(_task_text(f, "policy file"), str(f), policy_mode))
        elif rel == "reference.tf":
            reference = _check_reference(_task_text(f, "reference configuration"), str(f))
        elif rel == "variables.tfvars":
            files["terraform.tfvars"] = _check_tfvars(f)  # the name terraform loads by itself
        else:
            if f.suffix == ".tfvars":
                _check_tfvars(f)
            files[rel] = _read_text(f)
    gold: dict = {"rego_policies": policies, "files": files, **_mode(policy_mode)}
    if policies:
        gold["rego_policy"] = policies[0]["text"]  # what programs that show the policy read
    if reference is not None:
        gold["reference"] = reference
    return Item(id=folder.name, inputs={"prompt": prompt}, gold=gold, group=folder.name,
                meta={"source": "iac-tasks", "path": str(folder)})


def _mode(policy_mode: str | None) -> dict:
    """The gold's policy_mode, only where the tasks set one: otherwise the verifier's option decides."""
    return {"policy_mode": policy_mode} if policy_mode is not None else {}


def _check_record(rec: dict, where: dict) -> None:
    """A JSONL task's keys known (a typo such as `polcy` named), each value a string, the
    required ones not empty."""
    known = JSONL_FIELDS + JSONL_OPTIONAL
    for key in rec:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InputError(f"unknown field {key!r}{hint}", **where, field=str(key), expected=JSONL_EXPECTED)
    for key in known:
        if key in rec and not isinstance(rec[key], str):
            raise InputError(f"field {key!r} is {type(rec[key]).__name__} {json.dumps(rec[key])[:40]}, not a string",
                             **where, field=key, expected=JSONL_EXPECTED)
    for key in JSONL_FIELDS:
        if key not in rec:
            raise InputError(f"missing field {key!r}", **where, field=key, expected=JSONL_EXPECTED)
        if not rec[key].strip():
            raise InputError(f"empty field {key!r}", **where, field=key, expected=JSONL_EXPECTED)


def _jsonl_item(rec: dict, base: Path, where: dict, policy_mode: str | None) -> Item:
    _check_record(rec, where)
    pol = rec["policy"]
    if "\n" not in pol and pol.strip().endswith(".rego"):
        p = (base / pol.strip()) if not os.path.isabs(pol.strip()) else Path(pol.strip())
        if not p.is_file():
            raise InputError(f"policy file not found: {p}", **where, field="policy",
                             expected="a .rego file (a relative path is read from the tasks file's folder, "
                                      f"{base.resolve()})")
        policy = _compile(_task_text(p, "policy file"), str(p), policy_mode)
    else:
        try:
            policy = _compile(pol, f"{rec['id']}.rego", policy_mode)
        except InputError as e:
            raise InputError(f"inline policy does not compile: {e}", **where, field="policy",
                             expected="Rego v0 or v1 text") from None
    gold: dict = {"rego_policies": [policy], "rego_policy": policy["text"], "files": {}, **_mode(policy_mode)}
    if rec.get("reference"):
        gold["reference"] = _check_reference(rec["reference"], where["path"], where["line"], "reference")
    return Item(id=rec["id"], inputs={"prompt": rec["prompt"].strip()}, gold=gold, group=rec["id"],
                meta={"source": "iac-tasks", "path": where["path"]})


def _load_jsonl(path: Path, policy_mode: str | None) -> list[Item]:
    items, first_line = [], {}
    for n, line in enumerate(read_text(path, "tasks file").splitlines(), 1):
        if not line.strip():
            continue
        where = {"path": str(path), "line": n}
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"not JSON: {e.msg}", **where, expected="one JSON object per line") from None
        if not isinstance(rec, dict):
            raise InputError("not a JSON object", **where, expected="one JSON object per line")
        item = _jsonl_item(rec, path.parent, where, policy_mode)
        if item.id in first_line:  # named here, where the line is known
            raise InputError(f"duplicate task id {item.id!r} (first on line {first_line[item.id]})", **where,
                             field="id", expected="unique ids")
        first_line[item.id] = n
        items.append(item)
    return items


def load_tasks(path: str | os.PathLike, policy_mode: str | None = None) -> Suite:
    """A user's tasks: a directory of task folders or a JSONL file (see the module docstring).

    Args:
        path: the directory or .jsonl file.
        policy_mode: how task policies are decided (auto | iac-eval | defaults); None (the
            default) leaves it to the verifier's policy_mode option.

    Raises:
        InputError: bad input, naming the file (and line or field); nothing is run.
    """
    if policy_mode is not None and policy_mode not in MODES:
        raise InputError(f"unknown policy mode {policy_mode!r}", field="policy_mode", expected=" | ".join(MODES))
    if not path:
        raise InputError("no tasks path given", field="suite.path",
                         expected="a directory of task folders or a .jsonl file")
    p = Path(path)
    if p.is_file():
        items = _load_jsonl(p, policy_mode)
    elif p.is_dir():
        items = [load_task_folder(f, policy_mode) for f in sorted(p.iterdir())
                 if f.is_dir() and not f.name.startswith((".", "_"))]
    else:
        raise InputError("tasks path not found", path=str(p), field="suite.path",
                         expected="a directory of task folders or a .jsonl file")
    if not items:
        raise InputError("no tasks found", path=str(p), expected=f"task folders ({TASK_FILES}) or JSONL lines")
    ids = [it.id for it in items]
    dup = next((i for i in ids if ids.count(i) > 1), None)
    if dup is not None:
        raise InputError(f"duplicate task id {dup!r}", path=str(p), field="id", expected="unique ids")
    return Suite("iac-tasks", items, description=f"NL->Terraform tasks from {p}", meta={"path": str(p)})
