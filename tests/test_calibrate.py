"""Journey 1 around the loop: outcomes file -> splits -> calibration -> MLflow run, prompt
registry and the champion alias; then `verifirst judge` applies the registered prompt."""
import json

import mlflow
import pytest

from test_autorefine import RuleFollowingLM, make_world
from verifirst.judge.apply import apply_judge
from verifirst.judge.calibrate import calibrate_outcomes
from verifirst.judge.printing import print_calibration
from verifirst.judge import steps


def write_outcomes(path, n_groups=10):
    suite = make_world(n_groups=n_groups, seed=3)
    with open(path, "w") as f:
        for it in suite.items:
            f.write(json.dumps({"id": it.id, "label": it.gold["label"], **it.inputs, "group": it.group,
                                "stage": it.meta["stage"]}) + "\n")
    return suite


def test_calibrate_registers_prompt_and_champion_moves_only_on_improvement(tmp_path):
    src = tmp_path / "outcomes.jsonl"
    write_outcomes(src)
    lm = RuleFollowingLM()
    models = {"judge": lm, "teacher": lm, "reflection": lm}
    rep = calibrate_outcomes(src, workdir=tmp_path / "wd", models=models, max_iters=2, echo=lambda m: None)
    test = rep["judge"]["test"]
    assert test["judges"]["calibrated"]["pi"] > test["judges"]["uncalibrated"]["pi"]
    assert rep["prompt_uri"].startswith("prompts:/verifirst-passfail-judge/")
    assert rep["champion"]["moved"] is True
    client = mlflow.MlflowClient(tracking_uri=rep["tracking_uri"], registry_uri=rep["tracking_uri"])
    run = client.get_run(rep["run_id"])
    assert run.info.status == "FINISHED" and "test_calibrated_pi" in run.data.metrics
    champ = client.get_prompt_version_by_alias("verifirst-passfail-judge", "champion")
    assert champ.tags["split_digest"] == rep["split_digest"]

    # the same data again: the same prompt is already the champion
    rep2 = calibrate_outcomes(src, workdir=tmp_path / "wd", models=models, max_iters=2, echo=lambda m: None)
    assert rep2["champion"]["moved"] is False and "already the champion" in rep2["champion"]["reason"]
    assert rep2["prompt_uri"] == rep["prompt_uri"], "the same prompt and split reuse the registered version"
    assert client.get_prompt_version_by_alias("verifirst-passfail-judge", "champion").version == champ.version

    # a different split seed is not comparable: no move either
    rep3 = calibrate_outcomes(src, workdir=tmp_path / "wd", models=models, max_iters=2, seed=9,
                              echo=lambda m: None)
    assert rep3["champion"]["moved"] is False and "another split" in rep3["champion"]["reason"]
    assert rep3["champion"]["decided_on"] == "validation"


def test_calibrate_with_mlflow_anchor_compares_on_the_same_test_items(tmp_path):
    from test_mlflow_align import RuleFollowingEngine

    src = tmp_path / "outcomes.jsonl"
    write_outcomes(src)
    lm = RuleFollowingLM()
    rep = calibrate_outcomes(src, workdir=tmp_path / "wd", models={"judge": lm, "teacher": lm, "reflection": lm},
                             max_iters=1, anchor=True, anchor_engine=RuleFollowingEngine(), echo=lambda m: None)
    cmp = rep["anchor"]["comparison"]
    assert cmp["n_scored"] > 0 and cmp["n_scored"] <= len(rep["judge"]["test_verdicts"]["calibrated"])
    assert set(cmp["comparisons"]) == {"calibrated_vs_mlflow_simba", "calibrated_vs_mlflow_unaligned",
                                       "calibrated_vs_uncalibrated"}
    assert cmp["judges"]["uncalibrated"]["n"] == cmp["n_scored"], "the uncalibrated judge is a row of the table"


def _champion_version(rep):
    client = mlflow.MlflowClient(tracking_uri=rep["tracking_uri"], registry_uri=rep["tracking_uri"])
    return int(client.get_prompt_version_by_alias("verifirst-passfail-judge", "champion").version)


def test_champion_is_decided_on_validation_never_on_test(tmp_path, monkeypatch, capsys):
    src = tmp_path / "outcomes.jsonl"
    write_outcomes(src)
    lm = RuleFollowingLM()
    models = {"judge": lm, "teacher": lm, "reflection": lm}
    first = calibrate_outcomes(src, workdir=tmp_path / "wd", models=models, max_iters=2, echo=lambda m: None)
    assert first["champion"]["moved"] is True and first["judge"]["loop"]["selected_iteration"] > 0

    # the starting prompt again, with a lucky test split: only test π improves
    real = steps.judge_report

    def lucky_on_test(*a, **kw):
        section = real(*a, **kw)
        section["test"]["judges"]["calibrated"]["pi"] = 1.0
        return section

    monkeypatch.setattr(steps, "judge_report", lucky_on_test)
    second = calibrate_outcomes(src, workdir=tmp_path / "wd", models=models, max_iters=0, echo=lambda m: None)
    assert second["prompt_uri"] != first["prompt_uri"]
    assert second["judge"]["test"]["judges"]["calibrated"]["pi"] > first["judge"]["test"]["judges"]["calibrated"]["pi"]
    ch = second["champion"]
    assert ch["moved"] is False, f"a better test π alone moved the champion: {ch}"
    assert ch["decided_on"] == "validation"
    assert ch["val_pi"] <= ch["champion_val_pi"] == first["judge"]["validation"]["pi"]
    assert ch["paired_n"] == len(first["judge"]["validation"]["labels"]) and "does not beat" in ch["reason"]
    assert _champion_version(second) == int(first["prompt_uri"].rsplit("/", 1)[1])

    # the test split was scored for the first run's calibrated prompt already: adaptive reuse is reported
    assert second["test_reuse"]["other_programs"] == 1 and second["test_reuse"]["evaluations"] == 4
    print_calibration(second)
    out = capsys.readouterr().out
    assert "decided on validation" in out and "adaptive reuse" in out


def test_champion_moves_when_validation_improves(tmp_path):
    src = tmp_path / "outcomes.jsonl"
    write_outcomes(src)
    lm = RuleFollowingLM()
    models = {"judge": lm, "teacher": lm, "reflection": lm}
    start = calibrate_outcomes(src, workdir=tmp_path / "wd", models=models, max_iters=0, echo=lambda m: None)
    # the uncalibrated start (validation π below zero) is no first champion; a person sets it by hand
    assert start["champion"]["moved"] is False and "does not lie above zero" in start["champion"]["reason"]
    client = mlflow.MlflowClient(tracking_uri=start["tracking_uri"], registry_uri=start["tracking_uri"])
    client.set_prompt_alias("verifirst-passfail-judge", "champion", int(start["prompt_uri"].rsplit("/", 1)[1]))
    better = calibrate_outcomes(src, workdir=tmp_path / "wd", models=models, max_iters=2, echo=lambda m: None)
    ch = better["champion"]
    assert ch["moved"] is True and ch["decided_on"] == "validation" and ch["reason"].startswith("beats")
    assert ch["val_pi"] > ch["champion_val_pi"] == start["judge"]["validation"]["pi"]
    lo, hi = ch["val_pi_delta_ci95"]
    assert lo <= ch["val_pi"] - ch["champion_val_pi"] <= hi
    assert _champion_version(better) == int(better["prompt_uri"].rsplit("/", 1)[1])


def test_calibrate_checks_its_verifiers_before_any_lm_call(tmp_path, monkeypatch):
    from verifirst.loop.preflight import VerifierUnavailable
    from verifirst.judge.label_verifier import LabelVerifier

    def broken(self):
        raise RuntimeError("outcome labels cannot be read")

    monkeypatch.setattr(LabelVerifier, "preflight", broken, raising=False)
    src = tmp_path / "outcomes.jsonl"
    write_outcomes(src)
    lm = RuleFollowingLM()
    with pytest.raises(VerifierUnavailable, match="label"):
        calibrate_outcomes(src, workdir=tmp_path / "wd", models={"judge": lm, "teacher": lm, "reflection": lm},
                           max_iters=1, echo=lambda m: None)
    assert lm.calls == [] and not (tmp_path / "wd").exists()


def test_vf_calibrate_returns_the_api_result_and_takes_a_prompt_file(tmp_path):
    import verifirst as vf
    from verifirst.core.errors import InputError
    from verifirst.judge.programs import DEFAULT_PASSFAIL_PROMPT

    src = tmp_path / "outcomes.jsonl"
    write_outcomes(src)
    prompt = tmp_path / "judge.txt"
    prompt.write_text(DEFAULT_PASSFAIL_PROMPT + " Be strict.\n")
    lm = RuleFollowingLM()
    res = vf.calibrate(src, str(prompt), models={"judge": lm}, max_iters=2, workdir=tmp_path / "wd")
    judged = res.report["judge"]
    assert judged["initial_prompt"] == prompt.read_text().strip() and judged["kind"] == "passfail"
    assert res.program.prompt == judged["calibrated_prompt"] != judged["initial_prompt"]
    assert set(res.before) == set(res.after) == {"train", "val", "test"}
    assert res.report["splits"]["test"]["after"]["n"] == len(res.manifest.test)
    assert {"teacher", "proposer", "applier"} <= {role for role, _ in lm.calls}  # every role fell back to the judge
    assert "prompt_uri" not in res.report and res.run_dir.parent == tmp_path / "wd" / "runs"  # tracking=None
    saved = {p.name for p in res.save(tmp_path / "out")}
    assert {"program.json", "report.json", "report.md", "split_manifest.json"} <= saved
    with pytest.raises(InputError, match="unknown role"):
        vf.calibrate(src, models={"judges": lm}, workdir=tmp_path / "wd2")


def test_anchor_takes_a_list_of_aligners_and_tables_them_with_the_uncalibrated_judge(tmp_path, monkeypatch, capsys):
    import types

    import verifirst.judge.anchor as cal
    from test_autorefine import make_world
    from verifirst.core.errors import InputError
    from verifirst.loop.splits import make_splits

    assert cal.parse_anchor("all") == ["simba", "gepa", "memalign"] and cal.parse_anchor(True) == ["simba"]
    assert cal.parse_anchor("gepa, simba") == ["gepa", "simba"] and cal.parse_anchor(False) == []
    with pytest.raises(InputError, match="unknown aligner"):
        cal.parse_anchor("simba,dspy")
    suite = make_world(n_groups=8, seed=1)
    manifest = make_splits(suite.items, group="group", seed=1)
    test = manifest.select(suite.items, "test")
    truth = {it.id: it.gold["label"] for it in test}
    flip = {k: ("PASS" if v == "FAIL" else "FAIL") for k, v in truth.items()}
    seen = {}

    def fake_align(train, test_items, view_fields, aligners=("simba",), **kw):
        seen.update(aligners=list(aligners), n_train=len(train))
        return types.SimpleNamespace(verdicts={f"mlflow_{a}": dict(truth) for a in aligners}, errors={},
                                     instructions={}, metadata={})

    monkeypatch.setattr(cal, "align_anchor", fake_align)
    rep = {"judge": {"view_fields": ["code", "task"],
                     "test_verdicts": {"calibrated": dict(truth), "uncalibrated": flip}}}
    out = cal.run_anchor(suite, manifest, rep, "local", tmp_path, aligners=["simba", "gepa"])
    assert seen == {"aligners": ["simba", "gepa"], "n_train": len(manifest.train)}
    cmp = out["comparison"]
    assert set(cmp["judges"]) == {"calibrated", "uncalibrated", "mlflow_simba", "mlflow_gepa"}
    assert set(cmp["comparisons"]) == {"calibrated_vs_uncalibrated", "calibrated_vs_mlflow_simba",
                                       "calibrated_vs_mlflow_gepa"}
    assert cmp["comparisons"]["calibrated_vs_uncalibrated"]["pi_delta"] > 0
    print_calibration({"anchor": out, "splits": {}, "details": {}})
    printed = capsys.readouterr().out
    assert "AutoRefine (calibrated)" in printed and "uncalibrated" in printed and "mlflow_gepa" in printed
