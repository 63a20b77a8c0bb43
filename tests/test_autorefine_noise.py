"""Noise around AutoRefine: seeded label flips and the teacher setting flipped labels aside
(noise injection), and judge noise from repeated sampled runs (--repeats) that an edit must beat
(the scripted world: _autorefine_world)."""
from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402

from _autorefine_world import RuleFollowingLM, _Engine, make_world, world  # noqa: E402,F401,F811
from verifirst.benchmarks.studies.noise_injection import flip_labels, run_noise_injection  # noqa: E402
from verifirst.judge.autorefine import refine_judge  # noqa: E402
from verifirst.judge.calibrate import run_calibration  # noqa: E402
from verifirst.judge.programs import PassFailJudge  # noqa: E402
from verifirst.loop.splits import make_splits  # noqa: E402



# -- noise injection --------------------------------------------------------------------
def test_flip_labels_is_seeded():
    items = make_world(10).items
    a, fa = flip_labels(items, 0.25, seed=3)
    b, fb = flip_labels(items, 0.25, seed=3)
    assert fa == fb and len(fa) == round(0.25 * len(items))
    for it, orig in zip(a, items):
        assert (it.gold["label"] != orig.gold["label"]) == (it.id in fa)


def test_noise_injection_teacher_sets_aside_flipped_labels():
    items = make_world(30, opaque_rate=0.0).items
    lm = RuleFollowingLM()
    r = run_noise_injection(items, ["code", "task"], teacher_lm=lm, fraction=0.25, seed=0, n_random=300)
    assert r["n_flipped"] == round(0.25 * len(items))
    fl, ge = r["set_aside"]["flipped"], r["set_aside"]["genuine"]
    assert fl["rate"] > 2 * ge["rate"]
    assert r["fisher"]["p_value"] < 0.01
    assert r["noise"]["after_teacher"] < r["noise"]["before"]
    assert r["noise"]["after_teacher"] < r["noise"]["random_drop"]["mean"]
    assert r["noise"]["random_drop"]["p_value"] < 0.05
    assert "drop_all_fail" in r["noise"]  # the rule the teacher's gain must beat (S2 §IV-A)
    assert set(r["by_shown_label"]) == {"PASS", "FAIL"}



# -- judge noise (--repeats) -----------------------------------------------------------------
class _TemperatureEngine(_Engine):
    def complete(self, request):
        self.owner.temperature = request.config.temperature  # single-threaded test: one call at a time
        return super().complete(request)


class NoisyJudgeLM(RuleFollowingLM):
    """Follows the rules, but a sampled judge (temperature > 0) flips some answers, by item and draw."""

    def __init__(self, flip: float = 0.2):
        dspy.LM.__init__(self, "local/noisy-rule-following", engine=_TemperatureEngine(self), cache=False)
        self.pair_edits, self.pad_rewrite, self.interrupt_after, self.interrupt_role = True, 0, None, "judge"
        self.calls = []
        self.flip, self.temperature, self.draws = flip, None, {}

    def _judge(self, instr: str, f: dict) -> dict:
        out = super()._judge(instr, f)
        if (self.temperature or 0) > 0:
            import hashlib

            key = f.get("code")
            self.draws[key] = self.draws.get(key, 0) + 1
            h = hashlib.sha256(f"{key}|{self.draws[key]}".encode()).digest()[0] / 255
            if h < self.flip:
                out = {"reasoning": "sampled the other way", "verdict": "FAIL" if out["verdict"] == "PASS" else "PASS"}
        return out


def test_repeats_report_pi_spread_and_flip_rates(world):
    from verifirst.judge.autorefine import repeat_stats

    suite, manifest = world
    train, val = manifest.select(suite.items, "train"), manifest.select(suite.items, "val")
    lm = NoisyJudgeLM()
    res = refine_judge(PassFailJudge(["code", "task"]), train, val, lm, lm, judge_lm=lm, max_iters=2, batch_size=100,
                    repeats=4, temperature=0.8)
    noise = res.noise
    assert noise["repeats"] == 4 and noise["temperature"] == 0.8
    sel = noise["selected"]
    assert len(sel["pi"]) == 4 and sel["pi_min"] <= sel["pi_mean"] <= sel["pi_max"] and sel["pi_sd"] > 0
    assert set(sel["flip_rate"]) == {it.id for it in val} and sel["items_flipping"] > 0
    assert all(0 <= r <= 0.5 for r in sel["flip_rate"].values())
    for a in noise["acceptance"]:  # each later prompt was judged against the noise
        assert a["accepted"] == (a["delta"] > a["noise"] or (a["paired_ci95"] is not None and a["paired_ci95"][0] > 0))
    stats = repeat_stats({"a": "PASS", "b": "FAIL"}, [{"a": "PASS", "b": "FAIL"}, {"a": "FAIL", "b": "FAIL"},
                                                      {"a": "PASS", "b": None}])
    assert stats["flip_rate"] == {"a": round(1 / 3, 4), "b": 0.0} and stats["items_flipping"] == 1


def test_an_edit_within_the_repeat_noise_is_not_accepted():
    from verifirst.judge.autorefine import _select

    labels = {f"i{k}": ("PASS" if k % 2 else "FAIL") for k in range(8)}
    right = dict(labels)
    one_wrong = {**labels, "i0": "PASS"}

    def it(n, mean, sd, runs):
        return {"iteration": n, "val_pi": mean, "val_noise": {"pi_sd": sd}, "val_repeat_verdicts": runs}

    start = it(0, 0.70, 0.15, [right, one_wrong, one_wrong])
    edited = it(1, 0.75, 0.15, [right, right, one_wrong])
    assert _select([start, edited], labels)["iteration"] == 0, "+0.05 inside a noise of 0.15 is not an improvement"
    assert edited["acceptance"]["accepted"] is False and edited["acceptance"]["noise"] == 0.15
    clear = it(1, 0.98, 0.01, [right, right, right])
    assert _select([it(0, 0.70, 0.01, [one_wrong] * 3), clear], labels)["iteration"] == 1
    # without repeats the higher validation π wins, as before
    assert _select([{"iteration": 0, "val_pi": 0.70}, {"iteration": 1, "val_pi": 0.75}])["iteration"] == 1


def test_repeats_reach_the_loop_through_the_driver_and_the_report_prints_them(tmp_path, capsys):
    from verifirst.judge.printing import print_calibration

    suite = make_world(n_groups=6, seed=2)
    manifest = make_splits(suite.items, group="group", seed=1)
    lm = NoisyJudgeLM()
    rep = run_calibration(suite, manifest, teacher_lm=lm, proposer_lm=lm, judge_lm=lm, max_iters=1,
                          run_dir=tmp_path / "run", repeats=3, temperature=0.9, batch_size=100)
    noise = rep["judge"]["loop"]["noise"]
    assert noise["repeats"] == 3 and noise["temperature"] == 0.9 and len(noise["initial"]["pi"]) == 3
    assert set(noise["initial"]["flip_rate"]) == {it.id for it in manifest.select(suite.items, "val")}
    print_calibration(rep)
    assert "judge noise (initial prompt, 3 runs at temperature 0.9)" in capsys.readouterr().out
