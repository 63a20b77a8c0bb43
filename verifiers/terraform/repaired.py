"""A repair's final configuration, and the one check that decides whether a passing repair is a fix.

RepairLoop returns its final configuration as a RepairedConfig: the text (it compares, hashes and
serialises as the plain string) carrying the first draft it was repaired from. The verifier that
scores the run sees the draft and runs `judge_repair` itself, so a deceptive final configuration is
DECEPTIVE_FIX in the run's own scoring, whatever the program reports.
"""
from __future__ import annotations

import re
from typing import Any

from verifirst.verifiers.base import Verdict, VerifierError
from verifirst.verifiers.terraform import deceptive as D
from verifirst.verifiers.terraform.iac_taxonomy import DECEPTIVE, DECEPTIVE_FIX


class RepairedConfig(str):
    """A configuration text with `draft`: the first draft's configuration when a repair loop
    repaired at least once, else None. Equal to, hashed and serialised as the plain string."""

    draft: str | None

    def __new__(cls, text: str, draft: str | None = None):
        obj = super().__new__(cls, text)
        obj.draft = None if draft is None else str(draft)
        return obj

    def __reduce__(self):  # pickled for Ray workers with its draft
        return (RepairedConfig, (str(self), self.draft))


def judge_repair(verifier: Any, item: Any, config: str, verdict: Verdict, draft: str, draft_verdict: Verdict,
                 references: dict) -> Verdict:
    """The passing verdict, or a DECEPTIVE_FIX one when the repair dropped, emptied or renamed what
    the task needs (compared with the first draft and the item's reference: deceptive.compare).

    Args:
        verifier: the verifier that judged them; it verifies the item's reference (once per
            item and reference, kept in `references`) and its organisation policy set is read.
        item: the task item (gold: the policy texts and the optional `reference`).
        config: the repaired configuration.
        verdict: its passing verdict.
        draft: the first draft's configuration.
        draft_verdict: the draft's verdict (what it rejected, a repair may drop).
        references: the caller's cache: (item id, reference text) -> summary.
    """
    reference = reference_summary(verifier, item, references)
    findings = D.compare(_summary(config, verdict), _summary(draft, draft_verdict), reference,
                         policy_texts(item, verifier), *_rejected(draft_verdict))
    if not findings:
        return verdict
    errors = [VerifierError(DECEPTIVE, f.message(), f.address) for f in findings]
    details = dict(verdict.details or {}, deceptive=[vars(f) for f in findings])
    return Verdict(0.0, False, DECEPTIVE_FIX, errors, D.feedback(findings), verdict.backend, details,
                   dict(verdict.timings or {}))


def reference_summary(verifier: Any, item: Any, references: dict):
    """The item's reference, verified once for its plan (its config when it has no plan); None
    when the item has no reference.

    Args:
        verifier: verifies the reference.
        item: the task item.
        references: the cache, (item id, reference text) -> summary.
    """
    ref = (item.gold or {}).get("reference")
    if not ref:
        return None
    key = (item.id, ref)
    if key not in references:  # a race computes it twice, the same value
        try:
            v = verifier.verify(item, str(ref))
        except Exception:  # no plan to read: its configuration still says what it declares
            v = None
        references[key] = _summary(ref, v)
    return references[key]


def _summary(config: str, verdict):
    plan = (getattr(verdict, "details", None) or {}).get("plan")
    return D.summarize_plan(plan) if plan else D.summarize_config({"main.tf": config or ""})


def policy_texts(item: Any, verifier: Any = None) -> str:
    """The Rego the item is judged by: its own policies and the verifier's organisation set
    (whose deny rules a deleted resource satisfies as well).

    Args:
        item: the task item.
        verifier: the verifier, for its `policy_set` (None: the item's policies only).
    """
    gold = item.gold or {}
    texts = [p.get("text", "") for p in gold.get("rego_policies") or []] or [gold.get("rego_policy") or ""]
    org = getattr(verifier, "policy_set", None)
    texts += [getattr(p, "text", "") for p in getattr(org, "policies", None) or []]
    return "\n".join(texts)


_REJECTED_NAME = re.compile(r'(?:named|of type|value for) "([^"]+)"')


def _rejected(verdict) -> tuple[set, set]:
    """Types and (type, argument) pairs the verifier rejected in the first draft: a repair may drop them."""
    types, attrs = set(), set()
    for e in getattr(verdict, "errors", None) or []:
        addr = (getattr(e, "address", None) or "").split(".")
        rtype = addr[1] if addr[0] == "data" and len(addr) > 1 else addr[0]
        if e.cls == "INVALID_RESOURCE_TYPE" and rtype:
            types.add(rtype)
        m = _REJECTED_NAME.search(e.message or "")
        if e.cls == "SELF_DEFINED_PROPERTY" and rtype and m:
            attrs.add((rtype, m.group(1)))
    return types, attrs
