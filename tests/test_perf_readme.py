"""The README's Performance table is the renderer's output for the committed results files: a
number without a results file behind it, or a stale one, fails here. No timing is asserted."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from verifirst.benchmarks.perf import readme_table as RT
from verifirst.benchmarks.perf.record import load_result

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
NAMED = re.compile(r"\]\((benchmarks/perf/results/[\w.-]+\.json)\)")


def test_readme_table_equals_render_of_committed_results():
    assert RT.current_block(README.read_text(encoding="utf-8")) == RT.render_table(), \
        "README Performance table differs from benchmarks/perf/results: run `make bench` " \
        "(or `python benchmarks/perf/readme_table.py --write README.md`)"


def test_every_results_file_named_by_the_table_exists_and_parses():
    named = NAMED.findall(RT.current_block(README.read_text(encoding="utf-8")))
    assert sorted(named) == sorted(f"benchmarks/perf/results/{r.name}.json" for r in RT.ROWS)
    for rel in named:
        data = load_result(REPO / rel)
        m = data["machine"]
        assert m["nproc"] >= 1 and len(m["loadavg_start"]) == 3, rel
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", m["date"]), rel


def test_make_bench_writes_every_file_the_table_reads():
    text = (REPO / "Makefile").read_text()
    recipe = text.split("\nbench:", 1)[1].split("\n\n", 1)[0]
    for row in RT.ROWS:
        assert f"--out $(RESULTS)/{row.name}.json" in recipe, row.name
    assert "readme_table.py --write README.md" in recipe
    assert "make bench" in text.split("\nhelp:", 1)[1].split("\n\n", 1)[0]


@pytest.fixture
def results_copy(tmp_path):
    dst = tmp_path / "results"
    shutil.copytree(RT.RESULTS, dst)
    return dst


def _readme(tmp_path, results):
    p = tmp_path / "README.md"
    p.write_text(f"# x\n\n## Performance\n\n{RT.BEGIN}\nold\n{RT.END}\n\n## Next\n")
    assert RT.main(["--write", str(p), "--results", str(results)]) == 0
    return p


def test_a_changed_result_makes_the_readme_stale(tmp_path, results_copy):
    readme = _readme(tmp_path, results_copy)
    assert RT.main(["--check", str(readme), "--results", str(results_copy)]) == 0
    assert readme.read_text().endswith(f"{RT.END}\n\n## Next\n")
    f = results_copy / "embedded_lm.json"
    data = json.loads(f.read_text())
    data["predicts_per_min"] += 1.0
    f.write_text(json.dumps(data))
    assert RT.main(["--check", str(readme), "--results", str(results_copy)]) == 1


def test_missing_results_file_is_named_and_nothing_written(tmp_path, results_copy, capsys):
    readme = _readme(tmp_path, results_copy)
    before = readme.read_text()
    (results_copy / "cache.json").unlink()
    assert RT.main(["--write", str(readme), "--results", str(results_copy)]) == 2
    assert "cache.json: no such results file" in capsys.readouterr().err
    assert readme.read_text() == before


def test_missing_field_is_named(tmp_path, results_copy, capsys):
    f = results_copy / "sandbox.json"
    data = json.loads(f.read_text())
    del data["median_ms_per_task"]
    f.write_text(json.dumps(data))
    assert RT.main(["--results", str(results_copy)]) == 2
    assert "sandbox.json: field 'median_ms_per_task' missing" in capsys.readouterr().err


def test_readme_without_markers_is_an_error_and_untouched(tmp_path, capsys):
    p = tmp_path / "README.md"
    p.write_text(f"# x\n{RT.END}\n{RT.BEGIN}\n")
    assert RT.main(["--write", str(p)]) == 2
    assert f"{p}:2: {RT.END} comes before {RT.BEGIN}" in capsys.readouterr().err
    p.write_text("# x\n")
    assert RT.main(["--write", str(p)]) == 2
    assert p.read_text() == "# x\n"


def test_record_wraps_a_json_command_with_the_machine(tmp_path):
    out = tmp_path / "r.json"
    rec = [sys.executable, str(REPO / "benchmarks/perf/record.py"), "--out", str(out), "--"]
    ok = subprocess.run(rec + [sys.executable, "-c", "print('{\"x\": 1}')"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    data = json.loads(out.read_text())
    assert data["x"] == 1 and set(data["machine"]) >= {"nproc", "loadavg_start", "loadavg_end", "date"}
    bad = subprocess.run(rec[:-3] + ["--out", str(tmp_path / "b.json"), "--", sys.executable, "-c", "print('x')"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "not JSON" in bad.stderr and not (tmp_path / "b.json").exists()
