"""Spend control: every LM call is admitted against what is left of the run's budget before it is
sent.

A SpendMeter holds the limits (money, tokens, LM calls, wall time) for the whole run and, where
given, per role. AccountedLM asks the active meter to `admit` each request before sending it; the
meter reserves the request's worst case (one call; the prompt's tokens, estimated as characters / 4,
plus max_tokens of completion; their price) and refuses, with BudgetExceeded, a request that would
cross a limit. After the request, `settle` replaces the reservation with the real usage (a cache hit
is free; a failed request counts as a call, with no tokens and no cost).

Admission is atomic (one lock), so under any number of threads the reservations never cross a
limit: what can exceed a cap is only real usage above its reservation (a prompt longer than
characters / 4 tokens). A refusal is a hard stop: the run's limit stops every role, a role's limit
stops that role, and every later admission in that scope is refused too.

A part of the run's limits can be held back (`hold_back`): while held, admissions see the run's caps
less the held amounts, so the optimizer stops early enough for the test split to be scored with
what is left; `release` gives the held part back and lifts a stop that only the holding caused.

With a journal attached (`attach_journal`, RUN_DIR/calls.jsonl, see verifirst.lm.call_journal)
every admission and settlement is also written as it happens, and the tallies start from what
earlier invocations of the run directory spent: the limits hold across a kill and a resume. A stop
request (a signal, verifirst.core.interrupts) refuses every admission after it with StopRequested.
The run loop keeps a meter (without limits when the budget sets none) for every run for this.

Prices are USD per 1M tokens: a user's table first, then LiteLLM's bundled price map (offline), and
the embedded model and the scripted test models ("local/...") cost nothing.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from verifirst.core.errors import InputError, VerifirstError
from verifirst.core.interrupts import StorageError, check_stop
from verifirst.lm.prices import PRICE_EXPECTED, Prices  # noqa: F401 - re-exported: spend.Prices keeps working

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before any litellm import

LIMITS = ("max_usd", "max_tokens", "max_lm_calls", "max_wall_s")
DEFAULT_MAX_TOKENS = 1000  # completion tokens reserved for a call that sets no max_tokens
CHARS_PER_TOKEN = 4
_EPS = 1e-12  # float sums of prices: a cap reached exactly is not crossed


def _fmt(limit: str, value: float, *, cap: bool = False) -> str:
    if limit == "max_usd":
        if cap:
            return f"{value:.2f}" if round(value, 2) == value else f"{value:g}"
        return f"{value:.4f}" if value >= 0.0001 or value == 0 else f"{value:.2g}"
    if limit == "max_wall_s":
        return f"{value:g}" if cap else f"{value:.1f}"
    return str(int(value))


class BudgetExceeded(VerifirstError):
    """A request was not sent: it would have crossed a spend limit of the run or of a role.

    Attributes:
        limit: "max_usd", "max_tokens", "max_lm_calls" or "max_wall_s".
        role: None for the whole run's limit, else the role whose limit it is.
        spent: what counted against the limit when the request was refused (settled usage plus
            the reservations of requests in flight; for max_wall_s, the seconds elapsed).
        cap: the limit.
        need: the refused request's worst case (0 for max_wall_s).
    """

    exit_code = 1
    held = False  # refused only because part of the run's limit was held back for the test split

    def __init__(self, limit: str, role: str | None, spent: float, cap: float, need: float = 0.0,
                 message: str | None = None):
        self.limit, self.role, self.spent, self.cap, self.need = limit, role, float(spent), float(cap), float(need)
        if message is None:
            scope = "for the run" if role is None else f"for role {role}"
            if limit == "max_wall_s":
                detail = f"{_fmt(limit, spent)} s elapsed; the call was not sent"
            else:
                detail = (f"{_fmt(limit, spent)} spent; the call needing up to {_fmt(limit, need)}"
                          " was not sent")
            message = f"stopped by budget: {limit} {_fmt(limit, cap, cap=True)} {scope} reached ({detail})"
        self.message = message
        super().__init__(message)

    def __reduce__(self):  # picklable (executors ship exceptions between processes)
        return (type(self), (self.limit, self.role, self.spent, self.cap, self.need, self.message))


@dataclass(frozen=True)
class Limits:
    """Spend limits of one scope (the run, or one role); None: no limit. Values are validated
    where the user gives them (verifirst.core.engine.Budget). max_wall_s counts from the meter's
    start, for a role too (the role may call until then)."""

    max_usd: float | None = None
    max_tokens: int | None = None
    max_lm_calls: int | None = None
    max_wall_s: float | None = None

    @property
    def any(self) -> bool:
        return any(getattr(self, k) is not None for k in LIMITS)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in LIMITS if getattr(self, k) is not None}


# -- the meter -----------------------------------------------------------------------------------

@dataclass
class _Tally:
    usd: float = 0.0
    tokens: int = 0
    calls: int = 0
    r_usd: float = 0.0  # reservations of requests in flight
    r_tokens: int = 0
    r_calls: int = 0

    def committed(self, limit: str) -> float:
        if limit == "max_usd":
            return self.usd + self.r_usd
        if limit == "max_tokens":
            return self.tokens + self.r_tokens
        return self.calls + self.r_calls

    def as_dict(self) -> dict:
        return {"usd": round(self.usd, 8), "tokens": self.tokens, "lm_calls": self.calls}


@dataclass
class Ticket:
    """One admitted request: what it reserved, until settled."""

    role: str
    model: str
    usd: float
    tokens: int
    prompt_tokens: int  # the estimate reserved (characters / 4)
    completion_tokens: int  # max_tokens reserved
    price: tuple[float, float]  # USD per input, output token (settled at it)
    failed_attempts: int = 0  # requests an engine retried by itself (LiteLLM's Router) that failed
    deadline: float | None = None  # time.monotonic() when a max_wall_s it falls under runs out
    jid: int | None = None  # its number in the run's call journal
    settled: bool = field(default=False, repr=False)


class SpendMeter:
    """Admission of LM requests against spend limits of the run and of each role. Thread-safe.

    Args:
        total: the whole run's limits (all roles together).
        per_role: {role: Limits} for single roles.
        prices: model prices (default: LiteLLM's map; local models free).
    """

    def __init__(self, total: Limits, per_role: dict[str, Limits] | None = None, prices: Prices | None = None):
        self.total = total
        self.per_role = dict(per_role or {})
        self.prices = prices or Prices()
        self._lock = threading.Lock()
        self._run = _Tally()
        self._roles: dict[str, _Tally] = {}
        self._in_flight = 0
        self._stopped: dict[str | None, BudgetExceeded] = {}  # None: the run; else a role
        self._stopped_by: str | None = None
        self._first_refusal: BudgetExceeded | None = None
        self._unpriced: set[str] = set()
        self._held = Limits()  # the run's amounts held back (for the test split); see hold_back
        self.refusals = 0  # requests refused so far
        self._needs_price = total.max_usd is not None or any(
            lim.max_usd is not None for lim in self.per_role.values())
        self.journal: Any = None
        self.start()

    @property
    def limited(self) -> bool:
        """Whether any limit is set (a meter without one only accounts and journals)."""
        return self.total.any or any(lim.any for lim in self.per_role.values())

    def attach_journal(self, journal: Any) -> None:
        """Write every admission and settlement to `journal` from now on, and count what its earlier
        invocations spent against the limits (requests in flight when one died, at their worst case).

        Args:
            journal: a verifirst.lm.call_journal.CallJournal.
        """
        prior = journal.prior
        with self._lock:
            self.journal = journal
            for name, t in [(None, prior.run)] + list(prior.roles.items()):
                tally = self._run if name is None else self._roles.setdefault(name, _Tally())
                tally.calls += t.requests + t.in_flight_at_kill
                tally.tokens += t.prompt_tokens + t.completion_tokens + t.reserved_tokens
                tally.usd += t.usd + t.reserved_usd

    def start(self) -> None:
        """(Re)start the wall clock that max_wall_s counts from."""
        self._t0 = time.monotonic()

    @property
    def stopped_by(self) -> str | None:
        """The message of the first limit that refused a request, else None."""
        return self._stopped_by

    @property
    def first_refusal(self) -> "BudgetExceeded | None":
        """The first call refused (an engine may have swallowed it; the loop raises it again)."""
        return self._first_refusal

    def hold_back(self, held: Limits) -> None:
        """Hold back part of the run's limits: until `release`, requests are admitted against the
        run's caps less these amounts (a refusal then names what is held and why).

        Args:
            held: the amounts (max_usd, max_tokens, max_lm_calls, max_wall_s) to keep for later.
        """
        with self._lock:
            self._held = held

    def release(self) -> None:
        """Give the held amounts back; a run-wide stop that only the holding caused is lifted."""
        with self._lock:
            stop = self._stopped.get(None)
            if stop is not None and getattr(stop, "held", False):
                del self._stopped[None]
            self._held = Limits()

    def admit(self, role: str, model: str | tuple[str, ...], prompt_chars: int, max_tokens: int | None) -> Ticket:
        """Reserve one request's worst case, or raise BudgetExceeded and reserve nothing.

        Args:
            role: the LM role the request is counted under.
            model: the model string it is priced as; several (a role served by endpoints of
                different models): the dearest input and output prices are reserved.
            prompt_chars: characters of the messages (or prompt) sent; tokens are estimated as / 4.
            max_tokens: the completion cap (None: DEFAULT_MAX_TOKENS is reserved).

        Raises:
            BudgetExceeded: the request would cross a limit (or a limit stopped the run or the role
                before).
            InputError: a max_usd limit is set and the model has no known price.
        """
        check_stop()  # a signal asked the run to stop: nothing new goes out
        p_tok = -(-max(int(prompt_chars), 0) // CHARS_PER_TOKEN)
        c_tok = DEFAULT_MAX_TOKENS if max_tokens is None else max(int(max_tokens), 0)
        if isinstance(model, str):
            price = self.prices.per_token(model)
            if price is None:
                price = self._unknown(role, model)
        else:
            prices = [self.prices.per_token(m) or self._unknown(role, m) for m in model]
            price = (max(p[0] for p in prices), max(p[1] for p in prices))
            model = model[0] if len(model) == 1 else " | ".join(model)
        usd = p_tok * price[0] + c_tok * price[1]
        tokens = p_tok + c_tok
        role_limits = self.per_role.get(role)
        with self._lock:
            stop = self._stopped.get(None) or self._stopped.get(role)
            if stop is not None:
                self.refusals += 1
                raise BudgetExceeded(stop.limit, stop.role, stop.spent, stop.cap, stop.need, stop.message)
            elapsed = time.monotonic() - self._t0
            role_tally = self._roles.get(role)
            if role_tally is None:
                role_tally = self._roles[role] = _Tally()
            for scope, limits, tally in ((None, self.total, self._run), (role, role_limits, role_tally)):
                if limits is None:
                    continue
                exc = self._check(scope, limits, tally, usd, tokens, elapsed)
                if exc is None and scope is None and self._held.any:
                    exc = self._check(scope, _less(limits, self._held), tally, usd, tokens, elapsed)
                    if exc is not None:  # within the run's cap, but not within what the test split needs
                        exc = BudgetExceeded(exc.limit, None, exc.spent, getattr(limits, exc.limit), exc.need,
                                             message=_held_message(exc, limits, self._held))
                        exc.held = True
                if exc is not None:
                    self.refusals += 1
                    self._stopped[scope] = exc
                    if self._stopped_by is None:
                        self._stopped_by, self._first_refusal = exc.message, exc
                    raise exc
            for tally in (self._run, role_tally):
                tally.r_usd += usd
                tally.r_tokens += tokens
                tally.r_calls += 1
            self._in_flight += 1
            deadline = self._wall_deadline(role_limits)
        ticket = Ticket(role, model, usd, tokens, p_tok, c_tok, price, deadline=deadline)
        if self.journal is not None:
            try:  # written before the request goes out: a kill after this still counts it
                ticket.jid = self.journal.admitted(role, model, tokens, usd)
            except OSError as e:
                self.settle(ticket, None, None, cache_hit=True)  # not sent: the reservation goes
                raise StorageError(f"the run's call journal {self.journal.path} cannot be written "
                                   f"({e.strerror or e}); the request was not sent") from None
        return ticket

    def wall_deadline(self) -> float | None:
        """When the run's max_wall_s (less what is held back for the test split) runs out, as a
        time.monotonic() value; None without one. Work other than LM calls (a metric, a verifier)
        is stopped there too (verifirst.loop.executor.within_wall)."""
        with self._lock:
            return self._wall_deadline(None)

    def refuse_wall(self, what: str) -> BudgetExceeded:
        """Record that the run's wall cap ran out while `what` was running (not an LM call): the run
        stops as for a refused request, and every later admission is refused. Returns the refusal.

        Args:
            what: what was stopped, e.g. "the metric on item t3".
        """
        with self._lock:
            cap = self.total.max_wall_s
            held = self._held.max_wall_s or 0.0
            elapsed = time.monotonic() - self._t0
            shown = cap if cap is not None else elapsed
            note = f"; {_fmt('max_wall_s', held)} s held back to score the test split" if held else ""
            exc = BudgetExceeded("max_wall_s", None, elapsed, shown, message=(
                f"stopped by budget: max_wall_s {_fmt('max_wall_s', shown, cap=True)} for the run reached while "
                f"{what} ran ({_fmt('max_wall_s', elapsed)} s elapsed{note}); it was stopped and its item has no "
                f"verdict"))
            exc.held = bool(held)
            self.refusals += 1
            self._stopped.setdefault(None, exc)
            if self._stopped_by is None:
                self._stopped_by, self._first_refusal = exc.message, exc
            return exc

    def _wall_deadline(self, role_limits: Limits | None) -> float | None:
        """When the first max_wall_s a request of this role falls under runs out (time.monotonic()):
        the run's (less what is held back for later) or the role's; None without one."""
        caps = []
        if self.total.max_wall_s is not None:
            caps.append(self.total.max_wall_s - (self._held.max_wall_s or 0.0))
        if role_limits is not None and role_limits.max_wall_s is not None:
            caps.append(role_limits.max_wall_s)
        return self._t0 + min(caps) if caps else None

    def _unknown(self, role: str, model: str) -> tuple[float, float]:
        if self._needs_price:
            raise InputError(f"no price known for model {model!r} (role {role}): max_usd needs one",
                             field="prices", expected=PRICE_EXPECTED)
        self._unpriced.add(model)
        return (0.0, 0.0)

    @staticmethod
    def _check(scope: str | None, limits: Limits, tally: _Tally, usd: float, tokens: int,
               elapsed: float) -> BudgetExceeded | None:
        if limits.max_wall_s is not None and elapsed >= limits.max_wall_s:
            return BudgetExceeded("max_wall_s", scope, elapsed, limits.max_wall_s)
        for limit, need in (("max_usd", usd), ("max_tokens", tokens), ("max_lm_calls", 1)):
            cap = getattr(limits, limit)
            if cap is not None:
                have = tally.committed(limit)
                if have + need > cap + _EPS:
                    return BudgetExceeded(limit, scope, have, cap, need)
        return None

    def settle(self, ticket: Ticket, prompt_tokens: int | None, completion_tokens: int | None,
               cache_hit: bool) -> None:
        """Replace a ticket's reservation with the real usage (a second settle does nothing).

        Args:
            ticket: what admit returned.
            prompt_tokens, completion_tokens: the usage the model reported; both None for a failed
                request (it counts as a call, with no tokens and no cost).
            cache_hit: served from the response cache: free, and no call.
        """
        calls, tokens, usd = ticket.failed_attempts, 0, 0.0
        if cache_hit:
            pass
        elif prompt_tokens is not None or completion_tokens is not None:
            calls += 1
            p, c = int(prompt_tokens or 0), int(completion_tokens or 0)
            tokens = p + c
            usd = p * ticket.price[0] + c * ticket.price[1]
        elif not ticket.failed_attempts:  # else the failure is the last of the attempts noted
            calls = 1
        with self._lock:
            if ticket.settled:
                return
            ticket.settled = True
            self._in_flight -= 1
            role_tally = self._roles[ticket.role]
            for tally in (self._run, role_tally):
                tally.r_usd -= ticket.usd
                tally.r_tokens -= ticket.tokens
                tally.r_calls -= 1
                if tally.r_calls == 0:  # no drift from float sums once nothing is in flight
                    tally.r_usd = 0.0
                tally.usd += usd
                tally.tokens += tokens
                tally.calls += calls
        if self.journal is not None and ticket.jid is not None:
            p = c = 0
            if not cache_hit and (prompt_tokens is not None or completion_tokens is not None):
                p, c = int(prompt_tokens or 0), int(completion_tokens or 0)
            self.journal.settled(ticket.jid, ticket.role, calls=calls, prompt_tokens=p, completion_tokens=c, usd=usd,
                                 cache_hit=cache_hit, failed=not cache_hit and prompt_tokens is None
                                 and completion_tokens is None)

    def spent(self) -> dict:
        """{"run": {usd, tokens, lm_calls}, "roles": {role: {...}}, "limits": {"run": {...},
        "roles": {...}}, "stopped_by", "wall_s", "in_flight", "unpriced"}; JSON-able."""
        with self._lock:
            return {
                "run": self._run.as_dict(),
                "roles": {r: t.as_dict() for r, t in sorted(self._roles.items())},
                "limits": {"run": self.total.as_dict(),
                           "roles": {r: lim.as_dict() for r, lim in sorted(self.per_role.items())}},
                "stopped_by": self._stopped_by,
                "wall_s": round(time.monotonic() - self._t0, 3),
                "in_flight": self._in_flight,
                "unpriced": sorted(self._unpriced),  # models counted at 0 USD (no max_usd was set)
                **({"earlier_invocations": self.journal.prior.as_dict()} if self.journal is not None else {}),
            }


def _less(limits: Limits, held: Limits) -> Limits:
    """`limits` less the `held` amounts (limits without a cap stay without one)."""
    out = {}
    for k in LIMITS:
        cap, h = getattr(limits, k), getattr(held, k)
        out[k] = None if cap is None else (cap if h is None else max(cap - h, 0))
    return Limits(**out)


def _held_message(exc: BudgetExceeded, limits: Limits, held: Limits) -> str:
    cap, h = getattr(limits, exc.limit), getattr(held, exc.limit)
    if exc.limit == "max_wall_s":
        detail = f"{_fmt(exc.limit, exc.spent)} s elapsed"
    else:
        detail = f"{_fmt(exc.limit, exc.spent)} spent, the next call needing up to {_fmt(exc.limit, exc.need)}"
    return (f"stopped by budget: {exc.limit} {_fmt(exc.limit, cap, cap=True)} for the run reached for the optimizer "
            f"({detail}; {_fmt(exc.limit, h)} held back to score the test split)")


def refused() -> "BudgetExceeded | None":
    """The first request the active meter refused, if any (None without a meter): engines that
    stop at their last completed iteration ask it before keeping an iteration."""
    meter = _ACTIVE
    return meter.first_refusal if meter is not None else None


# -- activation (process-wide: evaluation threads and DSPy's threads must all see it) -------------

_ACTIVE: SpendMeter | None = None
_ACTIVE_LOCK = threading.Lock()
_tls = threading.local()  # the ticket of the request this thread is sending


def active_meter() -> SpendMeter | None:
    return _ACTIVE


@contextlib.contextmanager
def metering(meter: SpendMeter | None) -> Iterator[SpendMeter | None]:
    """Admit every LM request of the process (any thread) against `meter` inside."""
    global _ACTIVE
    with _ACTIVE_LOCK:
        previous, _ACTIVE = _ACTIVE, meter
    try:
        yield meter
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE = previous


def current_ticket() -> Ticket | None:
    """The ticket of the request this thread is sending (engines that retry by themselves, such
    as LiteLLM's Router, note their failed attempts and the endpoint that answered on it)."""
    return getattr(_tls, "ticket", None)


def set_current_ticket(ticket: Ticket | None) -> None:
    _tls.ticket = ticket


def note_answering_model(model: str) -> None:
    """An engine that chose among endpoints says which model answered this thread's request: it
    is settled at that model's price (the reservation took the dearest)."""
    ticket, meter = current_ticket(), _ACTIVE
    if ticket is not None and meter is not None:
        price = meter.prices.per_token(model)
        if price is not None:
            ticket.model, ticket.price = model, price


def note_failed_attempt() -> None:
    """An engine that retries by itself (LiteLLM's Router) sent a request of this thread's call
    that failed: it counts as a call (no tokens, no cost). It was sent before it could be admitted."""
    ticket = current_ticket()
    if ticket is not None:
        ticket.failed_attempts += 1


def prompt_chars(args: tuple, kwargs: dict) -> int:
    """Characters of what an LM call sends: the prompt string or the messages' text."""
    prompt = args[0] if args else kwargs.get("prompt")
    messages = kwargs.get("messages")
    if messages is None and len(args) > 1:
        messages = args[1]
    n = 0
    if isinstance(prompt, str):
        n += len(prompt)
    elif prompt is not None and messages is None:  # an explicit lm15 Request
        system = getattr(prompt, "system", None)
        n += _text_len(system)
        messages = getattr(prompt, "messages", None)
    for m in messages or ():
        n += _text_len(m.get("content") if isinstance(m, dict) else getattr(m, "parts", None) or
                       getattr(m, "text", None))
    return n


def _text_len(content: Any) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return len(content)
    if isinstance(content, (list, tuple)):
        return sum(_text_len(part) for part in content)
    if isinstance(content, dict):
        return _text_len(content.get("text"))
    text = getattr(content, "text", None)
    return len(text) if isinstance(text, str) else 0
