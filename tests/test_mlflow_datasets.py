"""Each run logs its train, validation and test splits as MLflow datasets (the run page's Datasets
section), each with its split's digest and its context; read back here through MlflowClient."""
from __future__ import annotations

import hashlib
import json


def test_the_run_logs_its_three_splits_as_datasets_with_digest_and_context(tmp_path):
    import mlflow

    import verifirst as vf
    from verifirst.lm import FastJSONAdapter
    from verifirst.lm.testing import json_answer, scripted_lm
    from verifirst.programs.bash import BashGenerator

    data = [{"task": f"say {i}", "command": "printf hi"} for i in range(10)]
    lm = scripted_lm(lambda m: json_answer(command="printf hi"))

    def metric(example, pred, trace=None):
        return float(pred.command == example.command)

    res = vf.optimize(BashGenerator(), data, metric, None, models={"task": lm}, run_dir=tmp_path / "run",
                      tracking=vf.MLflow(offline=True), workdir=tmp_path / "wd", inputs=["task"],
                      adapter=FastJSONAdapter(), name="ds")
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'wd' / 'mlflow.db'}")
    run = client.get_run(res.report["run_id"])
    got = {}
    for d in run.inputs.dataset_inputs:
        ctx = {t.key: t.value for t in d.tags}["mlflow.data.context"]
        got[ctx] = (d.dataset.name, d.dataset.digest, json.loads(d.dataset.profile or "{}").get("num_rows"))
    sizes = res.report["sizes"]
    assert set(got) == {"train", "validation", "test"}
    assert got["train"][2] == sizes["train"] and got["validation"][2] == sizes["val"] and got["test"][2] == sizes["test"]
    assert got["train"][0].endswith("-train") and got["test"][0].endswith("-test")
    # the digest is the split's: the manifest's digest and the split's item ids (items.jsonl's order)
    recs = [json.loads(line) for line in (res.run_dir / "items.jsonl").read_text().splitlines()]
    for split, ctx in (("train", "train"), ("val", "validation"), ("test", "test")):
        ids = "\n".join(r["id"] for r in recs if r["split"] == split)
        digest = hashlib.sha256(f"{res.manifest.digest}\n{split}\n{ids}".encode()).hexdigest()[:16]
        assert got[ctx][1] == digest
