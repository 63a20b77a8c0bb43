"""Functional equivalence heuristic (NL2SH FEH, S1) as a Verifier.

Gold and candidate run in identical fresh copies of the item's fixture (sandbox.run_pair);
the verdict compares exit status, file-system diff and output (exact, line order, MiniLM
cosine), optionally confirmed or arbitrated by an LLM check, and explains what differed.
When the runs cannot decide (the reference does nothing observable and neither does the
candidate, or both fail with different errors) the verdict is INCONCLUSIVE with the reason.
"""
from __future__ import annotations

import base64
import json
import shlex
import threading
import time
from dataclasses import replace
from typing import Any, Callable

from verifirst.core.errors import InputError
from verifirst.core.task import Item

from ._feh_compare import (Decision, EmbedFn, FehParams, PairFeatures, RunView, add_cosines, decide,
                           feedback, features, observed)
from ..base import Verdict, VerifierError

RunPair = Callable[[str, str, str], tuple[Any, Any]]
LLM_MODES = ("off", "confirm", "arbiter")
EXIT_INCONCLUSIVE = 3  # `verify bash`: 0 equivalent, 1 not, 2 bad input, 3 the runs cannot decide
ARBITER_BRANCHES = ("no_output_cmd", "output_cosine")
# Rules whose outcome depends on cosines (decided with them unset, they fall to these).
SIMILARITY_RULES = ("no_output_cmd", "output_cosine", "output_overlap")


def _default_sandbox(timeout_s: float | None = None, unsafe_local: bool = False):
    from verifirst.verifiers.bash.sandbox import default_sandbox

    kw = {"unsafe_local": True} if unsafe_local else {}
    if timeout_s is not None:
        kw["timeout_s"] = float(timeout_s)
    return default_sandbox(**kw)


def _default_embed() -> EmbedFn:
    from verifirst.verifiers.embedder import embed

    return embed


def candidate_command(candidate: Any) -> str:
    """A command string from a str, a dict or a dspy.Prediction with a `command` field."""
    if isinstance(candidate, str):
        return candidate
    if isinstance(candidate, dict):
        v = candidate.get("command", candidate.get("bash"))
    else:
        v = getattr(candidate, "command", None)
    if v is None:
        raise InputError(f"candidate of type {type(candidate).__name__} has no command",
                         field="command", expected="a string or an object with a `command` field")
    return str(v)


def has_commands(script: str | None) -> bool:
    """Whether a script holds anything to run: a line that is neither blank nor a comment
    (a shebang is a comment).

    Args:
        script: the script text, or None.
    """
    return any(line.strip() and not line.lstrip().startswith("#") for line in (script or "").splitlines())


def with_prerequisite(command: str, prerequisite: str | None) -> str:
    """Run a test's setup first, quietly, in a subshell so its output never counts.

    A setup with no commands (only a shebang, comments, blank lines) runs as nothing: an empty
    subshell `( )` is a bash syntax error that would fail gold and candidate alike.

    Args:
        command: the command under test.
        prerequisite: the setup script, or None.
    """
    if not has_commands(prerequisite):
        return command
    return f"(\n{prerequisite}\n) >/dev/null 2>&1\n{command}"


def in_workdir(script: str, workdir: str | None) -> str:
    """Run `script` in `workdir` (the task's directory in the fixture), or as is when None.

    Args:
        script: the script to run there.
        workdir: an absolute path inside the fixture, or None.
    """
    if not workdir:
        return script
    return f"cd {shlex.quote(workdir)} || exit 1\n{script}"


def staged(command: str, path: str, run: str | None = None) -> str:
    """Write the command to `path` as a script (its exact bytes), run it with `run` (default
    `bash PATH`; a task's driver such as `./test.sh`, which may pass arguments), then remove it,
    so the script file itself is never part of the file-system effect.

    Args:
        command: the script text.
        path: where the task expects the script (EAbench: /home/test/bash.sh).
        run: the command that runs it, or None.
    """
    q = shlex.quote(path)
    b64 = base64.b64encode(command.encode()).decode()
    return (f"printf %s {b64} | base64 -d > {q} && chmod +x {q}\n{run or 'bash ' + q}\n"
            f"__vf_rc=$?\nrm -f {q}\nexit $__vf_rc")


def task_script(command: str, gold: dict) -> str:
    """The script the sandbox runs for `command` under a task's gold fields: `harness`,
    `script_path` + `run` (staged()), `prerequisite` (run first, quietly) and `workdir`.

    Args:
        command: the gold or candidate command.
        gold: the item's gold fields.
    """
    body = with_harness(command, gold.get("harness"))
    if gold.get("script_path"):
        body = staged(body, str(gold["script_path"]), gold.get("run"))
    return in_workdir(with_prerequisite(body, gold.get("prerequisite")), gold.get("workdir"))


def _fixture_records(fixture: Any) -> dict[str, tuple]:
    """path -> (type, mode, sha256) of a fixture's entries, as the sandbox's diff writes them."""
    from verifirst.verifiers.bash import fixtures

    return {"/" + e.path: (e.kind, f"{e.mode:04o}", e.sha256 or "") for e in fixtures.resolve(fixture).entries}


_AS_BEFORE = ("", "", "as before setup")  # a path that existed before setup; its attributes unknown


def relative_to_setup(run: RunView, setup_fs: tuple, fixture: Any) -> RunView:
    """The run's file-system effect against the state after setup, not against the fixture.

    The run executed setup + command; `setup_fs` is what the setup alone changed. A path the
    setup left as the command left it is no effect of the command; one the setup created and
    the command deleted is a deletion.

    Args:
        run: the run of setup + command.
        setup_fs: the fs entries (change, path, type, mode, sha256) of the setup run alone.
        fixture: the fixture both ran in (its entries stand for paths neither diff names).
    """
    if not setup_fs:
        return run
    orig = _fixture_records(fixture)

    def state(entries: tuple) -> dict[str, tuple | None]:
        return {e[1]: (None if e[0] == "deleted" else tuple(e[2:5])) for e in entries}

    def original(path: str) -> tuple | None:
        """The path before setup: the fixture's entry, else what a diff says of it (a deleted
        entry carries the old attributes; a modified one only that it existed, e.g. /etc files)."""
        if path in orig:
            return orig[path]
        said = [e for e in (*setup_fs, *run.fs) if e[1] == path and e[0] != "added"]
        if not said:
            return None
        deleted = [e for e in said if e[0] == "deleted"]
        return tuple(deleted[0][2:5]) if deleted else _AS_BEFORE

    s, d = state(setup_fs), state(run.fs)
    out = []
    for path in sorted(s.keys() | d.keys()):
        before = s[path] if path in s else original(path)
        after = d[path] if path in d else original(path)
        if before == after:
            continue
        change = "added" if before is None else "deleted" if after is None else "modified"
        attrs = after if after not in (None, _AS_BEFORE) else before
        out.append((change, path, *(attrs if attrs is not _AS_BEFORE else ("", "", "as before setup"))))
    return replace(run, fs=tuple(sorted(out)))


HARNESS_SLOT = "{command}"


def with_harness(command: str, harness: str | None) -> str:
    """Put the command into a test harness: a script in which `{command}` stands for it.

    A command that only defines something (a function, a loop over stdin) shows nothing when
    run alone; the harness feeds it input or calls what it defined, for gold and candidate alike.

    Args:
        command: the command under test.
        harness: the script with one `{command}` slot, or None/blank for the command alone.
    """
    if not harness or not harness.strip():
        return command
    return harness.replace(HARNESS_SLOT, command)


class FehVerifier:
    """verify(item, candidate): item.gold has `command` and `fixture` (optional `prerequisite`,
    run first and quietly, and `harness`, see with_harness()).

    `lm_failures` counts LLM checks that failed (the offline verdict then stands, and says so).
    """

    name = "bash-feh"

    def __init__(self, params: FehParams | str | None = None, *, llm: str = "off", lm=None,
                 run_pair: RunPair | None = None, embed: EmbedFn | None = None,
                 arbiter_margin: float = 0.1, timeout_s: float | None = None, unsafe_local: bool = False):
        """timeout_s / unsafe_local configure the default sandbox (TOML: [verifier] options);
        unsafe_local runs commands without isolation and is for hosts without user namespaces."""
        if llm not in LLM_MODES:
            raise InputError(f"unknown llm mode {llm!r}", field="llm", expected=", ".join(LLM_MODES))
        if isinstance(params, str):
            from ._feh_params import fitted_nl2sh, load_params

            params = fitted_nl2sh() if params == "nl2sh" else load_params(params)
        self.params = params or FehParams()
        self.llm, self.lm, self.arbiter_margin = llm, lm, arbiter_margin
        self._run_pair, self._embed = run_pair, embed
        self._checker = None
        self._sandbox_kw = {"timeout_s": timeout_s, "unsafe_local": bool(unsafe_local)}
        self.lm_failures = 0
        self._lock = threading.Lock()
        self._setup_fs: dict[tuple, tuple] = {}

    def preflight(self) -> None:
        """Build the sandbox now (its launcher found and probed, unless unsafe_local), so a host
        that cannot run it fails before the first LM call. An injected run_pair is taken as ready.

        Raises:
            SandboxUnavailable: no usable sandbox here; the message says how to fix it.
        """
        if self._run_pair is None:
            self.sandbox  # noqa: B018 - constructing it is the probe

    @property
    def sandbox(self):
        """The sandbox the default run_pair uses (shared per process and settings)."""
        return _default_sandbox(**self._sandbox_kw)

    @property
    def run_pair(self) -> RunPair:
        if self._run_pair is None:
            self._run_pair = self.sandbox.run_pair
        return self._run_pair

    @property
    def embed(self) -> EmbedFn:
        if self._embed is None:
            self._embed = _default_embed()
        return self._embed

    def verify(self, item: Item, candidate: Any) -> Verdict:
        """Run gold and candidate in fresh copies of the item's fixture and compare the runs.

        Args:
            item: gold has `command`, optional `fixture` (default empty, or a Fixture; with
                `fixture_spec` it is rebuilt where this process lacks it, see fixtures.from_spec),
                `prerequisite`, `harness`, `script_path` + `run`, `workdir` (see task_script),
                `match` ("exact": same output, no similarity rule) and `expect_failure`.
            candidate: a command string, or an object/dict with a `command` field.

        Returns:
            The verdict (see compare()); EMPTY for a blank candidate.
        """
        gold_cmd = item.gold.get("command")
        if not isinstance(gold_cmd, str) or not gold_cmd.strip():
            raise InputError(f"item {item.id} has no gold command", field="gold.command",
                             expected="a non-empty string")
        cand_cmd = candidate_command(candidate)
        task = item.inputs.get("task")
        if not cand_cmd.strip():
            return Verdict(0.0, False, "EMPTY", [VerifierError("EMPTY", "the candidate command is empty")],
                           feedback="NOT EQUIVALENT: the candidate command is empty; write one Bash command.",
                           backend=self.name, details={"equivalent": False})
        fixture = item.gold.get("fixture", "empty")
        if item.gold.get("fixture_spec"):
            from verifirst.verifiers.bash.fixtures import ensure  # only for task-directory fixtures

            fixture = ensure(fixture, item.gold["fixture_spec"])
        pre, harness = item.gold.get("prerequisite"), item.gold.get("harness")
        if harness is not None and HARNESS_SLOT not in str(harness):
            raise InputError(f"item {item.id}: the harness has no {HARNESS_SLOT} slot", field="gold.harness",
                             expected=f"a script with {HARNESS_SLOT} where the command goes")
        t0 = time.perf_counter()
        g, c = self.run_pair(task_script(gold_cmd, item.gold), task_script(cand_cmd, item.gold), fixture)
        if has_commands(pre):
            setup_fs = self.setup_effect(in_workdir(with_prerequisite("true", pre), item.gold.get("workdir")), fixture)
            g = relative_to_setup(RunView.of(g), setup_fs, fixture)
            c = relative_to_setup(RunView.of(c), setup_fs, fixture)
        t_run = time.perf_counter() - t0
        exact = item.gold.get("match") == "exact"
        v = self.compare(task, gold_cmd, cand_cmd, g, c, params=exact_output(self.params) if exact else None,
                         expect_failure=bool(item.gold.get("expect_failure")))
        v.timings["run_s"] = t_run
        v.details["fixture"] = getattr(fixture, "name", fixture)
        return v

    def setup_effect(self, setup: str, fixture: Any) -> tuple:
        """What the setup script alone changes in the fixture (fs entries), run once per
        (fixture, script) and kept.

        Args:
            setup: the script (see task_script: workdir and prerequisite, then `true`).
            fixture: the fixture name or Fixture.
        """
        key = (fixture if isinstance(fixture, str) else fixture.content_hash, setup)
        with self._lock:
            hit = self._setup_fs.get(key)
        if hit is None:
            hit = RunView.of(self.run_pair(setup, setup, fixture)[0]).fs
            with self._lock:
                self._setup_fs[key] = hit
        return hit

    def compare(self, task: str | None, gold_cmd: str, cand_cmd: str, gold_run: Any, cand_run: Any,
                feats: PairFeatures | None = None, params: FehParams | None = None,
                expect_failure: bool = False) -> Verdict:
        """The verdict for two finished runs (RunResult, dict or RunView).

        Args:
            task: the NL task (shown to the LLM check and in the feedback), or None.
            gold_cmd: the reference command text.
            cand_cmd: the candidate command text.
            gold_run: the reference's run.
            cand_run: the candidate's run.
            feats: precomputed features (a benchmark's cache); computed here when None.
            params: rule parameters for this pair (default: the verifier's).
            expect_failure: the task says failing is the expected outcome (the same failure of
                both runs then passes; otherwise it is INCONCLUSIVE).

        Returns:
            PASS / a failing stage, or Verdict.undecided (stage INCONCLUSIVE, `inconclusive` the
            reason) when the runs cannot decide; details carry both runs, the rule and the LLM info.
        """
        t0 = time.perf_counter()
        g, c = RunView.of(gold_run), RunView.of(cand_run)
        f = feats or features(g, c)
        f.same_command = gold_cmd.strip() == cand_cmd.strip()
        f.expect_failure = bool(expect_failure)
        params = params or self.params
        d = decide(f, params)
        if f.cos_cmd is None and d.rule in SIMILARITY_RULES:
            # only a similarity rule reads cosines: the embedder loads (seconds, cold) just for them
            add_cosines(f, g, c, gold_cmd, cand_cmd, self.embed)
            d = decide(f, params)
        t_cmp = time.perf_counter() - t0
        llm_info = self._llm_stage(task, gold_cmd, cand_cmd, g, c, d, params)
        text = feedback(task, gold_cmd, cand_cmd, g, c, f, d)
        if llm_info.get("said") is not None:
            saw = llm_info["saw"]
            text += (f"\nLLM check ({self.llm}): {'true' if llm_info['said'] else 'false'}; asked because "
                     f"{llm_info['asked_on']}; it saw the task, both commands and both outputs "
                     f"({saw['gold_output_chars']} and {saw['candidate_output_chars']} chars)")
        if llm_info.get("error"):
            text += f"\nLLM check failed ({llm_info['error']}); the offline verdict stands"
        details = {"equivalent": d.equivalent, "rule": d.rule, "differences": d.differences,
                   "inconclusive": d.inconclusive,
                   "gold": _run_summary(g), "candidate": _run_summary(c),
                   "features": {k: v for k, v in vars(f).items()}, "params": params.as_dict(),
                   "llm": llm_info, "lm_failed": bool(llm_info.get("error"))}
        timings = {"compare_s": t_cmp, **({"llm_s": llm_info["s"]} if "s" in llm_info else {})}
        if d.inconclusive:
            return Verdict.undecided(d.inconclusive, feedback=text, backend=self.name, details=details,
                                     timings=timings)
        errors = [] if d.equivalent else [VerifierError(d.stage, f"differs in: {', '.join(d.differences) or d.rule}")]
        return Verdict(score=float(d.score), passed=d.equivalent, stage=d.stage, errors=errors,
                       feedback=text, backend=self.name, details=details, timings=timings)

    def _llm_stage(self, task, gold_cmd, cand_cmd, g: RunView, c: RunView, d: Decision, params: FehParams) -> dict:
        """confirm: S1 (an offline 'equivalent' also needs the LLM's true); arbiter: the LLM
        decides the cases the rules are least sure of. Either way only a verdict of a similarity
        rule: what execution decided (same or different output, status, files, facts) or could
        not decide (INCONCLUSIVE) never reaches the LLM. Mutates d; LM failures leave it as is."""
        if self.llm == "off" or d.inconclusive or d.rule not in SIMILARITY_RULES:
            return {"mode": self.llm}
        if self.llm == "confirm" and not d.equivalent:
            return {"mode": self.llm}
        if self.llm == "arbiter":
            thr = params.cmd_threshold if d.rule == "no_output_cmd" else params.out_threshold
            if d.rule not in ARBITER_BRANCHES or abs(d.score - thr) > self.arbiter_margin:
                return {"mode": self.llm}
        t0 = time.perf_counter()
        try:
            said = self.ask_llm(task, gold_cmd, cand_cmd, observed(g), observed(c))
        except Exception as e:  # an LM failure is not a FAIL of the candidate: counted and said
            with self._lock:
                self.lm_failures += 1
            return {"mode": self.llm, "error": f"{type(e).__name__}: {e}"[:300]}
        info = {"mode": self.llm, "said": said, "s": time.perf_counter() - t0,
                "asked_on": f"rule {d.rule} (score {d.score:.2f}) left the pair open",
                "saw": {"gold_output_chars": len(observed(g)), "candidate_output_chars": len(observed(c))}}
        before = d.equivalent
        d.equivalent = said if self.llm == "arbiter" else (d.equivalent and said)
        if d.equivalent != before:
            d.rule, d.stage = d.rule + "+llm", ("PASS" if d.equivalent else "LLM")
        return info

    def ask_llm(self, task, gold_cmd, cand_cmd, gold_out, cand_out) -> bool:
        import dspy

        from ._feh_llm import LlmEquivalenceCheck, as_bool

        if self._checker is None:
            self._checker = LlmEquivalenceCheck()
        if self.lm is not None:
            from verifirst.lm import FastJSONAdapter

            # JSON mode: the embedded model's answer is then grammar-constrained to a bool
            with dspy.context(lm=self.lm, adapter=FastJSONAdapter()):
                pred = self._checker(task, gold_cmd, cand_cmd, gold_out, cand_out)
        else:
            pred = self._checker(task, gold_cmd, cand_cmd, gold_out, cand_out)
        return as_bool(pred.equivalent)


def exact_output(p: FehParams) -> FehParams:
    """For items whose harness prints exact values (`match: exact`): output must be equal,
    in the same order, and the same files; no similarity rule (cosine, containment, command
    text) can pass it."""
    return replace(p, out_threshold=_NEVER, cmd_threshold=_NEVER, overlap_threshold=_NEVER,
                   sorted_lines_equal=False, fs_veto=True)


_NEVER = 2.0  # above any cosine or containment


def _run_summary(r: RunView, n: int = 4000) -> dict:
    return {"stdout": r.stdout[:n], "stderr": r.stderr[:n], "exit_code": r.exit_code,
            "timed_out": r.timed_out, "signal": r.signal, "truncated": r.truncated,
            "fs_diff": [{"change": e[0], "path": e[1], "type": e[2], "mode": e[3], "sha256": e[4]}
                        for e in r.fs]}


def feh_metric(verifier: FehVerifier | None = None):
    """A DSPy/GEPA metric: (example, prediction) -> dspy.Prediction(score, feedback)."""
    v = verifier or FehVerifier()

    def metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        import dspy

        extra = {k: getattr(gold, k) for k in ("prerequisite", "harness", "match", "expect_failure",
                                                      "script_path", "run", "workdir")
                 if getattr(gold, k, None)}
        item = Item(id=str(getattr(gold, "item_id", "item")), inputs={"task": getattr(gold, "task", "")},
                    gold={"command": gold.command, "fixture": getattr(gold, "fixture", "empty"), **extra})
        verdict = v.verify(item, pred)
        # DSPy needs a number: an undecided verdict scores 0.0 and its feedback says it decided nothing
        return dspy.Prediction(score=1.0 if verdict.passed is True else 0.0, feedback=verdict.feedback)

    return metric


def cli_verify_bash(gold: str, pred: str, fixture: str = "empty", as_json: bool = False,
                    task: str | None = None, llm: str = "off", params_path: str | None = None,
                    model: str = "local", unsafe_local: bool = False, timeout_s: float = 5.0) -> int:
    """`verifirst verify bash`: print the verdict; exit 0 if equivalent, 1 if not, 3 if the runs
    cannot decide (INCONCLUSIVE; the JSON's `inconclusive` says why).
    Parameters: a JSON file, else those fitted on the NL2SH-ALFA pairs."""
    from verifirst.verifiers.bash.sandbox import check_command

    check_command(gold, "--gold")
    check_command(pred, "--pred")
    v = FehVerifier(params_path or "nl2sh", llm=llm, timeout_s=timeout_s, unsafe_local=unsafe_local)
    if llm != "off":  # built after the verifier has checked the mode: a bad one loads no model
        from verifirst.lm import make_lm

        v.lm = make_lm(model, role="judge")
    item = Item(id="cli", inputs={"task": task or ""}, gold={"command": gold, "fixture": fixture})
    verdict = v.verify(item, pred)
    out = {"equivalent": verdict.passed, "inconclusive": verdict.inconclusive, "score": verdict.score,
           "stage": verdict.stage, "rule": verdict.details["rule"],
           "stdout": {"gold": verdict.details["gold"]["stdout"], "pred": verdict.details["candidate"]["stdout"]},
           "exit_code": {"gold": verdict.details["gold"]["exit_code"],
                         "pred": verdict.details["candidate"]["exit_code"]},
           "fs_diff": {"gold": verdict.details["gold"]["fs_diff"], "pred": verdict.details["candidate"]["fs_diff"]},
           "feedback": verdict.feedback, "sandbox": v.sandbox.backend,
           "lm_failures": v.lm_failures}
    print(json.dumps(out, indent=2) if as_json else verdict.feedback)
    if verdict.inconclusive:
        return EXIT_INCONCLUSIVE
    return 0 if verdict.passed else 1
