"""Execution-equivalence comparison: two sandbox runs -> features -> decision + feedback.

Pure logic over RunResult-like objects (attributes or dict keys stdout, stderr, exit_code,
timed_out, signal, truncated, fs_diff{added,deleted,modified}); embeddings come in through a
callable so the rule can be tested and cross-validated without the model.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, Sequence

from ._feh_facts import fact_difference, facts_text

EmbedFn = Callable[[Sequence[str]], Any]  # texts -> (n, d) L2-normalised array
EMBED_CHARS = 1000  # S1 embeds and shows the LLM at most this much of each output


@dataclass(frozen=True)
class RunView:
    """The parts of a sandbox run the comparison reads; JSON-serialisable for caches."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = 0
    timed_out: bool = False
    signal: int | None = None
    truncated: bool = False
    fs: tuple = ()  # sorted (change, path, type, mode, sha256)
    stdout_sha256: str = ""  # of the whole stream, also the part past the output cap

    @classmethod
    def of(cls, r: Any) -> "RunView":
        if isinstance(r, RunView):
            return r
        get = (lambda k, d=None: r.get(k, d)) if isinstance(r, dict) else (lambda k, d=None: getattr(r, k, d))
        fs = get("fs")
        if fs is None:
            fs = fs_entries(get("fs_diff"))
        return cls(stdout=_text(get("stdout", "")), stderr=_text(get("stderr", "")),
                   exit_code=get("exit_code", 0), timed_out=bool(get("timed_out", False)),
                   signal=get("signal"), truncated=bool(get("truncated", False)),
                   fs=tuple(sorted(tuple(e) for e in fs)), stdout_sha256=get("stdout_sha256", "") or "")

    def as_dict(self) -> dict:
        d = asdict(self)
        d["fs"] = [list(e) for e in self.fs]
        return d

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def status(self) -> str:
        if self.timed_out:
            return "timeout"
        if self.signal:
            return f"signal {self.signal}"
        return f"exit {self.exit_code}"


def _text(v: Any) -> str:
    if v is None:
        return ""
    return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v)


def fs_entries(diff: Any) -> list[tuple]:
    """FsDiff (object or dict) -> (change, path, type, mode, sha256) tuples."""
    if diff is None:
        return []
    out = []
    for change in ("added", "deleted", "modified"):
        rows = diff.get(change, []) if isinstance(diff, dict) else getattr(diff, change, [])
        for e in rows or []:
            g = e.get if isinstance(e, dict) else (lambda k, d=None, e=e: getattr(e, k, d))
            mode = g("mode")
            out.append((change, str(g("path")), str(g("type") or ""),
                        "" if mode is None else (oct(mode) if isinstance(mode, int) else str(mode)),
                        str(g("sha256") or "")))
    return out


def norm_out(s: str) -> str:
    """Trailing blanks and blank lines never carry meaning in a terminal."""
    return "\n".join(line.rstrip() for line in s.replace("\r\n", "\n").split("\n")).strip("\n")


@dataclass
class PairFeatures:
    stdout_equal: bool
    stdout_sorted_equal: bool
    stderr_equal: bool
    exit_equal: bool
    ok_gold: bool
    ok_cand: bool
    fs_equal: bool
    fs_gold_empty: bool
    fs_cand_empty: bool
    fs_path_jaccard: float
    out_gold_empty: bool
    out_cand_empty: bool
    line_jaccard: float
    stdout_both_empty: bool = False
    fs_paths_equal: bool = True  # same (change, path) set, contents aside
    token_overlap: float = 0.0  # |A & B| / min(|A|, |B|) over output tokens
    min_tokens: int = 0
    max_tokens: int = 0
    cos_out: float | None = None
    cos_cmd: float | None = None
    past_cap_differs: bool = False  # kept outputs alike, full streams not (a run hit the output cap)
    same_command: bool = False  # the two command texts are the same (blanks at the ends aside)
    gold_no_result: bool = False  # the reference showed only a failure or a usage line (no_result())
    cand_no_result: bool = False
    expect_failure: bool = False  # the task says failing is the expected outcome
    same_failure: bool = False  # both runs failed (failed()) and show exactly the same thing
    out_chars: int = 0  # the longer observed output, in characters (facts() reads short ones)
    facts_gold_only: tuple = ()  # facts the reference states and the candidate does not (facts())
    facts_cand_only: tuple = ()
    lines_gold_only: int = 0  # lines only the reference printed (as a multiset; blanks aside)
    lines_cand_only: int = 0
    lines_shared: int = 0  # lines both printed

    @property
    def facts_differ(self) -> bool:
        """Each output states a fact the other does not (a subset, e.g. `id -u` in `id`, is no
        conflict), or the reference printed lines with facts where the candidate printed nothing
        of its own (past a shared preamble, the candidate gave no answer)."""
        if self.lines_gold_only + self.lines_cand_only < self.lines_shared:
            return False  # mostly the same lines (env and printenv): a detail, not another result
        g, c = bool(self.facts_gold_only), bool(self.facts_cand_only)
        return (g and c) or (g and not self.lines_cand_only)

    @property
    def status_match(self) -> bool:
        return self.ok_gold == self.ok_cand

    @property
    def no_output(self) -> bool:
        return self.out_gold_empty and self.out_cand_empty

    @property
    def gold_quiet(self) -> bool:
        """The reference did nothing observable: exit 0, no output, no file-system change."""
        return self.ok_gold and self.out_gold_empty and self.fs_gold_empty

    @property
    def cand_quiet(self) -> bool:
        return self.ok_cand and self.out_cand_empty and self.fs_cand_empty


# A usage or help-hint line: what a script prints when run without the arguments it needs.
_USAGE = re.compile(r"^\s*(usage|syntax)\s*:|^\s*try '.*--help'", re.IGNORECASE)


def no_result(r: RunView) -> bool:
    """The run shows only a failure or a usage line: no stdout beyond usage lines, no file change,
    and it failed or printed a usage line. Such text is no evidence about the task.

    Args:
        r: the run.
    """
    if r.fs:
        return False
    out = [line for line in norm_out(r.stdout).split("\n") if line.strip()]
    if any(not _USAGE.match(line) for line in out):
        return False
    if out or not r.ok:
        return True
    return any(_USAGE.match(line) for line in norm_out(r.stderr).split("\n"))


# Error text a run leaves on stderr even when a driver script masks its exit status.
_ERROR = re.compile(r"command not found|no such file|permission denied|does not exist|not permitted|"
                    r"read-only file system|unknown (?:user|group|option)|invalid (?:option|user|group)|"
                    r"unrecognized option|illegal option|cannot|can't|\berror\b|\bfailed\b", re.IGNORECASE)


def failed(r: RunView) -> bool:
    """The run failed: a non-zero exit, a timeout or signal, or error text on stderr (a task's
    driver, e.g. EAbench's test.sh, may exit 0 after the script under it failed).

    Args:
        r: the run.
    """
    return not r.ok or bool(r.signal) or bool(_ERROR.search(r.stderr))


def observed(r: RunView) -> str:
    """What a user sees: stdout, then stderr (docker exec_run in the peers merges them)."""
    return norm_out(r.stdout) + ("\n" + norm_out(r.stderr) if norm_out(r.stderr) else "")


def features(g: RunView, c: RunView, gold_cmd: str | None = None, cand_cmd: str | None = None) -> PairFeatures:
    """What the rules read from two runs.

    Args:
        g: the reference's run.
        c: the candidate's run.
        gold_cmd: the reference command text; with cand_cmd it fills `same_command`.
        cand_cmd: the candidate command text.
    """
    so_g, so_c = norm_out(g.stdout), norm_out(c.stdout)
    lg, lc = set(so_g.split("\n")) - {""}, set(so_c.split("\n")) - {""}
    pg, pc = {e[1] for e in g.fs}, {e[1] for e in c.fs}
    equal, sorted_equal = so_g == so_c, sorted(so_g.split("\n")) == sorted(so_c.split("\n"))
    past_cap = False
    if (g.truncated or c.truncated) and g.stdout_sha256 and c.stdout_sha256:
        # what was kept cannot tell: the full-stream digests decide
        past_cap = g.stdout_sha256 != c.stdout_sha256
        equal = sorted_equal = not past_cap
    return PairFeatures(
        past_cap_differs=past_cap,
        same_command=gold_cmd is not None and cand_cmd is not None and gold_cmd.strip() == cand_cmd.strip(),
        stdout_equal=equal,
        stdout_sorted_equal=sorted_equal,
        stderr_equal=norm_out(g.stderr) == norm_out(c.stderr),
        exit_equal=(g.exit_code, g.timed_out) == (c.exit_code, c.timed_out),
        ok_gold=g.ok, ok_cand=c.ok,
        fs_equal=g.fs == c.fs, fs_gold_empty=not g.fs, fs_cand_empty=not c.fs,
        fs_path_jaccard=_jacc(pg, pc),
        fs_paths_equal={e[:2] for e in g.fs} == {e[:2] for e in c.fs},
        out_gold_empty=not observed(g), out_cand_empty=not observed(c),
        line_jaccard=_jacc(lg, lc), stdout_both_empty=not so_g and not so_c,
        gold_no_result=no_result(g), cand_no_result=no_result(c),
        same_failure=(failed(g) and equal and norm_out(g.stderr) == norm_out(c.stderr)
                      and (g.exit_code, g.timed_out, g.signal) == (c.exit_code, c.timed_out, c.signal)
                      and g.fs == c.fs),
        token_overlap=_overlap(tg := _tokens(og := observed(g)), tc := _tokens(oc := observed(c))),
        min_tokens=min(len(tg), len(tc)), max_tokens=max(len(tg), len(tc)), out_chars=max(len(og), len(oc)),
        **fact_difference(og, oc))


_TOKEN = re.compile(r"[A-Za-z0-9_./:@%+-]+")


def _tokens(s: str) -> set[str]:
    return set(_TOKEN.findall(s))


def _overlap(a: set, b: set) -> float:
    """Containment: `id -u` prints a token of `id`'s line, `ls` names appear in `ls -l`."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def _jacc(a: set, b: set) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def add_cosines(f: PairFeatures, g: RunView, c: RunView, gold_cmd: str, cand_cmd: str, embed: EmbedFn) -> PairFeatures:
    """Fill cos_out (observed output, first EMBED_CHARS) and cos_cmd (command text) in one batch.

    Equal texts have cosine 1 without embedding them (long identical outputs cost most of a
    pair's time otherwise); `embed` is not called at all when every pair is equal.
    """
    pairs = {"cmd": (gold_cmd, cand_cmd)}
    if not f.no_output:
        pairs["out"] = (observed(g)[:EMBED_CHARS] or " ", observed(c)[:EMBED_CHARS] or " ")
    todo = [k for k, (a, b) in pairs.items() if a != b]
    v = embed([t for k in todo for t in pairs[k]]) if todo else None
    cos = {k: 1.0 for k in pairs}
    for i, k in enumerate(todo):
        cos[k] = float(v[2 * i] @ v[2 * i + 1])
    f.cos_out = cos.get("out")
    f.cos_cmd = cos["cmd"]
    return f


@dataclass(frozen=True)
class FehParams:
    """Rule parameters. Defaults are S1's 0.75 cosine; feh_quality.py picks them by k-fold CV."""

    out_threshold: float = 0.75      # cosine of observed outputs
    cmd_threshold: float = 0.80      # cosine of command texts, used when neither run printed anything
    status_veto: bool = True         # one run succeeds, the other fails -> not equivalent
    fs_veto: bool = True             # any fs difference -> not equivalent; when off, only
                                     # differing contents are let through (a date in a file)
    fs_effect_wins: bool = True      # same non-empty fs effect, both succeed -> equivalent (cp -v)
    sorted_lines_equal: bool = True  # same lines in another order count as equal output
    overlap_threshold: float = 1.01  # token containment that also counts as same output (>1: off)
    overlap_min_tokens: int = 1      # ...when the smaller output has at least this many tokens
    overlap_max_ratio: float = 4.0   # ...and the larger has at most this many times its tokens: a
                                     # candidate that prints everything (env, listings, numbers) to
                                     # contain any answer is no answer. A design choice (not fitted)
    output_over_status: bool = False  # equal non-empty output and fs outweigh differing exit codes
    inconclusive: bool = True        # say INCONCLUSIVE when the runs cannot decide (see undecidable());
                                     # off: such pairs fall through to the similarity rules
    fact_chars: int = 200            # outputs up to this long (the longer one) that state different
                                     # facts (facts()) pass no similarity rule; 0: off. A design
                                     # choice (not fitted): 120..200 keep NL2SH-ALFA's CV accuracy
                                     # >= 0.92 over 5 fold splits (feh_quality.py, 2026-12-06)

    @classmethod
    def from_dict(cls, d: dict) -> "FehParams":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Decision:
    equivalent: bool
    score: float
    rule: str             # which branch decided
    stage: str            # PASS or the failing aspect
    differences: list[str] = field(default_factory=list)
    inconclusive: str | None = None  # why nothing observable decides; equivalent is then False


QUIET_REASON = ("the reference command has no observable effect in this fixture (exit 0, no output, "
                "no file-system change) and neither has the candidate: running them cannot tell them apart")
FAILED_REASON = ("both commands fail in this fixture, with different errors: the fixture cannot run the "
                 "reference, so running them shows nothing about the task")
SAME_FAILURE_REASON = ("both commands fail in this fixture the same way (or print only the same usage line): "
                       "the fixture cannot run the reference, so the shared failure shows nothing about the "
                       "task; mark the task `expect_failure` if failing is the expected outcome")


def undecidable(f: PairFeatures) -> str | None:
    """Why execution cannot decide this pair, or None.

    A quiet reference against a candidate that did something (printed, changed files, failed) is
    decided: that difference was observed. The same command text is decided too (one program,
    one fixture). Two runs that show only a failure or a usage line (no_result()) are not, nor
    are two that fail (failed()) and show exactly the same thing, unless the task expects failure.

    Args:
        f: the pair's features.
    """
    if f.same_command:
        return None
    if f.gold_quiet and f.cand_quiet:
        return QUIET_REASON
    if f.expect_failure:
        return None
    if f.same_failure:
        return SAME_FAILURE_REASON
    if f.gold_no_result and f.cand_no_result:
        same = f.stdout_equal and f.stderr_equal and f.exit_equal
        return SAME_FAILURE_REASON if same else FAILED_REASON
    return None


def decide(f: PairFeatures, p: FehParams) -> Decision:
    """The rule cascade. Undecidable pairs first, strong execution evidence next, similarity last."""
    diffs = differences(f)
    reason = undecidable(f) if p.inconclusive else None
    if reason:
        return Decision(False, 0.0, "inconclusive", "INCONCLUSIVE", diffs, inconclusive=reason)
    out_equal = f.stdout_equal or (p.sorted_lines_equal and f.stdout_sorted_equal)
    if f.stdout_both_empty and not f.stderr_equal:
        out_equal = False  # two different failures are not one output
    if out_equal and f.exit_equal and f.fs_equal and not f.no_output:
        return Decision(True, 1.0, "identical", "PASS", diffs)
    if p.output_over_status and out_equal and not f.stdout_both_empty and f.fs_equal:
        return Decision(True, 1.0, "output_equal", "PASS", diffs)
    if f.past_cap_differs:
        return Decision(False, 0.0, "output_cap", "OUTPUT", diffs)
    if p.status_veto and not f.status_match:
        return Decision(False, 0.0, "status", "EXIT_STATUS", diffs)
    if not f.fs_equal and (p.fs_veto or not f.fs_paths_equal):
        # touching other paths than the reference is never the same outcome
        return Decision(False, 0.5 * f.fs_path_jaccard, "fs", "FS_DIFF", diffs)
    if p.fs_effect_wins and f.fs_equal and not f.fs_gold_empty and f.ok_gold and f.ok_cand:
        return Decision(True, 1.0, "fs_effect", "PASS", diffs)
    if f.no_output:
        # Nothing observable beyond status and files: fall back on what the commands say.
        s = f.cos_cmd if f.cos_cmd is not None else 0.0
        if f.same_command and f.fs_equal and f.exit_equal and f.stderr_equal:
            return Decision(True, 1.0, "same_command", "PASS", diffs)
        if f.fs_equal and f.exit_equal and f.stderr_equal and s >= p.cmd_threshold:
            return Decision(True, s, "no_output_cmd", "PASS", diffs)
        return Decision(False, s, "no_output_cmd", "NO_OUTPUT", diffs)
    if out_equal:
        return Decision(True, 1.0, "output_equal", "PASS", diffs)
    if f.out_gold_empty != f.out_cand_empty:
        # one printed, the other did not: no similarity of an empty text to output is evidence
        return Decision(False, 0.0, "output_presence", "OUTPUT", diffs)
    if f.gold_no_result or f.cand_no_result:
        # usage and error lines share words across unrelated scripts: no similarity rule decides on them
        return Decision(False, 0.0, "usage_error", "OUTPUT", diffs)
    if p.fact_chars and f.out_chars <= p.fact_chars and f.facts_differ:
        # short outputs that state different facts (a date and a kernel version, two time zones)
        # share words and shape: no similarity of the texts makes them the same result
        return Decision(False, 0.0, "facts", "OUTPUT", diffs)
    s = max(f.cos_out if f.cos_out is not None else 0.0, 0.0)
    if s >= p.out_threshold:
        return Decision(True, s, "output_cosine", "PASS", diffs)
    if f.token_overlap >= p.overlap_threshold and f.min_tokens >= p.overlap_min_tokens and \
            f.max_tokens <= p.overlap_max_ratio * f.min_tokens:
        return Decision(True, max(s, p.out_threshold), "output_overlap", "PASS", diffs)
    return Decision(False, s, "output_cosine", "OUTPUT", diffs)


def differences(f: PairFeatures) -> list[str]:
    d = []
    if not f.exit_equal:
        d.append("exit_status")
    if not f.stdout_equal:
        d.append("stdout_order" if f.stdout_sorted_equal else "stdout")
    if f.facts_differ:
        d.append("facts")
    if not f.stderr_equal:
        d.append("stderr")
    if not f.fs_equal:
        d.append("fs_diff")
    return d


def feedback(task: str | None, gold_cmd: str, cand_cmd: str, g: RunView, c: RunView,
             f: PairFeatures, d: Decision, max_lines: int = 12) -> str:
    """Plain text for a reflection LM: the verdict, then each aspect that differed."""
    if d.inconclusive:
        head = f"INCONCLUSIVE: {d.inconclusive}"
    else:
        head = ("EQUIVALENT" if d.equivalent else "NOT EQUIVALENT") + f" (rule {d.rule}, score {d.score:.2f})"
    lines = [head, f"candidate: {cand_cmd}", f"reference: {gold_cmd}"]
    if task:
        lines.insert(1, f"task: {task}")
    if not f.exit_equal:
        lines.append(f"exit status: candidate {c.status}, reference {g.status}")
    if c.timed_out:
        lines.append("the candidate ran past the time limit")
    if f.past_cap_differs:
        lines.append("stdout: the kept part is alike but the full outputs differ past the output cap "
                     "(1 MiB); print less, or the same thing as the reference")
    elif not f.stdout_equal:
        if f.stdout_sorted_equal:
            lines.append("stdout: same lines, different order")
        else:
            lines.append("stdout differs (--- reference, +++ candidate):")
            lines += _diff(g.stdout, c.stdout, max_lines)
    if d.rule == "facts":
        lines.append(f"the outputs state different facts: reference {facts_text(f.facts_gold_only)}; "
                     f"candidate {facts_text(f.facts_cand_only)}")
    if not f.stderr_equal and (c.stderr.strip() or g.stderr.strip()):
        lines.append("stderr: candidate " + (repr(_clip(c.stderr)) if c.stderr.strip() else "empty")
                     + "; reference " + (repr(_clip(g.stderr)) if g.stderr.strip() else "empty"))
    if not f.fs_equal:
        lines.append("file-system changes differ:")
        lines += _fs_lines(g, c, max_lines)
    elif g.fs:
        lines.append(f"file-system changes match ({len(g.fs)} entries)")
    if f.no_output and not d.equivalent and not d.inconclusive:
        lines.append("neither command printed anything; judged on status, files and command text")
    if c.truncated or g.truncated:
        lines.append("output was truncated at the sandbox cap")
    return "\n".join(lines)


def _clip(s: str, n: int = 200) -> str:
    s = s.strip()
    return s if len(s) <= n else s[:n] + "..."


def _diff(a: str, b: str, max_lines: int) -> list[str]:
    out = [l for l in difflib.unified_diff(norm_out(a).split("\n"), norm_out(b).split("\n"),
                                           lineterm="", n=0) if not l.startswith(("---", "+++", "@@"))]
    if len(out) > max_lines:
        out = out[:max_lines] + [f"  ... {len(out) - max_lines} more diff lines"]
    return ["  " + l[:200] for l in out]


def _fs_lines(g: RunView, c: RunView, max_lines: int) -> list[str]:
    only_g, only_c = set(g.fs) - set(c.fs), set(c.fs) - set(g.fs)
    both = {e[1] for e in only_g} & {e[1] for e in only_c}
    rows = [f"  content differs: {e[0]} {e[1]} ({e[2]})" for e in sorted(only_g) if e[1] in both]
    rows += [f"  only reference: {e[0]} {e[1]} ({e[2]})" for e in sorted(only_g) if e[1] not in both]
    rows += [f"  only candidate: {e[0]} {e[1]} ({e[2]})" for e in sorted(only_c) if e[1] not in both]
    if len(rows) > max_lines:
        rows = rows[:max_lines] + [f"  ... {len(rows) - max_lines} more"]
    return rows
