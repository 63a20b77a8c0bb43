"""EAbench loader on real layouts: an absolute symlink inside a test's home/ tree (issue 37)."""
import shutil
from pathlib import Path

import pytest

from verifirst.benchmarks.eabench import load_eabench
from verifirst.core.errors import InputError
from verifirst.verifiers.bash import fixtures

EATINY = Path(__file__).resolve().parent / "data" / "eabench_tiny"


def _suite_with_link(tmp_path: Path, target: str) -> Path:
    root = tmp_path / "ea"
    shutil.copytree(EATINY / "bash_2", root / "bash_2", symlinks=True)
    home = root / "bash_2" / "test2" / "home" / "test"
    (home / "uploads").mkdir()
    (home / "uploads" / "file3.dat").write_text("three\n")
    (home / "downloads").mkdir()
    (home / "downloads" / "soft-link3.dat").symlink_to(target)
    return root


def test_absolute_link_inside_home_loads(tmp_path):
    s = load_eabench(_suite_with_link(tmp_path, "/home/test/uploads/file3.dat")).by_id()
    it = s["eabench-bash_2-test2"]
    e = {"/" + x.path: x for x in fixtures.resolve(it.gold["fixture"]).entries}
    assert e["/home/test/downloads/soft-link3.dat"].data == b"/home/test/uploads/file3.dat"
    assert len(s) == 3  # the rest of the suite loads too


def test_absolute_link_out_of_home_names_the_file(tmp_path):
    with pytest.raises(InputError) as e:
        load_eabench(_suite_with_link(tmp_path, "/etc/passwd"))
    assert "downloads/soft-link3.dat" in str(e.value) and "mounted at /home" in str(e.value)


@pytest.mark.integration
def test_absolute_link_resolves_in_the_sandbox(tmp_path):
    try:
        from verifirst.verifiers.bash import sandbox
        sb = sandbox.default_sandbox()
    except Exception as e:  # no bwrap / user namespaces on this host
        pytest.skip(f"sandbox unavailable: {e}")
    it = load_eabench(_suite_with_link(tmp_path, "/home/test/uploads/file3.dat")).by_id()["eabench-bash_2-test2"]
    r = sb.run("cat /home/test/downloads/soft-link3.dat", it.gold["fixture"])
    assert r.stdout.strip() == "three"
