"""FEH on the `sysadmin` fixture with the task's setup in `prerequisite` (as the EAbench loader and
the false-equivalence probe give it): administration golds are judged by their /etc effect after
the setup, equivalent to themselves and to a command with the same effect, not to each other.

tests/test_sysadmin_sandbox.py chains the setup into the command and uses the default rule
parameters; here the setup is the gold's prerequisite (diffed away) and both the default and the
NL2SH-fitted parameters (fs_veto off) are checked.
"""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from verifirst.core.task import Item
from verifirst.verifiers.bash._feh_params import fitted_nl2sh
from verifirst.verifiers.bash.feh import FehVerifier

# A user with a password hash (a placeholder, not a real one), so both `passwd -l` and `passwd -u` succeed.
WITH_ALICE = "useradd alice\nusermod -p '$6$vf$placeholder' alice\n"
WITH_SLACKERS = "groupadd slackers\n"

# (gold, prerequisite)
GOLDS = {
    "useradd": ("useradd alice", None),
    "gpasswd -r": ("gpasswd -r slackers", WITH_SLACKERS),
    "gpasswd -R": ("gpasswd -R slackers", WITH_SLACKERS),
    "passwd -l": ("passwd -l alice", WITH_ALICE),
}

# (gold, candidate, prerequisite): each pair differs in /etc
DIFFERENT = [
    ("gpasswd -r slackers", "gpasswd -R slackers", WITH_SLACKERS),
    ("useradd alice", "useradd bob", None),
    ("passwd -l alice", "passwd -u alice", WITH_ALICE),
    ("passwd -l alice", "usermod -aG slackers alice", WITH_ALICE + WITH_SLACKERS),
]


def text_embed(texts):
    """Deterministic stand-in for the model: similar only when equal."""
    v = np.zeros((len(texts), 64), dtype=np.float32)
    for i, t in enumerate(texts):
        v[i, int(hashlib.sha256(t.encode()).hexdigest(), 16) % 64] = 1.0
    return v


@pytest.fixture(scope="module", params=["default", "fitted"])
def feh(request) -> FehVerifier:
    params = fitted_nl2sh() if request.param == "fitted" else None
    return FehVerifier(params, embed=text_embed, timeout_s=20.0)


def verdict(feh: FehVerifier, gold: str, cand: str, prerequisite: str | None, fixture: str = "sysadmin"):
    g = {"command": gold, "fixture": fixture}
    if prerequisite:
        g["prerequisite"] = prerequisite
    return feh.verify(Item(id="admin", inputs={"task": "administer users"}, gold=g), cand)


def etc_paths(v) -> set[str]:
    return {e["path"] for e in v.details["gold"]["fs_diff"] if e["path"].startswith("/etc/")}


@pytest.mark.parametrize("name", list(GOLDS))
def test_each_gold_is_equivalent_to_itself_by_its_etc_effect(feh, name):
    gold, pre = GOLDS[name]
    v = verdict(feh, gold, gold, pre)
    assert v.passed is True, v.feedback
    # decided on what the run did to /etc, not on the shared command text
    assert v.details["rule"] in ("fs_effect", "identical"), v.details["rule"]
    assert etc_paths(v), v.details["gold"]["fs_diff"]


@pytest.mark.parametrize("gold,cand,pre", DIFFERENT)
def test_different_administration_is_not_equivalent(feh, gold, cand, pre):
    v = verdict(feh, gold, cand, pre)
    assert v.passed is False, v.feedback
    assert not v.inconclusive
    assert "/etc/" in v.feedback  # the feedback names the file that differs


def test_other_commands_with_the_same_effect_are_equivalent(feh):
    v = verdict(feh, "passwd -l alice", "usermod -L alice", WITH_ALICE)
    assert v.passed is True, v.feedback
    assert v.details["rule"] == "fs_effect"


def test_the_setup_is_not_part_of_the_effect(feh):
    v = verdict(feh, "passwd -l alice", "passwd -l alice", WITH_ALICE)
    changed = etc_paths(v)
    assert "/etc/shadow" in changed
    # useradd in the setup wrote passwd and group; the command itself did not
    assert not changed & {"/etc/passwd", "/etc/group"}, changed


@pytest.mark.parametrize("gold,cand,pre", DIFFERENT[:3])
def test_outside_the_sysadmin_fixture_the_same_pairs_are_inconclusive(feh, gold, cand, pre):
    v = verdict(feh, gold, cand, pre, fixture="empty")
    assert v.passed is None and v.inconclusive, v.feedback
