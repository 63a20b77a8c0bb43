"""The policy gate: evaluate a Rego policy on a `terraform show -json` plan.

Engine: an `opa` binary when one is on PATH, else regopy (rego-cpp, in-process, 2-11 ms).
Decision rules:
- "conftest" (conftest's conventions, what an organisation's own policy means): `deny`,
  `violation` (and `deny_<name>`, `violation_<name>`) are sets of messages (strings or objects
  with `msg`); a non-empty one fails, its messages in the feedback; `warn*` messages are
  warnings. `package main` or any named package; Rego v0 `deny[msg] {...}` or v1
  `deny contains msg if {...}`.
- "iac-eval" (IaC-Eval v1's eval.py, for IaC-Eval intents only): query `data`, walk every leaf
  (lists expanded); the policy fails if any leaf is `false`. An empty document passes, as there.
- "defaults" (IaC-Eval v2): every rule declared with `default` must evaluate to true.
- "auto": "conftest" for a module with conftest rules, "defaults" for Rego v1 policies that
  declare defaults, else "iac-eval" (a task's IaC-Eval intent); a user's own policy
  (`--policy`, the verifier's `policy` option: `strict=True`) is "conftest" or "defaults" (v0
  too), and one with neither kind of rule is refused, naming what was looked for.
regopy treats calls to builtins it lacks (net.cidr_*) as undefined instead of erroring; a failing
verdict that may stem from such a call is reported as POLICY_ENGINE_GAP, not as a model failure.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifirst.core.errors import InputError
from verifirst.core.textfile import read_text
from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.base import VerifierError

MODES = ("auto", "conftest", "iac-eval", "defaults")
# a conftest rule's head: deny / violation / warn, with an optional _<name>, then its body or value
_CONFTEST_RE = re.compile(r"^\s*((?:deny|violation|warn)(?:_\w+)?)\s*(?:\[|contains\b|if\b|\{|:=|=)", re.M)
FAIL_RULE = re.compile(r"^(deny|violation)(_\w+)?$")
WARN_RULE = re.compile(r"^warn(_\w+)?$")
LOOKED_FOR = ("conftest rules `deny`, `violation` or `warn` (optionally `deny_<name>` ...: sets of messages), or "
              "rules declared with `default` that must all be true (Rego v1); an IaC-Eval intent needs "
              "policy_mode = \"iac-eval\"")
_PACKAGE_RE = re.compile(r"^\s*package\s+([\w.\[\]\"]+)", re.M)
_DEFAULT_RE = re.compile(r"^\s*default\s+([A-Za-z_]\w*)\s*(?::=|=)\s*(.+?)\s*$", re.M)
_CALL_RE = re.compile(r"(?<![\w.])([a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+)\s*\(")
_DEF_RE = re.compile(r"^\s*([a-z_][\w]*)\s*\(", re.M | re.I)
_V1_RE = re.compile(r"^\s*import\s+rego\.v1\b|\bif\s*\{|\bcontains\s+\w+\s+if\b", re.M)


def _strip_comments(text: str) -> str:
    return "\n".join(re.sub(r"#.*$", "", ln) if '"' not in ln else _strip_line_comment(ln)
                     for ln in text.splitlines())


def _strip_line_comment(line: str) -> str:
    out, in_str = [], False
    for i, ch in enumerate(line):
        if ch == '"' and (i == 0 or line[i - 1] != "\\"):
            in_str = not in_str
        if ch == "#" and not in_str:
            break
        out.append(ch)
    return "".join(out)


@dataclass
class PolicyResult:
    passed: bool
    decided: bool = True  # False: the engine could not evaluate the policy faithfully
    errors: list[VerifierError] = field(default_factory=list)
    engine: str = ""
    mode: str = ""
    document: Any = None
    false_rules: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # conftest `warn` messages


def opa_binary() -> str | None:
    return shutil.which("opa")


class Policy:
    """A compiled Rego policy. Bad Rego raises InputError naming the file and line."""

    def __init__(self, text: str, path: str = "policy.rego", mode: str = "auto", engine: str = "auto",
                 strict: bool = False):
        """Args:
            text: the Rego module.
            path: its file name (in messages).
            mode: see MODES.
            engine: "auto", "opa" or "regopy".
            strict: a user's own policy: in "auto" mode its `default` rules decide (Rego v0 too),
                and one with neither conftest nor `default` rules is refused (InputError naming
                what was looked for), never read as IaC-Eval's.
        """
        if mode not in MODES:
            raise InputError(f"unknown policy mode {mode!r}", field="mode", expected=" | ".join(MODES))
        if not isinstance(text, str) or not text.strip():
            raise InputError("empty policy", path=path, expected="a Rego module with a package line")
        self.text, self.path = text, path
        code = _strip_comments(text)
        m = _PACKAGE_RE.search(code)
        if not m:
            raise InputError("no package declaration", path=path, line=1, expected="package <name>")
        self.package = m.group(1)
        self.is_v1 = bool(_V1_RE.search(code))
        self.defaults = list(dict.fromkeys(n for n, _ in _DEFAULT_RE.findall(code)))
        self.conftest_rules = list(dict.fromkeys(_CONFTEST_RE.findall(code)))
        if mode == "auto":
            mode = ("conftest" if self.conftest_rules else "defaults" if (self.is_v1 or strict) and self.defaults
                    else "iac-eval")
            if strict and mode == "iac-eval":
                raise InputError("policy defines no rule the verifier reads", path=path, expected=LOOKED_FOR)
        if mode == "conftest" and not self.conftest_rules:
            raise InputError("policy defines no conftest rule", path=path, expected=LOOKED_FOR)
        self.mode = mode
        self.opa = opa_binary() if engine in ("auto", "opa") else None
        if engine == "opa" and not self.opa:
            raise FileNotFoundError("engine='opa' but no opa binary on PATH")
        self.engine = "opa" if self.opa else "regopy"
        defined = set(_DEF_RE.findall(code))
        calls = {c for c in _CALL_RE.findall(code)
                 if not c.startswith(("data.", "input.", "future.", "rego.")) and c not in defined}
        self.missing_builtins = sorted(self._missing(calls)) if self.engine == "regopy" else []
        self._check_compiles()

    @classmethod
    def from_file(cls, path: str | os.PathLike, **kw) -> "Policy":
        """The policy in a .rego file (UTF-8; a file that is not names itself and its line).

        Args:
            path: the .rego file.
            kw: as for Policy.
        """
        p = Path(path)
        if not p.is_file():
            raise InputError("policy file not found", path=str(p), expected="a .rego file")
        return cls(read_text(p, "policy file"), path=str(p), **kw)

    # ------------------------------------------------------------------ engines
    @staticmethod
    def _missing(calls: set[str]) -> set[str]:
        from regopy import Interpreter
        rego = Interpreter()
        return {c for c in calls if not rego.is_builtin(c)}

    def _interpreter(self, reuse: bool):
        """An interpreter holding this module: one per thread, kept (a fresh one costs ~2.5 ms)."""
        from regopy import Interpreter, LogLevel

        key = threading.get_ident()
        rego = self.__dict__.setdefault("_interpreters", {}).get(key) if reuse else None
        if rego is None:
            rego = Interpreter()
            rego.log_level = LogLevel.NONE  # else rego-cpp prints compile errors to stdout
            rego.add_module(Path(self.path).name or "policy.rego", self.text)
            if reuse:
                self._interpreters[key] = rego
        return rego

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_interpreters", None)  # native handles: rebuilt where the policy lands
        return state

    def _regopy(self, plan: dict | None, query: str):
        from regopy import RegoError
        try:
            # no input: a fresh interpreter, so no earlier input lingers
            rego = self._interpreter(reuse=plan is not None)
            if plan is not None:
                rego.set_input(plan)
            out = rego.query(query)
        except RegoError as exc:
            raise InputError(f"Rego does not compile: {_rego_error(str(exc))}", path=self.path,
                             line=_rego_line(str(exc), self.text), expected="a valid Rego v0 or v1 module") from None
        if not out.ok():
            raise InputError(f"Rego does not compile: {_rego_error(str(out))}", path=self.path,
                             line=_rego_line(str(out), self.text), expected="a valid Rego v0 or v1 module")
        return out.results[0].expressions[0] if out.results and out.results[0].expressions else None

    def _opa(self, plan: dict | None, query: str):
        with tempfile.TemporaryDirectory(prefix="vf-opa-") as d:
            pol, inp = Path(d, "policy.rego"), Path(d, "input.json")
            pol.write_text(self.text)
            inp.write_text(json.dumps(plan if plan is not None else {}))
            base = [self.opa, "eval", "--format", "json", "-d", str(pol), "-i", str(inp)]
            flags = [["--v1-compatible"]] if self.is_v1 else [[], ["--v0-compatible"]]
            err = ""
            for extra in flags:
                p = subprocess.run(base + extra + [query], capture_output=True, text=True, timeout=60)
                if p.returncode == 0:
                    res = json.loads(p.stdout).get("result") or []
                    return res[0]["expressions"][0]["value"] if res else None
                err = p.stdout + p.stderr
            raise InputError(f"Rego does not compile: {err.strip()[:800]}", path=self.path,
                             expected="a valid Rego v0 or v1 module")

    def query(self, plan: dict | None, query: str):
        return self._opa(plan, query) if self.opa else self._regopy(plan, query)

    def _check_compiles(self) -> None:
        self.query({}, "data." + self.package)

    # ------------------------------------------------------------------ decision
    def evaluate(self, plan: dict) -> PolicyResult:
        t0 = time.perf_counter()
        res = PolicyResult(passed=True, engine=self.engine, mode=self.mode)
        if self.mode == "conftest":
            return self._conftest(plan, res, t0)
        if self.mode == "iac-eval":
            doc = self.query(plan, "data")
            res.document = doc
            res.false_rules = sorted(set(false_leaves(doc)))
            res.passed = not res.false_rules
        else:
            doc = self.query(plan, "data." + self.package)
            res.document = doc
            doc = doc if isinstance(doc, dict) else {}
            res.false_rules = [n for n in self.defaults if doc.get(n) is not True]
            res.passed = not res.false_rules
        if not res.passed:
            if self.missing_builtins:
                res.decided = False
                res.errors.append(VerifierError(
                    T.POLICY_ENGINE_GAP,
                    f"policy calls {', '.join(self.missing_builtins)}, which {self.engine} does not "
                    f"implement (evaluated as undefined); rules not true: {', '.join(res.false_rules)}",
                    self.package))
            else:
                for rule in res.false_rules:
                    res.errors.append(VerifierError(T.POLICY, f"policy rule {rule} is not true "
                                                    f"({self.mode} rule, package {self.package})",
                                                    f"data.{self.package}.{rule.split('.')[-1]}"
                                                    if self.mode == "defaults" else rule))
        res.timings["opa_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        return res


    def _conftest(self, plan: dict, res: PolicyResult, t0: float) -> PolicyResult:
        """conftest's decision: non-empty deny/violation sets fail with their messages."""
        doc = self.query(plan, "data." + self.package)
        res.document = doc
        doc = doc if isinstance(doc, dict) else {}
        for rule in sorted(k for k in doc if FAIL_RULE.match(k) or WARN_RULE.match(k)):
            msgs = messages(doc[rule])
            if WARN_RULE.match(rule):
                res.warnings += [f"policy {self.package}.{rule}: {m}" for m in msgs]
            elif msgs:
                res.false_rules.append(rule)
                res.errors += [VerifierError(T.POLICY, f"policy {self.package}.{rule}: {m}",
                                             f"data.{self.package}.{rule}") for m in msgs]
        res.passed = not res.errors
        if self.missing_builtins:  # an undefined builtin call may have hidden a deny: no verdict
            res.decided = False
            res.errors.append(VerifierError(
                T.POLICY_ENGINE_GAP, f"policy calls {', '.join(self.missing_builtins)}, which {self.engine} does "
                "not implement (evaluated as undefined): its deny rules may not have fired", self.package))
            res.passed = False
        res.timings["opa_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        return res


def messages(value) -> list[str]:
    """A conftest rule's messages: a set comes back as a list (v1) or an object (regopy, v0);
    an object message's `msg` is the text."""
    if isinstance(value, dict):
        if "msg" in value:
            return [str(value["msg"])]
        return [str(k) for k, v in value.items() if v]
    if isinstance(value, (list, tuple)):
        return [str(v.get("msg", v)) if isinstance(v, dict) else str(v) for v in value]
    if value is True:
        return ["(rule is true)"]
    return []


def false_leaves(doc: Any, prefix: str = "data") -> list[str]:
    """Paths of leaves equal to false, walking like IaC-Eval's dict_generator."""
    out: list[str] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += false_leaves(v, f"{prefix}.{k}")
    elif isinstance(doc, (list, tuple)):
        for v in doc:
            out += false_leaves(v, prefix)
    elif doc is False:
        out.append(prefix)
    return out


def _rego_error(text: str) -> str:
    m = re.search(r"\(errormsg \d+:([^)]*)\)", text)
    if m:
        return m.group(1).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("Errors")]
    return lines[0] if lines else text.strip()[:300]


def _rego_line(text: str, source: str) -> int | None:
    """Line of the first error: rego-cpp reports `name|offset|length`."""
    m = re.search(r"\(error \d+:[^|]*\|(\d+)\|", text) or re.search(r"\|(\d+)\|\d+", text)
    return source[:int(m.group(1))].count("\n") + 1 if m else None


def evaluate_policy(policy: str | os.PathLike | Policy, plan: dict, mode: str = "auto") -> PolicyResult:
    """Policy text, a .rego path or a Policy, on a plan JSON."""
    if isinstance(policy, Policy):
        return policy.evaluate(plan)
    if isinstance(policy, os.PathLike) or (isinstance(policy, str) and policy.endswith(".rego")
                                          and "\n" not in policy):
        return Policy.from_file(policy, mode=mode).evaluate(plan)
    return Policy(policy, mode=mode).evaluate(plan)
