"""Promotion on evidence (verifirst.judge.promotion through calibrate.promote): the champion alias moves
only when the rule's validation evidence holds, a first champion needs a π interval above zero on
both label classes, the report says the smallest detectable Δπ and why, and an error reading the
alias never moves it."""
from __future__ import annotations

import types

import pytest
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INTERNAL_ERROR, RESOURCE_DOES_NOT_EXIST

from verifirst.judge.promotion import promote
from verifirst.core.errors import InputError
from verifirst.judge.promotion import detectable_delta, parse_rule

DIGEST = "d1"


class FakeRegistry:
    """The two MlflowClient calls promote makes; `error` is raised by the alias read."""

    def __init__(self, current=None, error: Exception | None = None):
        self.current, self.error, self.moves = current, error, []

    def get_prompt_version_by_alias(self, name, alias):
        if self.error is not None:
            raise self.error
        if self.current is None:
            raise MlflowException(f"Prompt alias {alias} not found.", error_code=RESOURCE_DOES_NOT_EXIST)
        return self.current

    def set_prompt_alias(self, name, alias, version):
        self.moves.append((alias, version))


def report(labels: list[str], verdicts: list[str]) -> dict:
    ids = [f"v{i}" for i in range(len(labels))]
    return {"split_digest": DIGEST, "judge": {"validation": {
        "labels": dict(zip(ids, labels)), "verdicts": {"calibrated": dict(zip(ids, verdicts))}, "pi": None},
        "test": {}}}


def flip(labels: list[str], wrong: set[int]) -> list[str]:
    return [("FAIL" if y == "PASS" else "PASS") if i in wrong else y for i, y in enumerate(labels)]


LABELS8 = ["PASS", "FAIL"] * 4
CHAMPION = types.SimpleNamespace(version=1, template="old prompt", tags={"split_digest": DIGEST, "threshold": "None"})


def run(reg: FakeRegistry, rep: dict, champion_verdicts: list[str] | None = None, rule=None) -> dict:
    ids = list(rep["judge"]["validation"]["labels"])
    rescore = (lambda text, th: dict(zip(ids, champion_verdicts))) if champion_verdicts else None
    return promote(types.SimpleNamespace(client=reg), "judge", 2, rep, rescore, rule=rule)


def test_a_small_gain_on_8_items_stays_and_the_report_says_what_was_detectable():
    champ = flip(LABELS8, {0, 3})  # 6 of 8 right
    new = flip(LABELS8, {0})  # 7 of 8 right
    reg = FakeRegistry(CHAMPION)
    out = run(reg, report(LABELS8, new), champ)
    assert out["moved"] is False and reg.moves == [] and out["rule"] == "significant"
    assert out["val_pi"] > out["champion_val_pi"], "a gain, but not evidence"
    lo, hi = out["val_pi_delta_ci95"]
    assert lo <= 0 < hi
    assert out["detectable_delta"] == pytest.approx(detectable_delta(lo, hi))
    assert out["detectable_delta"] > out["val_pi"] - out["champion_val_pi"]
    assert "smallest Δπ these 8 validation items could detect is" in out["reason"]
    assert f"{out['detectable_delta']:.3f}" in out["reason"] and "does not meet" in out["reason"]
    # the old rule, asked for explicitly, moves on the same numbers
    reg = FakeRegistry(CHAMPION)
    out = run(reg, report(LABELS8, new), champ, rule="better")
    assert out["moved"] is True and reg.moves == [("champion", 2)] and out["rule"] == "better"


def test_a_large_gain_moves_the_alias():
    labels = ["PASS", "FAIL"] * 10
    champ = flip(labels, set(range(0, 20, 2)))  # wrong on every PASS
    reg = FakeRegistry(CHAMPION)
    out = run(reg, report(labels, labels), champ)
    assert out["moved"] is True and reg.moves == [("champion", 2)]
    assert out["val_pi_delta_ci95"][0] > 0 and "meets" in out["reason"]


def test_noninferior_moves_within_the_margin_only():
    labels = ["PASS", "FAIL"] * 10
    reg = FakeRegistry(CHAMPION)
    same = run(reg, report(labels, flip(labels, {1})), flip(labels, {1}), rule="noninferior:0.2")
    assert same["moved"] is True
    reg = FakeRegistry(CHAMPION)
    worse = run(reg, report(labels, flip(labels, set(range(8)))), labels, rule="noninferior:0.05")
    assert worse["moved"] is False and reg.moves == []


def test_a_first_prompt_needs_evidence_too():
    reg = FakeRegistry(None)
    bad = run(reg, report(LABELS8, flip(LABELS8, {0, 1, 2, 3, 4, 5})))  # π below zero
    assert bad["moved"] is False and reg.moves == [] and "does not lie above zero" in bad["reason"]
    one_class = ["PASS"] * 8
    out = run(reg, report(one_class, one_class))
    assert out["moved"] is False and reg.moves == [] and "one label class" in out["reason"]
    good = run(reg, report(["PASS", "FAIL"] * 8, ["PASS", "FAIL"] * 8))
    assert good["moved"] is True and reg.moves == [("champion", 2)] and "lies above zero" in good["reason"]


def test_a_server_error_reading_the_alias_moves_nothing_and_says_why():
    err = MlflowException("503 Service Unavailable from the tracking server", error_code=INTERNAL_ERROR)
    reg = FakeRegistry(error=err)
    out = run(reg, report(["PASS", "FAIL"] * 8, ["PASS", "FAIL"] * 8))
    assert out["moved"] is False and reg.moves == []
    assert "could not be read" in out["reason"] and "503" in out["reason"] and "INTERNAL_ERROR" in out["error"]
    reg = FakeRegistry(error=ConnectionError("connection reset"))
    out = run(reg, report(["PASS", "FAIL"] * 8, ["PASS", "FAIL"] * 8))
    assert out["moved"] is False and reg.moves == [] and "connection reset" in out["reason"]


def test_rules_parse_and_bad_ones_are_named():
    assert str(parse_rule(None)) == "significant" and str(parse_rule("noninferior:0.05")) == "noninferior:0.05"
    for bad in ("always", "noninferior", "noninferior:x", "better:0.1", "noninferior:2"):
        with pytest.raises(InputError, match="--promote-rule"):
            parse_rule(bad)


def test_no_such_alias_in_a_real_store_means_first_champion(tmp_path):
    import mlflow

    from verifirst.judge.promotion import read_alias

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
    assert read_alias(client, "never-registered", "champion") == (None, None)
    client.register_prompt("judge", "a prompt")
    assert read_alias(client, "judge", "champion") == (None, None)
    client.set_prompt_alias("judge", "champion", 1)
    version, error = read_alias(client, "judge", "champion")
    assert error is None and int(version.version) == 1
