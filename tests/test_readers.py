"""The one text reader (verifirst.core.textfile) under every loader: a UTF-8 byte-order mark is
accepted in experiment files, JSONL and CSV (outcomes and data files); only \\n, \\r\\n and \\r end
a JSON Lines line (a raw U+2028 inside a JSON string stays in the string, and the lines after it
keep their numbers); compact ISO dates (20240110) are dates, not epoch seconds."""
from datetime import datetime, timezone

import pytest

from verifirst import config
from verifirst.judge.outcomes import load_outcomes
from verifirst.core.data import records_of
from verifirst.core.errors import ConfigError, InputError
from verifirst.core.textfile import lines, read_jsonl, read_text
from verifirst.loop.timesplit import parse_time, time_windows

BOM = "\ufeff"
REC = '{"id": "a1", "label": "PASS", "task": "list files", "command": "ls"}\n'
SEPARATORS = ["\u2028", "\u2029", "\u0085"]  # str.splitlines() breaks at each; JSON allows them raw


def write(path, text):
    path.write_bytes(text.encode("utf-8"))
    return path


def experiment_file(tmp_path, extra=""):
    return (f'{BOM}[experiment]\nname = "bom"\nworkdir = "{tmp_path / "wd"}"\n{extra}\n'
            '[suite]\nname = "bash-builtin"\nlimit = 4\n[program]\nname = "bash-generator"\n'
            '[verifier]\nname = "exact"\n[optimizer]\nname = "gepa"\nmax_metric_calls = 4\n'
            '[models]\ntask = "local"\n')


def test_read_text_drops_a_byte_order_mark(tmp_path):
    assert read_text(write(tmp_path / "f.txt", BOM + "x\n")) == "x\n"


def test_experiment_file_with_a_bom_loads(tmp_path):
    exp = config.load(write(tmp_path / "e.toml", experiment_file(tmp_path)))
    assert exp.experiment["name"] == "bom"


def test_experiment_file_with_a_bom_names_the_right_line(tmp_path):
    # the [experiment] header is line 1 behind the BOM; the bad seed is on line 4
    path = write(tmp_path / "e.toml", experiment_file(tmp_path, 'seed = "zero"'))
    with pytest.raises(ConfigError) as e:
        config.load(path)
    assert e.value.line == 4 and "seed" in str(e.value)


def test_experiment_line_numbers_ignore_u2028_in_a_string(tmp_path):
    text = experiment_file(tmp_path, 'description = "a\u2028b"\nseed = "zero"')
    with pytest.raises(ConfigError) as e:
        config.load(write(tmp_path / "e.toml", text))
    assert e.value.line == 5


def test_outcomes_jsonl_with_a_bom(tmp_path):
    suite = load_outcomes(write(tmp_path / "o.jsonl", BOM + REC))
    assert [it.id for it in suite.items] == ["a1"]


def test_outcomes_csv_with_a_bom(tmp_path):
    suite = load_outcomes(write(tmp_path / "o.csv", BOM + "id,label,task,command\na1,PASS,list files,ls\n"))
    assert [it.id for it in suite.items] == ["a1"]


@pytest.mark.parametrize("suffix,text", [
    (".jsonl", BOM + '{"q": "x", "a": "y"}\n'),
    (".json", BOM + '[{"q": "x", "a": "y"}]'),
    (".csv", BOM + "q,a\nx,y\n"),
])
def test_data_files_with_a_bom(tmp_path, suffix, text):
    records, _, _ = records_of(write(tmp_path / f"d{suffix}", text))
    assert records == [{"q": "x", "a": "y"}]  # the CSV header's first column is "q", not "\ufeffq"


@pytest.mark.parametrize("sep", SEPARATORS)
def test_a_raw_line_separator_stays_inside_a_json_string(tmp_path, sep):
    text = f'{{"id": "a1", "label": "PASS", "task": "one{sep}two", "command": "ls"}}\n'
    suite = load_outcomes(write(tmp_path / "o.jsonl", text))
    assert suite.items[0].inputs["task"] == f"one{sep}two"
    records, _, _ = records_of(write(tmp_path / "d.jsonl", '{"q": "one%stwo"}\n' % sep))
    assert records == [{"q": f"one{sep}two"}]


def test_lines_after_a_u2028_keep_their_numbers(tmp_path):
    text = '{"q": "one\u2028two"}\n{"q": "ok"}\n{"q": broken}\n'
    with pytest.raises(InputError) as e:
        read_jsonl(write(tmp_path / "d.jsonl", text))
    assert e.value.line == 3 and "malformed JSON" in str(e.value)
    with pytest.raises(InputError) as e:
        records_of(write(tmp_path / "d2.jsonl", text))
    assert e.value.line == 3


def test_line_ends():
    assert lines("a\r\nb\rc\nd") == ["a", "b", "c", "d"]
    assert lines("a\n") == ["a"] and lines("") == [] and lines("\n") == [""]
    assert lines(BOM + "a\u2028b\n") == ["a\u2028b"]


def test_deep_json_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="nested too deeply"):
        read_jsonl(write(tmp_path / "d.jsonl", "[" * 100_000 + "\n"))


@pytest.mark.parametrize("value", ["20240110", 20240110, " 20240110 "])
def test_a_compact_iso_date_is_a_date(value):
    assert parse_time(value) == datetime(2024, 1, 10, tzinfo=timezone.utc)


@pytest.mark.parametrize("value,expected", [
    ("1704844800", datetime(2024, 1, 10, tzinfo=timezone.utc)),  # ten digits: epoch seconds
    (0, datetime(1970, 1, 1, tzinfo=timezone.utc)),
    ("20240110T120000Z", datetime(2024, 1, 10, 12, tzinfo=timezone.utc)),  # ISO basic format
])
def test_epoch_seconds_and_basic_iso_times(value, expected):
    assert parse_time(value) == expected


def test_compact_dates_make_daily_windows():
    items = [{"id": str(d), "t": f"202401{d:02d}"} for d in (10, 11, 12)]
    windows = time_windows(items, "t", "1d")
    assert [len(w.items) for w in windows] == [1, 1, 1]  # as epoch seconds all three fell in one window


def test_a_window_ending_past_year_9999_ends_at_the_last_representable_time():
    wins = time_windows([{"id": "a", "t": "9999-12-30"}, {"id": "b", "t": "9999-12-31"}], "t", "7d")
    assert len(wins) == 1 and len(wins[0].items) == 2 and wins[0].end.year == 9999
    assert len(time_windows([{"id": "a", "t": 0}], "t", "3000000D")) == 1  # an OverflowError before
