"""Time-ordered splits: train oldest, validation next, test newest, groups whole; cut times and
evaluation windows in the manifest and the report; every entry point (make_splits, the CLI, the
API, experiment files)."""
import json
import random
from datetime import date, datetime, timedelta, timezone

import pytest
from typer.testing import CliRunner

from test_autorefine import RuleFollowingLM, make_world
from verifirst.core.errors import ConfigError, InputError
from verifirst.loop.splits import SplitManifest, check_resumed_manifest, make_splits
from verifirst.loop.timesplit import parse_time, parse_windows, time_windows

UTC = timezone.utc
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def records(n=40, groups=None, seed=0):
    """Records at shuffled times one hour apart; `groups` records per group when given."""
    rng = random.Random(seed)
    hours = list(range(n))
    rng.shuffle(hours)
    out = []
    for i, h in enumerate(hours):
        r = {"id": f"r{i}", "created_at": (T0 + timedelta(hours=h)).isoformat()}
        if groups:
            r["group"] = f"g{rng.randrange(n // groups)}"
        out.append(r)
    return out


def times_of(m, split):
    return [parse_time(m.times[i]) for i in getattr(m, split)]


def test_parse_time_reads_iso_with_and_without_zone_dates_and_epoch_seconds():
    assert parse_time("2024-01-01T12:00:00Z") == datetime(2024, 1, 1, 12, tzinfo=UTC)
    assert parse_time("2024-01-01T14:00:00+02:00") == datetime(2024, 1, 1, 12, tzinfo=UTC)
    assert parse_time("2024-01-01T12:00:00") == datetime(2024, 1, 1, 12, tzinfo=UTC), "naive is UTC"
    assert parse_time("2024-01-01") == parse_time(date(2024, 1, 1)) == T0
    assert parse_time(datetime(2024, 1, 1)) == T0
    epoch = int(T0.timestamp())
    assert parse_time(epoch) == parse_time(float(epoch)) == parse_time(str(epoch)) == T0  # CSV cells are strings
    assert parse_time(epoch + 0.5) == T0 + timedelta(seconds=0.5)
    for bad in ("yesterday", "2024-13-01", True, None, float("nan"), [2024], ""):
        with pytest.raises(ValueError):
            parse_time(bad)


def test_ungrouped_time_split_puts_the_oldest_in_train_and_the_newest_in_test():
    m = make_splits(records(40), ratios=(0.5, 0.25, 0.25), by="time", time_field="created_at")
    assert m.sizes() == {"train": 20, "val": 10, "test": 10} and m.method == "time"
    assert max(times_of(m, "train")) < min(times_of(m, "val"))
    assert max(times_of(m, "val")) < min(times_of(m, "test"))
    assert m.cuts == {"train_start": "2024-01-01T00:00:00Z", "train_end": "2024-01-01T19:00:00Z",
                      "val_start": "2024-01-01T20:00:00Z", "val_end": "2024-01-02T05:00:00Z",
                      "test_start": "2024-01-02T06:00:00Z", "test_end": "2024-01-02T15:00:00Z"}
    # the same data split at random: a different digest even where the sets happened to agree
    rnd = make_splits(records(40), ratios=(0.5, 0.25, 0.25))
    assert rnd.method == "random" and rnd.digest != m.digest


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_groups_never_straddle_and_go_where_their_newest_record_falls(seed):
    recs = records(60, groups=3, seed=seed)
    m = make_splits(recs, group="group", by="time", time_field="created_at")
    split_of_group = {}
    for r in recs:
        split_of_group.setdefault(r["group"], set()).add(m.split_of(r["id"]))
    assert all(len(s) == 1 for s in split_of_group.values()), "a group straddles a boundary"
    newest = {}
    for r in recs:
        t = parse_time(r["created_at"])
        newest[r["group"]] = max(newest.get(r["group"], t), t)
    by_split = {s: [newest[g] for g, ss in split_of_group.items() if s in ss] for s in ("train", "val", "test")}
    assert max(by_split["train"]) <= min(by_split["val"]) <= max(by_split["val"]) <= min(by_split["test"])
    assert m.cuts["train_end"] == max(by_split["train"]).isoformat().replace("+00:00", "Z")
    # no training record is newer than a test group (an older record of a later group may be)
    assert max(times_of(m, "train")) < min(by_split["test"])


def test_manifest_records_the_method_cuts_and_times_and_a_reload_keeps_them(tmp_path):
    m = make_splits(records(20), by="time", time_field="created_at", windows="6h")
    d = json.loads(m.save(tmp_path / "m.json").read_text())
    assert d["method"] == "time" and d["time_field"] == "created_at" and d["windows"] == "6h"
    assert d["cuts"]["test_start"] == "2024-01-01T15:00:00Z" and len(d["times"]) == 20
    assert set(d["test_windows"]) == set(m.test)
    back = SplitManifest.load(tmp_path / "m.json")
    assert (back.method, back.time_field, back.cuts, back.digest) == (m.method, m.time_field, m.cuts, m.digest)
    # a resume on other splits is refused, naming the manifest and the method
    run = tmp_path / "run"
    run.mkdir()
    m.save(run / "split_manifest.json")
    check_resumed_manifest(run, m)  # the same splits resume
    with pytest.raises(InputError, match=r"split_manifest.json \[method\].*split 'time'.*'random'"):
        check_resumed_manifest(run, make_splits(records(20)))


def test_a_missing_or_unreadable_time_is_bad_input_naming_the_record_and_field():
    recs = records(10)
    del recs[3]["created_at"]
    with pytest.raises(InputError, match=r"data.jsonl:4 \[created_at\]: record 'r3' has no time field"):
        make_splits(recs, by="time", time_field="created_at", source="data.jsonl", lines={"r3": 4})
    recs[3]["created_at"] = "last tuesday"
    with pytest.raises(InputError, match=r"record 'r3'.*'last tuesday' is not an ISO 8601 time"):
        make_splits(recs, by="time", time_field="created_at")
    with pytest.raises(InputError, match=r"\[splits.time_field\]"):
        make_splits(records(10), by="time")
    with pytest.raises(InputError, match=r"unknown split method 'newest'"):
        make_splits(records(10), by="newest", time_field="created_at")
    with pytest.raises(InputError, match=r"\[splits.windows\]"):
        make_splits(records(10), windows="7d")


def test_windows_by_duration_are_consecutive_from_the_oldest_item_empty_ones_included():
    recs = [{"id": f"d{d}", "t": f"2024-03-{d:02d}"} for d in (1, 2, 8, 20)]
    ws = time_windows(recs, "t", "7d")
    assert [w.label for w in ws] == ["2024-03-01T00:00:00Z/2024-03-08T00:00:00Z",
                                     "2024-03-08T00:00:00Z/2024-03-15T00:00:00Z",
                                     "2024-03-15T00:00:00Z/2024-03-22T00:00:00Z"]
    assert [[r["id"] for r in w.items] for w in ws] == [["d1", "d2"], ["d8"], ["d20"]]
    assert [len(w.items) for w in time_windows(recs, "t", "1w")] == [2, 1, 1]
    assert [len(w.items) for w in time_windows(recs, "t", "5d")] == [2, 1, 0, 1]  # 03-11..16 is empty


def test_windows_by_count_cut_the_span_into_equal_parts_with_the_newest_in_the_last():
    recs = [{"id": str(h), "t": int(T0.timestamp()) + 3600 * h} for h in range(10)]  # epoch seconds
    ws = time_windows(recs, "t", 3)
    assert len(ws) == 3 and ws[0].start == T0 and ws[-1].end == T0 + timedelta(hours=9)
    assert [len(w.items) for w in ws] == [3, 3, 4]
    assert sum(len(time_windows(recs, "t", "4")[k].items) for k in range(4)) == 10
    assert parse_windows("12h") == ("duration", 43200.0) and parse_windows(4) == ("count", 4)
    for bad in ("0", "0d", "7 days", "fortnight", True, -2):
        with pytest.raises(InputError, match=r"\[--windows\]"):
            parse_windows(bad)


def write_timed_outcomes(path, n_groups=10, missing=None):
    """make_world's records, one day apart in file order (groups share a day), as a JSONL."""
    suite = make_world(n_groups=n_groups, seed=3)
    lines = []
    for k, it in enumerate(suite.items):
        day = int(it.group[1:]) if it.group[1:].isdigit() else k
        rec = {"id": it.id, "label": it.gold["label"], **it.inputs, "group": it.group,
               "created_at": (T0 + timedelta(days=day, minutes=k)).isoformat()}
        if it.id == missing:
            del rec["created_at"]
        lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n")
    return suite


def test_cli_calibrate_refuses_a_record_without_its_time_naming_file_line_and_field(tmp_path):
    from verifirst.cli import app

    src = tmp_path / "outcomes.jsonl"
    suite = write_timed_outcomes(src, missing=None)
    victim = suite.items[5].id
    write_timed_outcomes(src, missing=victim)
    wd = tmp_path / "wd"
    res = CliRunner().invoke(app, ["calibrate", "--outcomes", str(src), "--split-by", "time",
                                   "--time-field", "created_at", "--workdir", str(wd)])
    out = res.output + (res.stderr if res.stderr_bytes is not None else "")
    assert res.exit_code == 2, out
    assert f"outcomes.jsonl:6 [created_at]: record {victim!r} has no time field 'created_at'" in out
    assert "Traceback" not in out and not wd.exists(), "nothing written"
    for argv, field in ((["--split-by", "time"], "--time-field"), (["--windows", "7d"], "--windows"),
                        (["--split-by", "newest"], "--split-by"),
                        (["--split-by", "time", "--time-field", "created_at", "--windows", "soon"], "--windows")):
        res = CliRunner().invoke(app, ["calibrate", "--outcomes", str(src), "--workdir", str(wd), *argv])
        out = res.output + (res.stderr if res.stderr_bytes is not None else "")
        assert res.exit_code == 2 and f"[{field}]" in out and "Traceback" not in out, out
    assert not wd.exists()


def test_vf_calibrate_with_a_time_split_reports_cuts_and_test_counts_per_window(tmp_path):
    import verifirst as vf

    src = tmp_path / "outcomes.jsonl"
    write_timed_outcomes(src)
    lm = RuleFollowingLM()
    res = vf.calibrate(src, models={"judge": lm}, max_iters=1, workdir=tmp_path / "wd", run_dir=tmp_path / "run",
                       splits={"ratios": (0.5, 0.25, 0.25), "by": "time", "time_field": "created_at",
                               "windows": "2d"})
    m = res.manifest
    assert m.method == "time" and max(times_of(m, "train")) < min(times_of(m, "val"))
    assert max(times_of(m, "val")) < min(times_of(m, "test"))
    ts = res.report["time_split"]
    assert ts["cuts"] == m.cuts and ts["time_field"] == "created_at" and ts["windows_spec"] == "2d"
    assert sum(w["n_test"] for w in ts["windows"]) == len(m.test) == len(ts["test_window"])
    assert sum(w["n"] for w in ts["windows"]) == len(m.train) + len(m.val) + len(m.test)
    assert ts["windows"][0]["n_test"] == 0 and ts["windows"][-1]["n_test"] > 0, "test is the newest period"
    saved = json.loads((tmp_path / "run" / "report.json").read_text())
    assert saved["time_split"]["cuts"] == m.cuts
    # the same run directory with a random split is another run: refused, nothing run
    with pytest.raises(InputError, match=r"\[method\].*split 'time', this run splits 'random'"):
        vf.calibrate(src, models={"judge": lm}, max_iters=1, workdir=tmp_path / "wd", run_dir=tmp_path / "run")
    with pytest.raises(InputError, match=r"unknown key\(s\) \['time'\]"):
        vf.calibrate(src, models={"judge": lm}, workdir=tmp_path / "wd", splits={"by": "time", "time": "x"})


def test_api_manifest_takes_the_time_form_for_optimize():
    from verifirst.api import make_manifest
    from verifirst.core.data import to_suite

    suite = to_suite([{**r, "q": r["id"]} for r in records(20, groups=2)], inputs=["q"])
    m = make_manifest(suite.items, {"by": "time", "time_field": "created_at", "ratios": (0.6, 0.2, 0.2)}, 0)
    assert m.method == "time" and m.time_field == "created_at"
    groups = {it.id: it.group_key for it in suite.items}
    train_groups = {groups[i] for i in m.train}
    assert not train_groups & {groups[i] for i in m.val + m.test}
    with pytest.raises(InputError, match=r"\[splits.time_field\]"):
        make_manifest(suite.items, {"by": "time"}, 0)


TOML = """[experiment]
name = "t"
workdir = "{wd}"
[suite]
name = "outcomes"
path = "{src}"
[program]
name = "bash-generator"
[verifier]
name = "exact"
[splits]
ratios = [0.5, 0.25, 0.25]
{extra}
"""


def test_experiment_file_splits_by_time_and_checks_the_keys_with_their_line(tmp_path):
    from verifirst import config, experiment
    from verifirst.core import registry
    src = tmp_path / "o.jsonl"
    write_timed_outcomes(src)
    path = tmp_path / "exp.toml"
    path.write_text(TOML.format(wd=tmp_path / "wd", src=src,
                                extra='by = "time"\ntime_field = "created_at"\nwindows = 3'))
    exp = config.load(path)
    assert (exp.splits["by"], exp.splits["time_field"], exp.splits["windows"]) == ("time", "created_at", 3)
    suite = registry.component("suite", "outcomes")(src)
    m = experiment.make_manifest(exp, suite)
    assert m.method == "time" and m.windows == 3 and len(m.time_report()["windows"]) == 3
    assert max(times_of(m, "train")) < min(times_of(m, "test"))
    path.write_text(TOML.format(wd=tmp_path / "wd", src=src, extra='by = "time"'))
    with pytest.raises(ConfigError, match=r"exp.toml:13 \[splits.time_field\]"):
        config.load(path)
    path.write_text(TOML.format(wd=tmp_path / "wd", src=src, extra='by = "date"'))
    with pytest.raises(InputError, match=r"exp.toml:13 \[splits.by\]: unknown split method 'date'"):
        config.load(path)
    path.write_text(TOML.format(wd=tmp_path / "wd", src=src, extra='by = "time"\ntime_field = "t"\nwindows = "7 days"'))
    with pytest.raises(ConfigError, match=r"exp.toml:13 \[splits.windows\]: windows '7 days' is not a duration"):
        config.load(path)


def test_vf_optimize_with_a_time_split_hands_the_optimizer_the_past_only(tmp_path):
    import dspy

    import verifirst as vf
    from test_api import QA, Recorder, metric, models

    data = [{"id": f"q{k}", "question": f"what is the answer #{k}?", "answer": "42",
             "created_at": int(T0.timestamp()) + 86400 * ((7 * k) % 12)} for k in range(12)]  # shuffled days
    tp = Recorder()
    splits = {"by": "time", "time_field": "created_at", "ratios": (0.5, 0.25, 0.25), "windows": 2}
    res = vf.optimize(dspy.Predict(QA), data, metric, tp, models=models(), run_dir=tmp_path / "run",
                      workdir=tmp_path, splits=splits)
    m = res.manifest
    day = {r["id"]: (7 * k) % 12 for k, r in enumerate(data)}
    assert sorted(day[i] for i in tp.seen) == list(range(9)), "the optimizer saw the 9 oldest days"
    assert sorted(day[i] for i in m.test) == [9, 10, 11]
    ts = res.report["time_split"]
    assert ts["cuts"]["test_start"] == "2024-01-10T00:00:00Z" and [w["n_test"] for w in ts["windows"]] == [0, 3]
    with pytest.raises(InputError, match="belongs to another run"):  # the same run dir, split at random
        vf.optimize(dspy.Predict(QA), data, metric, Recorder(), models=models(), run_dir=tmp_path / "run",
                    workdir=tmp_path, splits=(0.5, 0.25, 0.25))


def test_csv_outcomes_with_epoch_seconds_split_by_time_and_a_blank_time_names_its_line(tmp_path):
    from verifirst.core import registry
    src = tmp_path / "o.csv"
    rows = ["id,label,diff,created_at"] + [f"c{k},{'PASS' if k % 2 else 'FAIL'},d{k},{1700000000 + 60 * (9 - k)}"
                                           for k in range(10)]
    src.write_text("\n".join(rows) + "\n")
    suite = registry.component("suite", "outcomes")(src)
    m = make_splits(suite.items, key=lambda it: it.id, by="time", time_field="created_at",
                    lines=suite.meta["lines"], source=str(src))
    assert (m.train, m.val, m.test) == (["c9", "c8", "c7", "c6", "c5"], ["c4", "c3", "c2"], ["c1", "c0"])
    rows[3] = "c2,PASS,d2,"
    src.write_text("\n".join(rows) + "\n")
    suite = registry.component("suite", "outcomes")(src)
    with pytest.raises(InputError, match=r"o.csv:4 \[created_at\]: record 'c2' has no time field"):
        make_splits(suite.items, key=lambda it: it.id, by="time", time_field="created_at",
                    lines=suite.meta["lines"], source=str(src))
