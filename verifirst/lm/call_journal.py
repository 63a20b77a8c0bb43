"""Every LM request of a run, written as it goes out: RUN_DIR/calls.jsonl.

The spend meter appends one line when it admits a request (before anything is sent) and one when
it settles it (the usage that came back, a cache hit, a failure). Each line is one write(2) on a
file opened O_APPEND, so it is in the kernel's page cache before the request leaves: a process
killed at any point (kill -9 included) loses no line but the one being written, and a line cut
by the kill is skipped when read.

A resumed run reads the journal before it starts (`CallJournal.prior`): the requests of every
earlier invocation of the run directory count in its usage and against its spend limits, so a
`max_lm_calls` cap holds across a kill and a resume. A request admitted but never settled (the
process died while it was in flight) may or may not have reached the model: it counts against
the caps at its reservation (the worst case) and is reported apart as `in_flight_at_kill`.
"""
from __future__ import annotations

import itertools
import json
import os
import threading
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CALLS_FILE = "calls.jsonl"


@dataclass
class Totals:
    """Requests of one scope (the run or a role). requests: sent to the model (a failed one too);
    cache_hits: served by the LM cache (never sent); in_flight_at_kill: admitted by an earlier
    invocation that died before settling them (maybe sent)."""

    requests: int = 0
    cache_hits: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0
    in_flight_at_kill: int = 0
    reserved_tokens: int = 0  # the worst case of the requests in flight at a kill
    reserved_usd: float = 0.0

    def add_settled(self, rec: dict) -> None:
        self.requests += int(rec.get("calls") or 0)
        self.cache_hits += int(bool(rec.get("cache")))
        self.errors += int(bool(rec.get("failed")))
        self.prompt_tokens += int(rec.get("p") or 0)
        self.completion_tokens += int(rec.get("c") or 0)
        self.usd += float(rec.get("u") or 0.0)

    def as_dict(self) -> dict:
        out = asdict(self)
        out["usd"] = round(self.usd, 8)
        out["reserved_usd"] = round(self.reserved_usd, 8)
        return out


@dataclass
class JournalSummary:
    """What a journal holds: totals for the run and per role, and how many invocations wrote it."""

    run: Totals = field(default_factory=Totals)
    roles: dict[str, Totals] = field(default_factory=dict)
    invocations: int = 0

    def role(self, name: str) -> Totals:
        return self.roles.setdefault(name, Totals())

    def as_dict(self) -> dict:
        return {"invocations": self.invocations, **self.run.as_dict(),
                "roles": {r: t.as_dict() for r, t in sorted(self.roles.items())}}


def _merge(dst: JournalSummary, src: JournalSummary) -> None:
    for name, t in [("", src.run)] + list(src.roles.items()):
        into = dst.run if name == "" else dst.role(name)
        for k, v in asdict(t).items():
            setattr(into, k, getattr(into, k) + v)


def sum_journals(paths: Any) -> dict:
    """The requests of several journals together (a cost objective's: each candidate model's run and
    the choice's), as a report's `usage_run_dir`; a missing file adds nothing.

    Args:
        paths: the calls.jsonl files.
    """
    total = JournalSummary()
    for path in paths:
        one = read_journal(path)
        _merge(total, one)
        total.invocations += one.invocations
    return total.as_dict()


def read_journal(path: str | os.PathLike) -> JournalSummary:
    """Sum a journal file ({} totals when it is missing); a line cut by a kill is skipped.

    Args:
        path: RUN_DIR/calls.jsonl.
    """
    out = JournalSummary()
    try:
        text = Path(path).read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return out
    admitted: dict[tuple[str, int], dict] = {}
    invocations: set[str] = set()
    for line in text.split("\n"):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not isinstance(rec, dict) or "k" not in rec:
            continue
        key = (str(rec.get("i")), int(rec.get("n") or 0))
        invocations.add(key[0])
        if rec["k"] == "a":
            admitted[key] = rec
        elif rec["k"] == "s":
            adm = admitted.pop(key, None)
            role = str(rec.get("r") or (adm or {}).get("r") or "task")
            for t in (out.run, out.role(role)):
                t.add_settled(rec)
    for rec in admitted.values():  # admitted, never settled: the process died with it in flight
        for t in (out.run, out.role(str(rec.get("r") or "task"))):
            t.in_flight_at_kill += 1
            t.reserved_tokens += int(rec.get("t") or 0)
            t.reserved_usd += float(rec.get("u") or 0.0)
    out.invocations = len(invocations)
    return out


class CallJournal:
    """The run directory's request journal, opened for appending by one invocation.

    Args:
        path: RUN_DIR/calls.jsonl (created if missing).

    Attributes:
        prior: what earlier invocations wrote (read once, at open).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.prior = read_journal(self.path)
        self.mine = JournalSummary(invocations=1)
        self.invocation = uuid.uuid4().hex[:12]
        self._seq = itertools.count(1)
        self._lock = threading.Lock()
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        if os.fstat(self._fd).st_size and not self._ends_with_newline():
            os.write(self._fd, b"\n")  # a line cut by a kill: end it so the next stays whole

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) == b"\n"

    def _write(self, rec: dict) -> None:
        fd = self._fd
        if fd is None:
            return
        os.write(fd, (json.dumps(rec, separators=(",", ":")) + "\n").encode())  # one write of one line

    def admitted(self, role: str, model: str, tokens: int, usd: float) -> int:
        """Write that a request is about to go out; returns its number (for `settled`).

        Args:
            role: the LM role.
            model: the model it is priced as.
            tokens: its reservation (prompt estimate + max_tokens).
            usd: its reserved price.

        Raises:
            OSError: the line could not be written (the request must not go out).
        """
        n = next(self._seq)
        self._write({"k": "a", "i": self.invocation, "n": n, "r": role, "m": model, "t": tokens,
                     "u": round(usd, 10)})
        return n

    def settled(self, n: int, role: str, *, calls: int, prompt_tokens: int, completion_tokens: int, usd: float,
                cache_hit: bool, failed: bool) -> None:
        """Write what request `n` turned out to be (the requests it sent, its usage, a cache hit).

        Args:
            n: what `admitted` returned.
            role: the LM role.
            calls: requests it sent to the model (0 for a cache hit; retries an engine made count).
            prompt_tokens, completion_tokens, usd: its usage.
            cache_hit: served by the LM cache.
            failed: the request failed.
        """
        rec: dict[str, Any] = {"k": "s", "i": self.invocation, "n": n, "r": role, "calls": calls,
                               "p": prompt_tokens, "c": completion_tokens, "u": round(usd, 10)}
        if cache_hit:
            rec["cache"] = 1
        if failed:
            rec["failed"] = 1
        with self._lock:
            for t in (self.mine.run, self.mine.role(role)):
                t.add_settled(rec)
        try:
            self._write(rec)
        except OSError:
            pass  # the request is settled in memory; its admit line counts it as sent at worst

    def totals(self) -> dict:
        """Every invocation's requests, this one's included, as the report's `usage_run_dir`."""
        with self._lock:
            both = JournalSummary(invocations=self.prior.invocations + 1)
            for src in (self.prior, self.mine):
                _merge(both, src)
        return both.as_dict()

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
