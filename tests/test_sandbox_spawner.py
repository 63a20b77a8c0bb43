"""The sandbox spawner (root only): runs start from one helper already at the sandbox uid, and
see exactly what a run started through setpriv sees."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from verifirst.verifiers.bash import _spawner
from verifirst.verifiers.bash.sandbox import Sandbox, _ids, _scratch_base
from conftest import procs_of_uid

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the spawner is used as root only")

# What a run sees of its own process: ids, signal dispositions, capabilities, limits, descriptors.
PROCESS_VIEW = ("id; grep -E '^(Sig(Ign|Blk)|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status; "
                "ulimit -a; ls /proc/self/fd; echo $$ $PPID; ps -eo pid,ppid,comm --no-headers; trap -p; "
                "yes | head -1; echo ${PIPESTATUS[@]}; env | sort")


def test_runs_go_through_one_spawner_at_the_sandbox_uid():
    sb = Sandbox()
    sb.run("true")
    sp = _spawner.spawner(_ids())
    assert sp is not None
    helper = sp._proc.pid
    with open(f"/proc/{helper}/status") as fh:
        uids = next(line for line in fh if line.startswith("Uid:")).split()[1:]
    assert uids == [str(_ids()[0])] * 4
    assert os.stat(f"/proc/{helper}/environ").st_uid == 0  # not dumpable: runs at its uid cannot ptrace it
    for _ in range(3):
        assert sb.run("echo hi").stdout == "hi\n"
    assert _spawner.spawner(_ids()) is sp and sp._proc.poll() is None


def test_a_run_sees_the_same_process_as_through_setpriv(monkeypatch):
    sb = Sandbox()
    via_spawner = sb.run(PROCESS_VIEW, "nl2sh-fs1")
    monkeypatch.setenv("VERIFIRST_SANDBOX_SPAWNER", "0")
    assert _spawner.spawner(_ids()) is None
    via_setpriv = sb.run(PROCESS_VIEW, "nl2sh-fs1")
    assert via_spawner.exit_code == via_setpriv.exit_code == 0, via_spawner.stderr
    assert via_spawner.stdout == via_setpriv.stdout
    assert via_spawner.stderr == via_setpriv.stderr
    assert "141 0" in via_spawner.stdout  # SIGPIPE at its default, as Popen leaves it


def test_a_run_that_cannot_start_raises_as_popen_would():
    sp = _spawner.spawner(_ids())
    p = sp.popen(["/nonexistent/bwrap"], {}, [])
    with pytest.raises(FileNotFoundError):
        p.wait()
    with pytest.raises(FileNotFoundError):
        p.pid  # noqa: B018
    assert p.stdout.read() == b"" and p.stderr.read() == b""
    p.stdout.close()
    p.stderr.close()


def test_passed_descriptors_keep_their_numbers_and_nothing_else_leaks():
    sp = _spawner.spawner(_ids())
    r, w = os.pipe()
    os.write(w, b"through\n")
    os.close(w)
    try:
        q = sp.popen(["/bin/bash", "-c", f"ls /proc/self/fd; cat <&{r}"], {"PATH": "/bin"}, [r])
    finally:
        os.close(r)
    assert q.wait(timeout=10) == 0
    out = q.stdout.read().decode().split()
    q.stdout.close()
    q.stderr.close()
    fds = sorted(int(x) for x in out[:-1])
    assert out[-1] == "through"
    assert set(fds) - {3} == {0, 1, 2, r} - {3}  # 3: ls's own directory handle, when r is not 3


def test_timeouts_and_kills_reach_spawned_runs():
    sb = Sandbox(timeout_s=1.0)
    t0 = time.monotonic()
    r = sb.run("sleep 30 & setsid sleep 30 & sleep 30")
    assert r.timed_out and time.monotonic() - t0 < 6


@pytest.mark.parametrize("kind", ["Spawner", "ForkServer"])
def test_the_spawner_ends_with_its_owner(kind, monkeypatch):
    """An owner that exits, or is killed, leaves no spawner (the helper, or bwrap's fork server)
    and no run behind."""
    from verifirst.verifiers.bash import _forkserver
    from verifirst.verifiers.bash.sandbox import _copy_parents

    if kind == "ForkServer" and _forkserver.library(tuple(_copy_parents())) is None:
        pytest.skip("no C compiler: no fork server")
    monkeypatch.setenv("VERIFIRST_SANDBOX_FORKSERVER", "1" if kind == "ForkServer" else "0")
    code = ("import json, sys, time\n"
            "from verifirst.verifiers.bash import _bwrap, _spawner\n"
            f"_bwrap.SANDBOX_UID = {3_200_000 + os.getpid() % 50_000 + (50_000 if kind == 'ForkServer' else 0)}\n"
            "from verifirst.verifiers.bash.sandbox import Sandbox, _ids\n"
            "sb = Sandbox(timeout_s=60)\n"
            "sb.run('true')\n"
            "sp = _spawner._SPAWNERS.get((_ids(), sb._bwrap.path)) or _spawner._SPAWNERS[_ids()]\n"
            "print(json.dumps([type(sp).__name__, sp._proc.pid, _ids()[0]]), flush=True)\n"
            "if sys.argv[1] == 'hang':\n"
            "    sb.run('sleep 60')\n")
    for how in ("exit", "hang"):
        p = subprocess.Popen([sys.executable, "-c", code, how], stdout=subprocess.PIPE, text=True)
        started, spawner_pid, uid = json.loads(p.stdout.readline())
        assert started == kind
        if how == "hang":
            time.sleep(0.5)
            assert len(procs_of_uid(uid)) > 1  # the spawner (a helper or server: at the uid) and the run
            p.kill()
        p.wait(timeout=30)
        p.stdout.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (os.path.exists(f"/proc/{spawner_pid}") or procs_of_uid(uid)):
            time.sleep(0.05)
        assert not os.path.exists(f"/proc/{spawner_pid}"), how
        assert procs_of_uid(uid) == [], how
    base = _scratch_base()[0]
    for entry in os.listdir(base):  # what the killed owner could not remove
        if os.stat(base / entry).st_uid == uid:
            shutil.rmtree(base / entry, ignore_errors=True)


def test_a_forked_child_starts_its_own_spawner():
    sb = Sandbox()
    sb.run("true")
    parent_helper = _spawner.spawner(_ids())._proc.pid
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            out = sb.run("echo child").stdout
            os.write(w, json.dumps([out, _spawner.spawner(_ids())._proc.pid]).encode())
        finally:
            os._exit(0)
    os.close(w)
    got = b""
    while chunk := os.read(r, 4096):
        got += chunk
    os.close(r)
    os.waitpid(pid, 0)
    out, child_helper = json.loads(got)
    assert out == "child\n" and child_helper != parent_helper
    assert sb.run("echo parent").stdout == "parent\n"
    assert _spawner.spawner(_ids())._proc.pid == parent_helper



def _orphan_zombies(uid: int) -> list[int]:
    """The sandbox uid's zombies that the host's init holds (their parent is gone)."""
    found = []
    for pid in procs_of_uid(uid):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and fields[1] == "1":
            found.append(pid)
    return found


@pytest.mark.parametrize("forkserver", ["1", "0"])
def test_runs_leave_no_zombies_for_the_host_init(monkeypatch, forkserver):
    """A run's sandbox init outlives bwrap's monitor for a moment: the spawner adopts and reaps it
    (a subreaper). Left to the host's init, such zombies piled up (some 200 after 300 runs) and
    counted against the uid's process limit: sysadmin runs, capped at 256 processes, failed to
    start."""
    monkeypatch.setenv("VERIFIRST_SANDBOX_FORKSERVER", forkserver)
    sb = Sandbox()
    before = set(_orphan_zombies(_ids()[0]))  # another test's killed spawner may have left some
    for _ in range(120):
        sb.run("true")
    assert set(_orphan_zombies(_ids()[0])) - before == set()
    r = sb.run("useradd -m alice && id -u alice", "sysadmin")
    assert r.exit_code == 0 and r.stdout.strip().isdigit(), r.stderr
