import json
import subprocess
import sys

import pytest

from verifirst.core.errors import InputError, LeakageError
from verifirst.loop.splits import SplitManifest, make_splits
from verifirst.core.task import Item


def items(n=40, per_group=2):
    return [Item(id=f"t{i}-c{j}", inputs={"x": i}, group=f"t{i}", meta={"label": "A" if i % 3 else "B"})
            for i in range(n) for j in range(per_group)]


def test_groups_never_straddle_splits():
    its = items()
    m = make_splits(its, key=lambda it: it.id, group=lambda it: it.group_key, seed=3)
    where = {}
    for split in ("train", "val", "test"):
        for i in getattr(m, split):
            where.setdefault(i.split("-")[0], set()).add(split)
    assert all(len(s) == 1 for s in where.values())
    assert len(m.train) + len(m.val) + len(m.test) == len(its)


def test_deterministic_across_processes():
    code = ("from verifirst.loop.splits import make_splits\n"
            "its=[{'id': f'i{k}'} for k in range(50)]\n"
            "print(make_splits(its, seed=7).digest)")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={"PYTHONHASHSEED": str(h), "PATH": ""}).stdout.strip() for h in (1, 2)}
    assert len(outs) == 1 and len(outs.pop()) == 16


def test_seed_changes_assignment_and_digest():
    its = items()
    a = make_splits(its, group=lambda it: it.group_key, seed=0)
    b = make_splits(its, group=lambda it: it.group_key, seed=1)
    assert a.digest != b.digest


def test_stratified_keeps_label_proportions():
    its = items(60, 1)
    m = make_splits(its, ratios=(0.5, 0.25, 0.25), stratify=lambda it: it.meta["label"])
    by = {it.id: it.meta["label"] for it in its}
    for split in ("train", "val", "test"):
        ids = getattr(m, split)
        frac_b = sum(by[i] == "B" for i in ids) / len(ids)
        assert 0.2 <= frac_b <= 0.45


def test_guard_refuses_test_items_and_seen_items():
    its = items(20, 1)
    m = make_splits(its)
    with pytest.raises(LeakageError):
        m.admit_to_optimizer(m.train + m.test[:1])
    m.admit_to_optimizer(m.train + m.val)
    m.check_test(m.test)  # fine
    with pytest.raises(LeakageError):
        m.check_test(m.test + m.train[:1])
    m.seen.add(m.test[0])
    with pytest.raises(LeakageError):
        m.check_test(m.test)


def test_unknown_ids_refused():
    m = make_splits(items(10, 1))
    with pytest.raises(LeakageError):
        m.admit_to_optimizer(["nope"])


def test_save_load_roundtrip_and_tamper_detection(tmp_path):
    m = make_splits(items(12, 1), seed=5)
    m.admit_to_optimizer(m.train)
    p = m.save(tmp_path / "m.json")
    m2 = SplitManifest.load(p)
    assert m2.digest == m.digest and m2.seen == set(m.train)
    d = json.loads(p.read_text())
    d["test"].append(d["train"].pop())
    p.write_text(json.dumps(d))
    with pytest.raises(InputError, match="digest"):
        SplitManifest.load(p)


def test_too_few_items_and_duplicates_are_clear_errors():
    with pytest.raises(InputError, match="empty"):
        make_splits(items(2, 1), ratios=(0.5, 0.25, 0.25))
    with pytest.raises(InputError, match="duplicate"):
        make_splits([{"id": "a"}, {"id": "a"}, {"id": "b"}])
    with pytest.raises(InputError, match="ratios"):
        make_splits(items(10, 1), ratios=(0.5, 0.5, 0.5))


def test_touch_records_evaluated_items_and_refuses_test_and_unknown_ids():
    m = make_splits(items(20, 1))
    m.touch(m.train[0])
    m.touch(m.val[0])
    assert m.seen == {m.train[0], m.val[0]}
    m.check_test(m.test)  # evaluated train/val items leave the test split clean
    with pytest.raises(LeakageError, match="held-out test item"):
        m.touch(m.test[0])
    with pytest.raises(LeakageError, match="not in split manifest"):
        m.touch("nope")
    with pytest.raises(LeakageError, match="seen or evaluated"):
        m.check_test(m.test)  # the refused touch is still on record
    assert m.test[0] in m.to_dict()["seen"], "and saved with the manifest"


# -- ratios as given by a user, and what each optimizer needs --------------------------------------
@pytest.mark.parametrize("ratios,kw,message", [
    ((True, False, False), {}, "not all numbers"),
    ((0.5, 0.5), {}, "not three numbers"),
    ("0.5,0.25,0.25", {}, "not three numbers"),
    ((float("nan"), 0.5, 0.5), {}, "not fractions from 0 to 1"),
    ((0.5, 0.6, -0.1), {}, "not fractions from 0 to 1"),
    ((0.5, 0.3, 0.3), {}, "summing to 1"),
    ((0.0, 0.5, 0.5), {}, "training split empty"),
    ((1.0, 0.0, 0.0), {}, "validation split empty"),
    ((0.5, 0.5, 0.0), {}, "test split empty"),
    ((0.5, 0.25, 0.25), {"no_test": True}, "no_test is set"),
    ((0.5, 0.25, 0.25), {"no_val": True}, "no_val is set"),
])
def test_check_ratios_refuses_what_would_silently_mislead(ratios, kw, message):
    from verifirst.core.errors import ConfigError
    from verifirst.loop.splits import check_ratios

    with pytest.raises(ConfigError, match=message) as e:
        check_ratios(ratios, field="splits.ratios", source="exp.toml", line=7, **kw)
    assert str(e.value).startswith("exp.toml:7 [splits.ratios]:")


def test_check_ratios_allows_an_empty_split_only_when_asked():
    from verifirst.loop.splits import check_ratios

    assert check_ratios((0.5, 0.5, 0), no_test=True) == (0.5, 0.5, 0.0)
    assert check_ratios([1, 0, 0], no_val=True, no_test=True) == (1.0, 0.0, 0.0)
    assert check_ratios((0.5, 0.25, 0.25)) == (0.5, 0.25, 0.25)


def test_optimizer_needs_are_checked_before_it_starts():
    from verifirst.core.errors import ConfigError
    from verifirst.loop.splits import check_optimizer_needs

    class Named:
        def __init__(self, name, needs=None):
            self.name, self.needs_splits = name, needs

    no_train = SplitManifest([], ["a"], ["b"], 0, (0.0, 0.5, 0.5))
    no_val = SplitManifest(["a"], [], ["b"], 0, (0.5, 0.0, 0.5))
    with pytest.raises(ConfigError, match="optimizer 'gepa' needs items in the training split"):
        check_optimizer_needs(no_train, Named("gepa"))
    check_optimizer_needs(no_val, Named("gepa"))  # GEPA selects on train when asked to run without val
    with pytest.raises(ConfigError, match="the validation split is empty"):
        check_optimizer_needs(no_val, Named("autorefine"))
    with pytest.raises(ConfigError, match="validation"):
        check_optimizer_needs(no_val, Named("mine", needs=("train", "val")))
    check_optimizer_needs(no_train, None)  # evaluation only needs nothing
