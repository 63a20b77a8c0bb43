"""bwrap's fork server (root, with a C compiler): runs start as forks of one bwrap already at the
sandbox uid, see exactly what a run started through the helper or setpriv sees, and without a
compiler runs fall back to the helper."""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from verifirst.verifiers.bash import _forkserver, _spawner
from verifirst.verifiers.bash.sandbox import Sandbox, _copy_parents, _ids, _scratch_base
from conftest import procs_of_uid
from test_sandbox_spawner import PROCESS_VIEW

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="the spawner is used as root only"),
              pytest.mark.skipif(_forkserver.library(tuple(_copy_parents())) is None,
                                 reason="no C compiler: runs use the Python helper")]


def _server(sb: Sandbox) -> _spawner.Spawner | None:
    return _spawner._SPAWNERS.get((_ids(), sb._bwrap.path))


def test_runs_are_forks_of_one_bwrap_at_the_sandbox_uid():
    sb = Sandbox()
    assert sb.run("echo hi").stdout == "hi\n"
    sp = _server(sb)
    assert isinstance(sp, _spawner.ForkServer)
    server = sp._proc.pid
    with open(f"/proc/{server}/status") as fh:
        uids = next(line for line in fh if line.startswith("Uid:")).split()[1:]
    assert uids == [str(_ids()[0])] * 4
    assert os.stat(f"/proc/{server}/environ").st_uid == 0  # not dumpable: runs at its uid cannot ptrace it
    assert os.path.realpath(f"/proc/{server}/exe") == os.path.realpath(sb._bwrap.path)
    cpu_before = sp.cpu_s
    for _ in range(3):
        assert sb.run("echo again").stdout == "again\n"
    assert _server(sb) is sp and sp._proc.poll() is None and sp.cpu_s > cpu_before


def test_a_run_sees_the_same_process_as_through_the_helper_and_setpriv(monkeypatch):
    sb = Sandbox()
    served = sb.run(PROCESS_VIEW + "; grep -c forkserver /proc/self/maps", "nl2sh-fs1")
    assert isinstance(_server(sb), _spawner.ForkServer)
    monkeypatch.setenv("VERIFIRST_SANDBOX_FORKSERVER", "0")
    helped = sb.run(PROCESS_VIEW + "; grep -c forkserver /proc/self/maps", "nl2sh-fs1")
    monkeypatch.setenv("VERIFIRST_SANDBOX_SPAWNER", "0")
    setpriv = sb.run(PROCESS_VIEW + "; grep -c forkserver /proc/self/maps", "nl2sh-fs1")
    assert served.exit_code == 1 and helped.exit_code == 1 and setpriv.exit_code == 1, served.stderr  # grep: 0 found
    assert served.stdout == helped.stdout == setpriv.stdout
    assert served.stderr == helped.stderr == setpriv.stderr
    assert "LD_PRELOAD" not in served.stdout and "FORKSERVER" not in served.stdout
    assert "141 0" in served.stdout  # SIGPIPE at its default, as Popen leaves it


def test_the_server_starts_bwrap_only_and_refuses_a_malformed_request():
    sb = Sandbox()
    sb.run("true")
    sp = _server(sb)
    with pytest.raises(ValueError, match="runs .* only, not /bin/bash"):
        sp.popen(["/bin/bash", "-c", "true"], {}, [])
    rid = next(sp._ids)
    with sp._send_lock:  # two descriptors announced, none sent
        sp._sock.sendmsg([sp._message(rid, [sp.binary, "--version"], {}, [1, 2])])
    reply = sp.reply(rid)
    assert reply["errno"] == 22 and "malformed request" in reply["error"]
    assert sb.run("echo still").stdout == "still\n"


def test_no_compiler_falls_back_to_the_helper(monkeypatch, tmp_path):
    monkeypatch.setattr(_forkserver, "_compiler", lambda: None)
    _forkserver.library.cache_clear()
    try:
        assert _forkserver.library((tmp_path,)) is None
        key = (_ids(), "/no/such/bwrap")
        assert _spawner.spawner(_ids(), binary=key[1], build_dirs=lambda: [tmp_path]) is _spawner.spawner(_ids())
        assert _spawner._SPAWNERS[key] is None  # tried once, not again for every run
    finally:
        _spawner._SPAWNERS.pop((_ids(), "/no/such/bwrap"), None)
        _forkserver.library.cache_clear()


def test_a_failed_build_is_not_cached_as_a_library(monkeypatch, tmp_path):
    monkeypatch.setattr(_forkserver, "_compiler", lambda: "/bin/false")
    _forkserver.library.cache_clear()
    try:
        assert _forkserver.library((tmp_path,)) is None
        assert not list(tmp_path.rglob("*.so"))
    finally:
        _forkserver.library.cache_clear()


def test_timeouts_kill_served_runs_and_their_children():
    sb = Sandbox(timeout_s=1.0)
    t0 = time.monotonic()
    r = sb.run("sleep 30 & setsid sleep 30 & sleep 30")
    assert r.timed_out and time.monotonic() - t0 < 6
    assert isinstance(_server(sb), _spawner.ForkServer)


def test_a_script_named_bwrap_is_not_served(tmp_path):
    """A wrapper script gets the helper: preloading into the shell would serve the shell's main."""
    real = Sandbox()._bwrap
    wrapper = _scratch_base()[0] / f"wrapper-{os.getpid()}"
    wrapper.mkdir(mode=0o755, exist_ok=True)
    script = wrapper / "bwrap"
    script.write_text(f"#!/bin/sh\nexec {real.path} \"$@\"\n")  # the copy the sandbox uid can run
    script.chmod(0o755)
    try:
        sb = Sandbox(bwrap=str(script))
        assert sb.run("echo through").stdout == "through\n"
        assert _server(sb) is None and (_ids(), str(script)) in _spawner._SPAWNERS
    finally:
        _spawner._SPAWNERS.pop((_ids(), str(script)), None)
        shutil.rmtree(wrapper, ignore_errors=True)


def test_the_library_changes_nothing_in_another_program():
    """Preloaded into a process whose executable is not the one named, it runs that program's main."""
    lib = _forkserver.library(tuple(_copy_parents()))
    bw = Sandbox()._bwrap.path
    r, w = os.pipe()
    try:
        env = {"LD_PRELOAD": lib, "VERIFIRST_FORKSERVER_FD": str(r), "VERIFIRST_FORKSERVER_EXE": "/elsewhere"}
        p = subprocess.run([bw, "--version"], env=env, capture_output=True, text=True, pass_fds=[r], timeout=10)
    finally:
        os.close(r)
        os.close(w)
    alone = subprocess.run([bw, "--version"], env={}, capture_output=True, text=True, timeout=10)
    assert p.returncode == alone.returncode == 0 and p.stdout == alone.stdout != "", p.stderr


UNPRIVILEGED_VIEW = """
import json, os, sys
from verifirst.verifiers.bash import _spawner
from verifirst.verifiers.bash.sandbox import Sandbox
view = sys.argv[1]
sb = Sandbox()
served = sb.run(view)
kinds = sorted(type(s).__name__ for s in _spawner._SPAWNERS.values() if s is not None)
os.environ["VERIFIRST_SANDBOX_FORKSERVER"] = "0"
direct = sb.run(view)
print(json.dumps({"uid": os.getuid(), "kinds": kinds, "served": [served.exit_code, served.stdout, served.stderr],
                  "direct": [direct.exit_code, direct.stdout, direct.stderr]}))
"""


def test_not_root_runs_are_forks_too_and_see_what_a_direct_start_sees():
    """As an unprivileged user the fork server runs as that user; a run sees what bwrap started
    with Popen shows it."""
    from test_security import _shim, _unprivileged_available

    why = _unprivileged_available()
    if why:
        pytest.skip(why)
    shim = _shim()
    env = {k: v for k, v in os.environ.items() if k != "VERIFIRST_SCRATCH"}
    env.update(PYTHONPATH=shim, HOME="/tmp", PYTHONDONTWRITEBYTECODE="1")
    try:
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
                            UNPRIVILEGED_VIEW, PROCESS_VIEW], capture_output=True, text=True, env=env, timeout=120,
                           cwd="/tmp")
    finally:
        shutil.rmtree(shim, ignore_errors=True)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    assert out["uid"] == 65534 and out["kinds"] == ["ForkServer"]
    assert out["served"][0] == 0, out["served"][2]
    assert out["served"] == out["direct"]
    assert "LD_PRELOAD" not in out["served"][1] and "141 0" in out["served"][1]


@pytest.mark.parametrize("served", ["1", "0"])
def test_a_command_too_long_for_exec_raises_as_popen_would(monkeypatch, served):
    """Over 128 KiB, one argv string no exec accepts: the fork server (which execs no bwrap) raises
    what Popen raises for the helper's exec, rather than letting bwrap fail to exec bash."""
    monkeypatch.setenv("VERIFIRST_SANDBOX_FORKSERVER", served)
    sb = Sandbox()
    assert sb.run(": " + "x" * 100_000 + "; echo ok").stdout == "ok\n"
    with pytest.raises(OSError) as exc:
        sb.run(": " + "x" * 140_000 + "; echo ok")
    assert exc.value.errno == errno.E2BIG


def test_a_server_that_dies_takes_its_runs_with_it_and_the_next_run_gets_a_new_one():
    import signal
    import threading

    sb = Sandbox(timeout_s=60)
    sb.run("true")
    old = _server(sb)
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("r", sb.run("sleep 30")))
    t0 = time.monotonic()
    t.start()
    time.sleep(0.5)
    os.kill(old._proc.pid, signal.SIGKILL)
    t.join(timeout=20)
    assert not t.is_alive() and time.monotonic() - t0 < 15
    assert got["r"].signal == signal.SIGKILL and got["r"].exit_code == -signal.SIGKILL
    assert sb.run("echo again").stdout == "again\n"
    new = _server(sb)
    assert isinstance(new, _spawner.ForkServer) and new is not old and new._proc.pid != old._proc.pid
    spawners = {sp._proc.pid for sp in _spawner._SPAWNERS.values() if sp is not None}  # other tests' too
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and set(procs_of_uid(_ids()[0])) != spawners:
        time.sleep(0.05)
    assert set(procs_of_uid(_ids()[0])) == spawners and old._proc.pid not in spawners  # its runs are gone too


def test_the_library_is_built_and_used_only_where_no_one_else_can_write(tmp_path):
    """Whoever could replace the library would run code in every sandbox run: a parent directory
    others can write, or a library directory that is not ours, is passed over."""
    _forkserver.library.cache_clear()
    try:
        open_dir = tmp_path / "open"
        open_dir.mkdir()
        open_dir.chmod(0o777)
        assert _forkserver.library((open_dir,)) is None and not list(open_dir.iterdir())
        planted = tmp_path / "planted"
        ours = tmp_path / "ours"
        built = _forkserver.library((ours,))
        assert built is not None and oct(os.stat(Path(built).parent).st_mode & 0o777) == "0o755"
        planted.mkdir(mode=0o711)
        home = planted / Path(built).parent.name
        home.mkdir()
        shutil.copy(built, home / _forkserver.NAME)
        os.chown(home, 65534, 65534)  # someone else's directory, under the name ours would have
        _forkserver.library.cache_clear()
        assert _forkserver.library((planted, ours)) == built  # passed over for the next parent
    finally:
        _forkserver.library.cache_clear()
