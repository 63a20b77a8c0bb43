"""The FEH quality benchmark's machinery (benchmarks/studies/feh_quality.py): the decision
matrix, cross-validation that never sees held-out labels, quality counts, the new-user probe and
the run and embedding caches (shared stand-ins: _feh_testkit)."""
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from _feh_testkit import F, bag_embed, run  # noqa: E402
from verifirst.benchmarks.studies import feh_quality as fq  # noqa: E402
from verifirst.core.task import Item  # noqa: E402
from verifirst.verifiers.bash._feh_compare import FehParams, RunView, features  # noqa: E402


def _random_features(n, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        def b():
            return bool(rng.random() < 0.5)

        f = features(RunView.of(run()), RunView.of(run()))
        for k in ("stdout_equal", "stdout_sorted_equal", "stderr_equal", "exit_equal", "ok_gold", "ok_cand",
                  "fs_equal", "fs_gold_empty", "fs_cand_empty", "out_gold_empty", "out_cand_empty",
                  "stdout_both_empty", "fs_paths_equal", "same_command"):
            setattr(f, k, b())
        f.token_overlap, f.min_tokens = float(rng.random()), int(rng.integers(0, 4))
        f.cos_out = None if f.no_output else float(rng.random())
        f.cos_cmd, f.fs_path_jaccard = float(rng.random()), float(rng.random())
        out.append(f)
    return out


def test_decision_matrix_matches_decide():
    feats = _random_features(300)
    cands = fq.grid()
    pick = [cands[i] for i in np.random.default_rng(1).choice(len(cands), 60, replace=False)]
    M = fq.decision_matrix(feats, pick)
    for j, p in enumerate(pick):
        assert M[j].tolist() == fq.predict(feats, p), p


def test_cross_validation_never_sees_held_out_labels():
    feats = _random_features(200, seed=3)
    labels = [bool(x) for x in np.random.default_rng(4).random(200) < 0.5]
    groups = [f"g{i // 2}" for i in range(200)]
    small = fq.grid({**fq.GRID, "out_threshold": [0.5, 0.7, 0.9], "overlap_min_tokens": [1]})
    a = fq.cross_validate(feats, labels, groups, k=4, seed=0, candidates=small)
    fold = a["fold"]
    assert all(fold[i] == fold[i + 1] for i in range(0, 200, 2))  # a task's pairs share a fold
    flipped = [(not y) if fold[i] == 2 else y for i, y in enumerate(labels)]
    b = fq.cross_validate(feats, flipped, groups, k=4, seed=0, candidates=small)
    # fold 2's parameters were fitted without fold 2's labels, so they and its predictions stay
    assert a["chosen"][2] == b["chosen"][2]
    assert [a["pred"][i] for i in range(200) if fold[i] == 2] == [b["pred"][i] for i in range(200) if fold[i] == 2]
    q = fq.quality([True, True, False, False], [True, False, True, False])
    assert (q["tp"], q["fn"], q["fp"], q["tn"]) == (1, 1, 1, 1) and q["accuracy"] == 0.5 and q["f1"] == 0.5


def test_quality_counts_inconclusive_apart_and_false_equivalence_over_all_rotated():
    labels = [True, True, False, False, False, False]
    preds = [True, True, True, True, False, False]
    und = [False, False, True, False, False, False]  # the third pair could not be judged
    q = fq.quality(labels, preds, und)
    assert q["n"] == 5 and q["inconclusive"] == 1
    assert q["inconclusive_by_label"] == {"equivalent": 0, "not_equivalent": 1}
    assert (q["tp"], q["fp"], q["tn"], q["fn"]) == (2, 1, 2, 0) and q["accuracy"] == 0.8
    assert q["precision"] == 0.667 and q["recall"] == 1.0 and q["f1"] == 0.8
    assert q["false_equivalence"] == {"count": 1, "of": 4, "rate": 0.25, "rate_conclusive": 0.333}
    assert fq.quality(labels, preds)["false_equivalence"]["count"] == 2


def test_cross_validation_fits_on_conclusive_pairs_only():
    feats = _random_features(200, seed=5)
    labels = [bool(x) for x in np.random.default_rng(6).random(200) < 0.5]
    groups = [f"g{i // 2}" for i in range(200)]
    small = fq.grid({**fq.GRID, "out_threshold": [0.5, 0.7, 0.9], "overlap_min_tokens": [1]})
    und = fq.undecided_mask(feats)
    assert 0 < und.sum() < 200 and not fq.undecided_mask(feats, inconclusive=False).any()
    a = fq.cross_validate(feats, labels, groups, k=4, seed=0, candidates=small, undecided=und)
    flipped = [(not y) if u else y for y, u in zip(labels, und)]
    b = fq.cross_validate(feats, flipped, groups, k=4, seed=0, candidates=small, undecided=und)
    assert a["chosen"] == b["chosen"] and a["pred"] == b["pred"]  # labels of undecided pairs unused
    assert not any(p for p, u in zip(a["pred"], und) if u)
    assert all(p.inconclusive for p in fq.grid()) and not any(p.inconclusive for p in fq.grid(inconclusive=False))


def test_new_user_probe_pairs_and_counts():
    from verifirst.benchmarks.studies import feh_new_user_probe as probe

    items = [Item(f"t{i}", {"task": "x"}, {"command": c, "fixture": "intercode-fs1"})
             for i, c in enumerate(["ls", "cd /testbed", "ls ", "pwd"])]
    pairs = probe.probe_pairs(items, offset=2)
    assert [p["id"] for p in pairs] == ["t0:self", "t1:self", "t1:rot2", "t2:self", "t3:self", "t3:rot2"]
    rot = [p for p in pairs if not p["label"]]
    assert {(p["gold"], p["candidate"]) for p in rot} == {("cd /testbed", "pwd"), ("pwd", "cd /testbed")}
    assert sum(p["label"] for p in pairs) == 4 and all(p["fixture"] == "intercode-fs1" for p in pairs)
    assert {p["fixture"] for p in probe.probe_pairs(items, 2, "empty")} == {"empty"}
    views = {"ls": run("a\n"), "ls ": run("a\n"), "cd /testbed": run(), "pwd": run("/\n")}
    feats = []
    for p in pairs:
        f = features(RunView.of(views[p["gold"]]), RunView.of(views[p["candidate"]]), p["gold"], p["candidate"])
        f.cos_out, f.cos_cmd = 0.0, 0.0
        feats.append(f)
    c = probe.count(feats, pairs, FehParams())
    assert c["self"] == {"pairs": 4, "equivalent": 4, "not_equivalent": 0, "inconclusive": 0}
    assert c["rotated"]["pairs"] == 2 and c["rotated"]["false_equivalent"] == 0


def test_run_and_embed_caches_make_reruns_free(tmp_path):
    calls = []

    def fake_pair(g, c, fx):
        calls.append((g, c, fx))
        return run(g.upper()), run(c.upper(), fs=[F("/x")] if "x" in c else None)

    pairs = [{"gold": "echo a", "candidate": "echo b", "fixture": "empty"},
             {"gold": "echo a", "candidate": "touch x", "fixture": "empty"},
             {"gold": "echo a", "candidate": "echo b", "fixture": "empty"}]
    cache = fq.RunCache(tmp_path / "runs.jsonl")
    runs, info = fq.run_pairs(pairs, cache, run_pair=fake_pair, workers=1)
    assert info["pairs_run"] == 2 and len(calls) == 2 and runs[0] == runs[2]
    again, info2 = fq.run_pairs(pairs, fq.RunCache(tmp_path / "runs.jsonl"), run_pair=fake_pair)
    assert info2["pairs_run"] == 0 and again == runs and len(calls) == 2
    assert again[1][1].fs[0][1] == "/x"
    n_embed = []

    def counting(texts):
        n_embed.append(len(texts))
        return bag_embed(texts)

    e = fq.EmbedCache(tmp_path / "v.npz", counting)
    feats = fq.pair_features(pairs, runs, e)
    assert feats[0].cos_cmd is not None and n_embed
    e2 = fq.EmbedCache(tmp_path / "v.npz", lambda t: pytest.fail("re-embedded a cached text"))
    assert np.allclose(e2(["echo a", "ECHO A"]), bag_embed(["echo a", "ECHO A"]))
