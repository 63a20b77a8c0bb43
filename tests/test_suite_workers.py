"""`make test` runs its first part on xdist workers with the Makefile's `--dist`: every test of a
file must run on one worker (module-scoped servers, models and scratch directories, and the doc
pages' commands, which build on each other). xdist's `loadgroup` did not do it under pytest 9 (its
group suffix is written to a node attribute pytest 9 no longer reads), so files were split."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILE = """
import json, os, pytest

@pytest.mark.parametrize("i", range(6))
def test_where(i):
    with open(os.environ["WHERE_LOG"], "a") as fh:
        fh.write(json.dumps([__name__, os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")
"""


def _dist() -> str:
    m = re.search(r"\$\(PYTEST\) -n \$\(TEST_WORKERS\) --dist (\w+)", (ROOT / "Makefile").read_text())
    assert m, "the Makefile's first part no longer names its --dist"
    return m.group(1)


def test_the_makefiles_distribution_keeps_each_file_on_one_worker(tmp_path):
    for name in ("test_one", "test_two", "test_three"):
        (tmp_path / f"{name}.py").write_text(FILE)
    log = tmp_path / "where.jsonl"
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", _dist(),
                        str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "WHERE_LOG": str(log)})
    assert p.returncode == 0, p.stdout + p.stderr
    seen: dict[str, set[str]] = {}
    for line in log.read_text().splitlines():
        module, worker = json.loads(line)
        seen.setdefault(module, set()).add(worker)
    assert len(seen) == 3 and all(len(workers) == 1 for workers in seen.values()), seen
