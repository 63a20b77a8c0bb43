"""Fixture builders: deterministic, faithful to the peer images' descriptions, cached."""
from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile

import pytest

from verifirst.core.errors import InputError
from verifirst.verifiers.bash import fixtures

CONTRACT_NAMES = ["nl2sh-fs1", "nl2sh-fs2", "nl2sh-fs3", "nl2sh-fs4", "nl2sh-fs5",
                  "intercode-fs1", "intercode-fs2", "intercode-fs3", "intercode-fs4", "empty"]


def _files(fx):
    return {"/" + e.path: e for e in fx.entries}


def test_all_contract_names_build():
    assert set(CONTRACT_NAMES) <= set(fixtures.names())
    for name in CONTRACT_NAMES:
        fx = fixtures.build(name)
        paths = _files(fx)
        assert "/root/.bashrc" in paths and paths["/tmp"].mode == 0o1777


def test_builds_are_deterministic():
    first = {n: fixtures.build(n).content_hash for n in CONTRACT_NAMES}
    fixtures._CACHE.clear()
    second = {n: fixtures.build(n).content_hash for n in CONTRACT_NAMES}
    assert first == second
    assert first["nl2sh-fs1"] != first["intercode-fs1"]
    assert first["empty"] == first["intercode-fs4"]


def test_nl2sh_fs1_matches_description():
    f = _files(fixtures.build("nl2sh-fs1"))
    for d in ("dir1", "dir2", "dir3"):
        assert f[f"/testbed/{d}"].kind == "dir"
    exts = {os.path.splitext(p)[1] for p in f if p.startswith("/testbed/")}
    assert {".txt", ".sh", ".py", ".java", ".php", ".c", ".html", ".gz"} <= exts
    assert f["/testbed/dir1/perms.txt"].mode == 0o1553
    assert gzip.decompress(f["/testbed/index.html.gz"].data) == f["/testbed/index.html"].data
    assert f["/testbed/dir1/subdir1/shellscript1.sh"].mode == 0o755
    # `echo` without -e keeps the backslash; `echo -e` turns \n into a newline
    assert f["/testbed/dir1/subdir1/textfile4.txt"].data == b"Text file 4\\nGene 1\n"
    assert f["/testbed/dir2/subdir1/textfile2.txt"].data == b"text file\nAnother text file\n"
    assert f["/testbed/recent.txt"].mtime == fixtures.utc("202305312359.59")
    assert fixtures.build("nl2sh-fs1").env["FILES"] == "/testbed/hello.c /testbed/FooBar.html"


def test_nl2sh_fs2_has_spaces_ds_store_aout_and_tarball():
    f = _files(fixtures.build("nl2sh-fs2"))
    assert "/system/folder2/special text3.txt" in f and "/system/.DS_Store" in f
    assert f["/system/a.out"].data.startswith(b"\x7fELF\x01\x01\x01\x00")
    assert f["/system/a.out"].mtime == fixtures.utc("202304012359.00")
    with tarfile.open(fileobj=io.BytesIO(f["/system/folder2.tar.gz"].data)) as tar:
        names = sorted(tar.getnames())
    assert "system/folder2/special text3.txt" in names and "system/folder2" in names
    old = [p for p, e in f.items() if isinstance(e.mtime, int) and e.mtime < fixtures.utc("202401010000.00")]
    assert len(old) >= 5


def test_nl2sh_fs3_fs4_fs5():
    f3 = _files(fixtures.build("nl2sh-fs3"))
    assert f3["/workspace/dir1/readonly.txt"].mode == 0o400 and f3["/workspace/dir1/all.txt"].mode == 0o777
    assert f3["/backup/file.txt"].data == b"new file\n\n"
    assert f3["/workspace/dir1/file.txt"].data == b"\0" * 4096
    assert b"add\\n" in f3["/workspace/dir1/sum.c"].data  # `\\n` under echo -e is a literal backslash-n
    empty = set(_files(fixtures.build("empty")))
    assert set(_files(fixtures.build("nl2sh-fs4"))) - {"/setup_nl2b_fs_4.sh", "/.gitignore"} == empty
    f5 = _files(fixtures.build("nl2sh-fs5"))
    assert len([p for p in f5 if p.startswith("/testbed/")]) < len([p for p in _files(fixtures.build("nl2sh-fs1"))
                                                                  if p.startswith("/testbed/")])


def test_peer_setup_script_comes_from_the_installed_package():
    if fixtures._icalfa_docker_dir() is None:
        pytest.skip("icalfa not installed: fixtures lack /setup_nl2b_fs_N.sh")
    f = _files(fixtures.build("nl2sh-fs1"))
    assert f["/setup_nl2b_fs_1.sh"].mode == 0o755 and f["/setup_nl2b_fs_1.sh"].data.startswith(b"#!/bin/bash")
    assert "/setup_nl2b_fs_1.sh" not in _files(fixtures.build("intercode-fs1"))


def test_intercode_variants_lack_alfa_additions():
    ic = _files(fixtures.build("intercode-fs1"))
    assert "/testbed/dir1/perms.txt" not in ic and "/testbed/dir1/subdir2/.gitkeep" not in ic
    assert "/testbed/hello.c" in ic and fixtures.build("intercode-fs1").env == {}
    assert _files(fixtures.build("intercode-fs3"))["/workspace/files.txt"].data == b"/workspace/dir2/foo.txt\n"


def test_echo_e_semantics():
    assert fixtures.echo_e("a\\tb\\\\n\\x41\\0101\\q") == b"a\tb\\nAA\\q\n"


def test_materialize_caches_by_content_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("VERIFIRST_CACHE", str(tmp_path))
    root = fixtures.materialize("nl2sh-fs1")
    assert root.name.startswith("nl2sh-fs1-") and root.parent == tmp_path / "fixtures"
    st = os.stat(root / "testbed/dir1/perms.txt")
    assert stat.S_IMODE(st.st_mode) == 0o1553
    assert int(os.stat(root / "testbed/recent.txt").st_mtime) == fixtures.utc("202305312359.59")
    assert os.readlink(root / "var/run") == "/run"
    assert fixtures.materialize("nl2sh-fs1") == root


def test_custom_fixture_and_bad_paths():
    fx = fixtures.custom("unit-custom", {"/data/a.txt": "hello\n", "/data/empty/": ""})
    f = _files(fx)
    assert f["/data/a.txt"].data == b"hello\n" and f["/data/empty"].kind == "dir"
    assert fixtures.build("unit-custom") is fx
    with pytest.raises(InputError, match="absolute"):
        fixtures.custom("unit-bad", {"rel/path": "x"})
    with pytest.raises(InputError, match="built in"):
        fixtures.custom("nl2sh-fs1", {})


# ---- issue 24: fixtures from a task directory -------------------------------------------

def _task_dir(tmp_path):
    d = tmp_path / "task"
    (d / "home/test/uploads").mkdir(parents=True)
    (d / "home/test/downloads").mkdir()
    (d / "home/test/uploads/file1.dat").write_text("one\n")
    run = d / "home/test/run.sh"
    run.write_text("#!/bin/bash\necho ran\n")
    run.chmod(0o755)
    (d / "home/test/downloads/link1.dat").symlink_to("../uploads/file1.dat")
    (d / "prompt").write_text("the task\n")
    return d


def test_custom_keeps_modes_executables_and_symlinks(tmp_path):
    fx = fixtures.custom("t-modes", {"/app/run.sh": {"content": "#!/bin/sh\necho hi\n", "mode": 0o755},
                                     "/app/data.txt": "x\n", "/app/link": {"symlink": "data.txt"},
                                     "/app/private/": {"dir": True, "mode": 0o700}})
    e = _files(fx)
    assert e["/app/run.sh"].mode == 0o755 and e["/app/data.txt"].mode == 0o644
    assert e["/app/link"].kind == "symlink" and e["/app/link"].data == b"data.txt"
    assert e["/app/private"].mode == 0o700
    root = tmp_path / "root"
    root.mkdir()
    fixtures.write_tree(fx, root)
    assert os.access(root / "app/run.sh", os.X_OK) and os.readlink(root / "app/link") == "data.txt"
    with pytest.raises(InputError, match="points above the fixture root"):
        fixtures.custom("t-bad", {"/app/l": {"symlink": "../../../etc/shadow"}})
    with pytest.raises(InputError, match="under the symlink"):
        fixtures.custom("t-bad2", {"/app/l": {"symlink": "/tmp"}, "/app/l/x": "escape"})
    with pytest.raises(InputError, match="mode"):
        fixtures.custom("t-bad3", {"/app/x": {"content": "", "mode": "755"}})


def test_from_dir_reads_a_task_directory(tmp_path):
    d = _task_dir(tmp_path)
    fx = fixtures.from_dir("t-task", d, "/", exclude=("prompt",))
    e = _files(fx)
    assert "/prompt" not in e and e["/home/test/run.sh"].mode == 0o755
    assert e["/home/test/downloads/link1.dat"].kind == "symlink"
    assert e["/home/test/downloads/link1.dat"].data == b"../uploads/file1.dat"
    assert e["/home/test/uploads/file1.dat"].data == b"one\n" and "/root/.bashrc" in e  # on the base
    at_app = _files(fixtures.from_dir("t-task-app", d / "home/test", "/app"))
    assert at_app["/app/run.sh"].mode == 0o755 and "/app/uploads/file1.dat" in at_app
    assert fixtures.from_dir("t-task", d, "/", exclude=("prompt",)).content_hash == fx.content_hash


def test_from_dir_refuses_links_out_of_the_task(tmp_path):
    d = _task_dir(tmp_path)
    (d / "home/test/evil").symlink_to("../../../outside")
    with pytest.raises(InputError, match="outside the task directory") as e:
        fixtures.read_task_dir(d)
    assert "home/test/evil" in str(e.value)
    (d / "home/test/evil").unlink()
    (d / "home/test/abs").symlink_to("/etc/passwd")
    with pytest.raises(InputError, match="outside the task directory"):
        fixtures.read_task_dir(d)
    with pytest.raises(InputError, match="not found"):
        fixtures.read_task_dir(tmp_path / "nope")


# ---- issue 37: absolute links inside a task tree ---------------------------------------------

def test_absolute_link_inside_the_mounted_tree_is_kept(tmp_path):
    d = _task_dir(tmp_path)
    (d / "home/test/uploads/file3.dat").write_text("three\n")
    (d / "home/test/downloads/soft-link3.dat").symlink_to("/home/test/uploads/file3.dat")
    e = _files(fixtures.from_dir("t-abs-home", d / "home", "/home"))
    link = e["/home/test/downloads/soft-link3.dat"]
    assert link.kind == "symlink" and link.data == b"/home/test/uploads/file3.dat"  # as the layout has it
    assert "/home/test/uploads/file3.dat" in e
    assert "/home/test/downloads/soft-link3.dat" in _files(fixtures.from_dir("t-abs-root", d, "/"))
    with pytest.raises(InputError, match="outside the task directory mounted at /app") as err:
        fixtures.from_dir("t-abs-app", d / "home", "/app")  # /home/... is not under /app
    assert "soft-link3.dat" in str(err.value)


def test_absolute_link_out_of_the_mounted_tree_is_refused(tmp_path):
    d = _task_dir(tmp_path)
    for target in ("/etc/passwd", "/home/../etc/shadow", "/homework/x"):
        (d / "home/test/abs").symlink_to(target)
        with pytest.raises(InputError, match="outside the task directory mounted at /home"):
            fixtures.from_dir("t-abs-out", d / "home", "/home")
        (d / "home/test/abs").unlink()
    (d / "home/test/rel").symlink_to("../../../etc")  # relative: above the mount point
    with pytest.raises(InputError, match="outside the task directory"):
        fixtures.from_dir("t-rel-out", d / "home", "/home")
