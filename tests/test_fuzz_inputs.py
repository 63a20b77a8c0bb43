"""Property-based fuzzing (Hypothesis) of the input readers: experiment files, outcome files (JSONL,
CSV), data files (JSONL, JSON, CSV), record times and --windows. A generated input ends in a result
or a clean InputError (ConfigError is one) that names the file: never another exception.

Profiles: `ci` (the default, run by `make test`: few examples per surface, no deadline, a few
seconds in all) and `long` (VERIFIRST_FUZZ=long, thousands of examples per surface). Inputs a run
found that once failed are pinned with @example, so every run replays them.
"""
from __future__ import annotations

import json
import os
from datetime import datetime

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from verifirst import config  # noqa: E402
from verifirst.judge.outcomes import load_outcomes  # noqa: E402
from verifirst.core.data import records_of  # noqa: E402
from verifirst.core.errors import InputError  # noqa: E402
from verifirst.core.textfile import lines, read_jsonl  # noqa: E402
from verifirst.loop.timesplit import MAX_WINDOWS, parse_time, parse_windows, time_windows  # noqa: E402

_COMMON = dict(deadline=None, database=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
settings.register_profile("ci", max_examples=40, derandomize=True, **_COMMON)  # the same inputs every run
settings.register_profile("long", max_examples=3000, **_COMMON)  # new inputs each run
settings.load_profile("long" if os.environ.get("VERIFIRST_FUZZ") == "long" else "ci")

# text a user's file can hold: separators str.splitlines() breaks at, a BOM, quotes, brackets, NUL
TRICKY = st.sampled_from(["\ufeff", "\u2028", "\u2029", "\u0085", "\r", "\n", "\r\n", '"', "'", ",", "{", "}",
                          "[", "]", "\\", "\x00", "=", "#", " ", "\t", "\x0b", "\x0c"])
TEXT = st.lists(st.one_of(TRICKY, st.text(max_size=12)), max_size=30).map("".join)
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=True),
                   st.text(max_size=20))
VALUE = st.recursive(SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                     max_leaves=10)
FIELDS = st.sampled_from(["id", "label", "task", "command", "diff", "title", "group", "created_at", "meta",
                          "q", "a", ""])
RECORD = st.dictionaries(FIELDS, VALUE, max_size=7)


def _json_line(rec: dict, ascii_only: bool) -> str:
    return json.dumps(rec, ensure_ascii=ascii_only, default=str, allow_nan=True)


JSONL = st.one_of(
    TEXT,
    st.lists(st.tuples(RECORD, st.booleans()), max_size=6).map(
        lambda recs: "\n".join(_json_line(r, a) for r, a in recs)),
    st.tuples(st.sampled_from(["", "\ufeff"]), st.lists(st.one_of(RECORD.map(json.dumps), TEXT), max_size=5)).map(
        lambda t: t[0] + "\n".join(t[1])),
)
CSV = st.one_of(TEXT, st.tuples(st.sampled_from(["", "\ufeff"]),
                                st.lists(st.lists(st.one_of(FIELDS, TEXT), max_size=5).map(",".join),
                                         max_size=6)).map(lambda t: t[0] + "\n".join(t[1])))
RAW = st.one_of(st.binary(max_size=64), TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")))


def _bytes(text_or_bytes) -> bytes:
    if isinstance(text_or_bytes, bytes):
        return text_or_bytes
    return text_or_bytes.encode("utf-8", "surrogatepass")


def _ends_cleanly(fn, path):
    """fn(path) returns, or raises an InputError naming `path`; anything else fails the test."""
    try:
        return fn(path)
    except InputError as e:
        assert e.path is None or str(path) in str(e.path), (e.path, path)
        return None


@given(content=st.one_of(JSONL, RAW))
@example(content='{"id": "a", "label": "PASS", "task": "x\u2028y", "command": "ls"}')
@example(content="\ufeff" + '{"id": "a", "label": "PASS", "task": "t", "command": "ls"}')
@example(content="[" * 5000)
def test_outcomes_jsonl(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("o") / "o.jsonl"
    path.write_bytes(_bytes(content))
    suite = _ends_cleanly(load_outcomes, path)
    if suite is not None:
        assert all(it.gold["label"] in ("PASS", "FAIL") for it in suite.items)


@given(content=st.one_of(CSV, RAW))
@example(content="\ufeffid,label,task,command\na,PASS,t,ls\n")
@example(content='id,label,task\n"a')
def test_outcomes_csv(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("o") / "o.csv"
    path.write_bytes(_bytes(content))
    _ends_cleanly(load_outcomes, path)


@given(content=st.one_of(JSONL, CSV, RAW), suffix=st.sampled_from([".jsonl", ".json", ".csv"]))
@example(content="[" * 5000, suffix=".json")
def test_data_files(tmp_path_factory, content, suffix):
    path = tmp_path_factory.mktemp("d") / f"d{suffix}"
    path.write_bytes(_bytes(content))
    got = _ends_cleanly(records_of, path)
    if got is not None:
        assert isinstance(got[0], list)


@given(content=st.one_of(JSONL, RAW))
def test_jsonl_lines_keep_their_numbers(tmp_path_factory, content):
    """Every record read_jsonl gives sits on the line it names (as an editor counts them)."""
    path = tmp_path_factory.mktemp("j") / "j.jsonl"
    path.write_bytes(_bytes(content))
    got = _ends_cleanly(read_jsonl, path)
    if got:
        text = path.read_bytes().decode("utf-8").removeprefix("\ufeff")
        for n, rec in got:
            assert json.loads(lines(text)[n - 1]) == rec


EXPERIMENT_KEYS = {
    "experiment": ["name", "seed", "threads", "max_error_rate", "executor", "description", "bogus"],
    "suite": ["name", "path", "limit", "options"],
    "program": ["name", "options"],
    "verifier": ["name", "options"],
    "splits": ["ratios", "by", "time_field", "windows"],
    "optimizer": ["name", "max_metric_calls", "seed"],
    "models": ["task", "reflection", "judge"],
    "budget": ["max_usd", "max_tokens", "max_lm_calls", "max_wall_s"],
}
TOML_VALUE = st.one_of(
    st.integers(-10**12, 10**12).map(str), st.floats(allow_nan=True).map(lambda f: repr(f).replace("inf", "inf")),
    st.text(max_size=15).map(json.dumps), st.booleans().map(lambda b: str(b).lower()),
    st.lists(st.floats(0, 1).map(repr), max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
    st.sampled_from(['"local"', '"gepa"', '"bash-builtin"', '"exact"', '"bash-generator"', '"7d"', '"1M"',
                     '"time"', '{ a = 1 }', "1979-05-27", '"~/x"', '""']),
    TEXT.map(lambda t: t.replace("\n", " ")),
)
SECTION = st.sampled_from(sorted(EXPERIMENT_KEYS)).flatmap(
    lambda sec: st.lists(st.tuples(st.sampled_from(EXPERIMENT_KEYS[sec]), TOML_VALUE), max_size=4).map(
        lambda kvs: f"[{sec}]\n" + "".join(f"{k} = {v}\n" for k, v in kvs)))
BASE = ('[experiment]\nname = "fz"\n[suite]\nname = "bash-builtin"\n[program]\nname = "bash-generator"\n'
        '[verifier]\nname = "exact"\n[optimizer]\nname = "gepa"\n[models]\ntask = "local"\n')


@given(bom=st.booleans(), sections=st.lists(SECTION, max_size=4), tail=st.one_of(st.just(""), TEXT))
@example(bom=True, sections=[], tail="")
@example(bom=False, sections=['[splits]\nby = "time"\ntime_field = "t"\nwindows = "1M"\n'], tail="")
def test_experiment_files(tmp_path_factory, bom, sections, tail):
    folder = tmp_path_factory.mktemp("e")
    text = ("\ufeff" if bom else "") + BASE.replace('name = "fz"', f'name = "fz"\nworkdir = "{folder / "wd"}"') \
        + "".join(sections) + tail
    path = folder / "e.toml"
    path.write_bytes(_bytes(text))
    before = set(folder.iterdir())
    exp = _ends_cleanly(config.load, path)
    if exp is None:
        assert set(folder.iterdir()) == before, "a refused experiment file wrote nothing"


@given(value=st.one_of(SCALAR, st.datetimes(), st.dates(), TEXT))
@example(value="20240110")
@example(value=10**30)
def test_record_times(value):
    try:
        t = parse_time(value)
    except ValueError:
        return
    assert isinstance(t, datetime) and t.tzinfo is not None


@given(spec=st.one_of(st.integers(-5, 10**12), TEXT, st.from_regex(r"\A\d{1,12}(\.\d{1,3})?[smhdwMSHDWy]\Z")),
       span_days=st.integers(0, 4000))
@example(spec="1s", span_days=3650)
@example(spec=10**9, span_days=1)
@example(spec="1M", span_days=30)
@example(spec="3000000D", span_days=0)  # found by the long profile: the window's end passed year 9999
def test_windows(spec, span_days):
    items = [{"id": "a", "t": 0}, {"id": "b", "t": span_days * 86400}]
    try:
        parse_windows(spec)
        wins = time_windows(items, "t", spec)
    except InputError as e:
        assert e.field == "--windows"
        return
    assert 1 <= len(wins) <= MAX_WINDOWS and sum(len(w.items) for w in wins) == 2
