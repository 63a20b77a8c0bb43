import pytest

from verifirst.core import stats
def test_mcnemar_exact_published_value():
    r = stats.mcnemar(11, 3)
    assert r.p_value == pytest.approx(0.0574, abs=5e-4)
    assert r.exact


def test_mcnemar_chi2_continuity_corrected():
    r = stats.mcnemar(11, 3, exact=False)
    assert r.statistic == pytest.approx(3.5)
    assert r.p_value == pytest.approx(0.0614, abs=1e-3)


def test_mcnemar_no_discordance_and_symmetry():
    assert stats.mcnemar(0, 0).p_value == 1.0
    assert stats.mcnemar(4, 9).p_value == pytest.approx(stats.mcnemar(9, 4).p_value)


def test_mcnemar_paired_counts_discordant_pairs():
    a = [True, True, False, False, True]
    b = [True, False, True, True, True]
    r = stats.mcnemar_paired(a, b)
    assert (r.b, r.c) == (1, 2)


def test_wilson_known_interval():
    lo, hi = stats.wilson(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-3)
    assert hi == pytest.approx(0.9433, abs=1e-3)
    assert stats.wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        stats.wilson(3, 2)


def test_scotts_pi_majority_class_judge_is_not_positive():
    truth = ["PASS"] * 8 + ["FAIL"] * 2
    judge = ["PASS"] * 10
    assert stats.scotts_pi(truth, judge) <= 0


def test_pi_and_kappa_hand_computed_table():
    # 2x2: both PASS 20, both FAIL 15, a PASS/b FAIL 5, a FAIL/b PASS 10 (n=50)
    a = ["P"] * 20 + ["F"] * 15 + ["P"] * 5 + ["F"] * 10
    b = ["P"] * 20 + ["F"] * 15 + ["F"] * 5 + ["P"] * 10
    po = 35 / 50
    # kappa: pa(P)=25/50, pb(P)=30/50
    pe_k = 0.5 * 0.6 + 0.5 * 0.4
    # pi: pooled P = 55/100
    pe_pi = 0.55 ** 2 + 0.45 ** 2
    assert stats.cohens_kappa(a, b) == pytest.approx((po - pe_k) / (1 - pe_k))
    assert stats.scotts_pi(a, b) == pytest.approx((po - pe_pi) / (1 - pe_pi))
    assert stats.scotts_pi(a, a) == pytest.approx(1.0)


def test_confusion_per_class():
    t = ["PASS", "PASS", "FAIL", "FAIL", "FAIL"]
    p = ["PASS", "FAIL", "FAIL", "FAIL", "PASS"]
    c = stats.confusion(t, p, labels=["PASS", "FAIL"])
    assert c.matrix == [[1, 1], [1, 2]]
    assert c.per_class["FAIL"]["precision"] == pytest.approx(2 / 3)
    assert c.per_class["FAIL"]["recall"] == pytest.approx(2 / 3)
    assert c.per_class["PASS"]["f1"] == pytest.approx(0.5)
    assert c.accuracy == pytest.approx(3 / 5)


def test_paired_bootstrap_detects_clear_improvement_and_is_seeded():
    y = [1] * 40
    a = [1] * 10 + [0] * 30
    b = [1] * 35 + [0] * 5
    d1 = stats.paired_bootstrap(stats.accuracy, a, b, y, n=2000, seed=1)
    d2 = stats.paired_bootstrap(stats.accuracy, a, b, y, n=2000, seed=1)
    assert d1.delta == pytest.approx(25 / 40)
    assert d1.lo > 0.3 and d1.hi <= 1.0
    assert tuple(d1) == tuple(d2)


def test_fisher_exact_matches_scipy_reference():
    r = stats.fisher_exact([[8, 2], [1, 5]])
    assert r.p_value == pytest.approx(0.0350, abs=1e-3)
