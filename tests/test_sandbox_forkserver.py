"""vf-sandbox's fork server, the one way a run starts (root, with a C compiler): runs are forks of
one server already at the sandbox uid, see exactly what a run that execs the launcher sees, and
the server ends with its owner, refuses what is not its launcher, and leaves no zombies."""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from verifirst.verifiers.bash import _launcher, _spawner
from verifirst.verifiers.bash.sandbox import Sandbox, _copy_parents, _ids, _scratch_base
from conftest import procs_of_uid

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="the fork server is used as root here"),
              pytest.mark.skipif(Sandbox()._bwrap.kind != _launcher.KIND, reason="no vf-sandbox built here")]

# What a run sees of its own process: ids, signal dispositions, capabilities, limits, descriptors.
PROCESS_VIEW = ("id; grep -E '^(Sig(Ign|Blk)|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status; "
                "ulimit -a; ls /proc/self/fd; echo $$ $PPID; ps -eo pid,ppid,comm --no-headers; trap -p; "
                "yes | head -1; echo ${PIPESTATUS[@]}; env | sort")


def _server(sb: Sandbox) -> _spawner.ForkServer | None:
    return _spawner._SPAWNERS.get((_ids(), sb._bwrap.path))


def test_runs_are_forks_of_one_server_at_the_sandbox_uid():
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


def test_a_run_sees_the_same_process_as_when_the_launcher_is_execd(monkeypatch):
    sb = Sandbox()
    served = sb.run(PROCESS_VIEW, "nl2sh-fs1")
    assert isinstance(_server(sb), _spawner.ForkServer)
    monkeypatch.setenv("VERIFIRST_SANDBOX_FORKSERVER", "0")
    execd = sb.run(PROCESS_VIEW, "nl2sh-fs1")
    assert served.exit_code == execd.exit_code == 0, served.stderr
    assert served.stdout == execd.stdout and served.stderr == execd.stderr
    assert "FORKSERVER" not in served.stdout and "141 0" in served.stdout  # SIGPIPE at its default


def test_the_server_starts_its_launcher_only_and_refuses_a_malformed_request():
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


def test_timeouts_kill_served_runs_and_their_children():
    sb = Sandbox(timeout_s=1.0)
    t0 = time.monotonic()
    r = sb.run("sleep 30 & setsid sleep 30 & sleep 30")
    assert r.timed_out and time.monotonic() - t0 < 6
    assert isinstance(_server(sb), _spawner.ForkServer)


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


def test_the_server_ends_with_its_owner():
    """An owner that exits, or is killed, leaves no fork server and no run behind."""
    code = ("import json, sys, time\n"
            "from verifirst.verifiers.bash import _bwrap, _spawner\n"
            f"_bwrap.SANDBOX_UID = {3_200_000 + os.getpid() % 50_000}\n"
            "from verifirst.verifiers.bash.sandbox import Sandbox, _ids\n"
            "sb = Sandbox(timeout_s=60)\n"
            "sb.run('true')\n"
            "sp = _spawner._SPAWNERS[(_ids(), sb._bwrap.path)]\n"
            "print(json.dumps([type(sp).__name__, sp._proc.pid, _ids()[0]]), flush=True)\n"
            "if sys.argv[1] == 'hang':\n"
            "    sb.run('sleep 60')\n")
    for how in ("exit", "hang"):
        p = subprocess.Popen([sys.executable, "-c", code, how], stdout=subprocess.PIPE, text=True)
        started, spawner_pid, uid = json.loads(p.stdout.readline())
        assert started == "ForkServer"
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
    parent_helper = _server(sb)._proc.pid
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            out = sb.run("echo child").stdout
            os.write(w, json.dumps([out, _server(sb)._proc.pid]).encode())
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
    assert _server(sb)._proc.pid == parent_helper



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
    """A run's sandbox init outlives its monitor for a moment: the server adopts and reaps it
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
