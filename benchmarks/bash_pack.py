"""The built-in NL->Bash pack: tasks we wrote, each with a gold command and a sandbox fixture.

Data: `benchmarks/data/bash_pack.json`, an object {"name", "version", "tasks": [...]} where
each task is {id, task, gold, fixture, difficulty (0 easy, 1 medium, 2 hard), harness?, match?}.
Every task is judged by running it against the gold (FEH). A gold that only defines something
(a function, a loop over stdin) comes with a `harness`: a script in which `{command}` stands
for the command, which feeds it input or calls what it defined, for gold and candidate alike.
`match: "exact"` asks for the same output, not a similar one (the harness prints exact values).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from verifirst.core.textfile import read_text
from verifirst.core.errors import InputError
from verifirst.core.task import Item, Suite

PACK_PATH = Path(__file__).resolve().parent / "data" / "bash_pack.json"
FIXTURES = ("empty",) + tuple(f"nl2sh-fs{i}" for i in range(1, 6)) + tuple(f"intercode-fs{i}" for i in range(1, 5))
CHECKS = ("exec",)  # the one kind left: every task is judged by execution
MATCHES = ("similar", "exact")
HARNESS_SLOT = "{command}"
DIFFICULTIES = (0, 1, 2)
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9\-]*$")


def _line_of(text: str, task_id: object) -> int | None:
    m = re.search(r'"id"\s*:\s*' + re.escape(json.dumps(task_id)), text) if isinstance(task_id, str) else None
    return text.count("\n", 0, m.start()) + 1 if m else None


def _str_field(row: dict, key: str, *, path: str, line: int | None, index: int) -> str:
    v = row.get(key)
    if not isinstance(v, str) or not v.strip():
        raise InputError(f"'{key}' is {'missing' if v is None else repr(v)}", path=path, line=line,
                         field=f"tasks[{index}].{key}", expected="a non-empty string")
    return v


def _item(row: object, index: int, *, path: str, text: str) -> Item:
    if not isinstance(row, dict):
        raise InputError(f"task {index} is {type(row).__name__}", path=path, field=f"tasks[{index}]",
                         expected="an object {id, task, gold, fixture, difficulty}")
    line = _line_of(text, row.get("id"))
    tid = _str_field(row, "id", path=path, line=line, index=index)
    if not _ID_RE.match(tid):
        raise InputError(f"id {tid!r} is not a slug", path=path, line=line, field=f"tasks[{index}].id",
                         expected="lower-case letters, digits and '-'")
    task = _str_field(row, "task", path=path, line=line, index=index)
    gold = _str_field(row, "gold", path=path, line=line, index=index)
    fixture = _str_field(row, "fixture", path=path, line=line, index=index)
    if fixture not in FIXTURES:
        raise InputError(f"unknown fixture {fixture!r}", path=path, line=line, field=f"tasks[{index}].fixture",
                         expected=f"one of {', '.join(FIXTURES)}")
    diff = row.get("difficulty")
    if isinstance(diff, bool) or diff not in DIFFICULTIES:
        raise InputError(f"difficulty is {diff!r}", path=path, line=line, field=f"tasks[{index}].difficulty",
                         expected="0, 1 or 2")
    check = row.get("check", "exec")
    if check not in CHECKS:
        raise InputError(f"check is {check!r}", path=path, line=line, field=f"tasks[{index}].check",
                         expected="'exec' (a syntax-only check passes any command that parses: "
                                  "give the task a harness that runs what the gold defines)")
    extra = {}
    if "harness" in row:
        h = _str_field(row, "harness", path=path, line=line, index=index)
        if HARNESS_SLOT not in h:
            raise InputError(f"the harness has no {HARNESS_SLOT} slot", path=path, line=line,
                             field=f"tasks[{index}].harness", expected=f"a script with {HARNESS_SLOT}")
        extra["harness"] = h
    match = row.get("match", "similar")
    if match not in MATCHES:
        raise InputError(f"match is {match!r}", path=path, line=line, field=f"tasks[{index}].match",
                         expected="'similar' or 'exact'")
    if match == "exact":
        extra["match"] = "exact"
    return Item(id=tid, inputs={"task": task}, gold={"command": gold, "fixture": fixture, **extra}, group=tid,
                meta={"difficulty": diff, "check": check, "source": "bash-pack"})


def load_bash_pack(path: str | Path | None = None) -> Suite:
    """Load the pack (the built-in one unless `path` is given) as a Suite of Items."""
    p = Path(path) if path is not None else PACK_PATH
    text = read_text(p, "bash pack")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"invalid JSON: {e.msg}", path=str(p), line=e.lineno) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("tasks"), list):
        raise InputError("no task list", path=str(p), field="tasks", expected='an object with a "tasks" array')
    items, seen = [], {}
    for i, row in enumerate(doc["tasks"]):
        it = _item(row, i, path=str(p), text=text)
        if it.id in seen:
            raise InputError(f"duplicate id {it.id!r} (first at tasks[{seen[it.id]}])", path=str(p),
                             line=_line_of(text, it.id), field=f"tasks[{i}].id", expected="unique ids")
        seen[it.id] = i
        items.append(it)
    return Suite(name=str(doc.get("name") or "bash-pack"), items=items,
                 description="built-in NL->Bash tasks with gold commands and fixtures",
                 meta={"path": str(p), "version": doc.get("version")})


class PackVerifier:
    """Ground truth for pack items: execution against the gold by `exec_verifier` (default: the
    sandboxed FEH verifier), which honours the items' harness and match; serves any bash suite."""

    name = "bash-pack"

    def __init__(self, exec_verifier=None):
        self._exec = exec_verifier

    @property
    def exec_verifier(self):
        if self._exec is None:
            from verifirst.verifiers.bash.feh import FehVerifier
            self._exec = FehVerifier()
        return self._exec

    def preflight(self) -> None:
        """Build the execution verifier's sandbox now (see FehVerifier.preflight).

        Raises:
            SandboxUnavailable: no usable bubblewrap here (unless the verifier runs unsafe_local).
        """
        check = getattr(self.exec_verifier, "preflight", None)
        if check is not None:
            check()

    def verify(self, item: Item, candidate) -> "Verdict":
        return self.exec_verifier.verify(item, candidate)
