"""Journey 1 around the loop: outcomes file -> splits -> calibration -> MLflow run, prompt
registry and the champion alias; then `verifirst judge` applies the registered prompt."""
import json

import mlflow

from test_autorefine import RuleFollowingLM, make_world
from verifirst.calibrate import apply_judge, calibrate_outcomes


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
    test = rep["test"]
    assert test["judges"]["calibrated"]["pi"] > test["judges"]["uncalibrated"]["pi"]
    assert rep["prompt_uri"].startswith("prompts:/verifirst-passfail-judge/")
    assert rep["champion"]["moved"] is True
    client = mlflow.MlflowClient(tracking_uri=rep["tracking_uri"], registry_uri=rep["tracking_uri"])
    run = client.get_run(rep["run_id"])
    assert run.info.status == "FINISHED" and "test_calibrated_pi" in run.data.metrics
    champ = client.get_prompt_version_by_alias("verifirst-passfail-judge", "champion")
    assert champ.tags["split_digest"] == rep["split_digest"]

    # the same data again: equal pi on the same split does not move the champion
    rep2 = calibrate_outcomes(src, workdir=tmp_path / "wd", models=models, max_iters=2, echo=lambda m: None)
    assert rep2["champion"]["moved"] is False and "does not beat" in rep2["champion"]["reason"]
    assert rep2["prompt_uri"] == rep["prompt_uri"], "the same prompt and split reuse the registered version"
    assert client.get_prompt_version_by_alias("verifirst-passfail-judge", "champion").version == champ.version

    # a different split seed is not comparable: no move either
    rep3 = calibrate_outcomes(src, workdir=tmp_path / "wd", models=models, max_iters=2, seed=9,
                              echo=lambda m: None)
    assert rep3["champion"]["moved"] is False and "another test split" in rep3["champion"]["reason"]


def test_calibrate_with_mlflow_anchor_compares_on_the_same_test_items(tmp_path):
    from test_mlflow_align import RuleFollowingEngine

    src = tmp_path / "outcomes.jsonl"
    write_outcomes(src)
    lm = RuleFollowingLM()
    rep = calibrate_outcomes(src, workdir=tmp_path / "wd", models={"judge": lm, "teacher": lm, "reflection": lm},
                             max_iters=1, anchor=True, anchor_engine=RuleFollowingEngine(), echo=lambda m: None)
    cmp = rep["anchor"]["comparison"]
    assert cmp["n_scored"] > 0 and cmp["n_scored"] <= len(rep["test_verdicts"]["calibrated"])
    assert set(cmp["comparisons"]) == {"calibrated_vs_mlflow_simba", "calibrated_vs_mlflow_unaligned"}
