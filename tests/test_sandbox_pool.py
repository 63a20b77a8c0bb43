"""Warm sandboxes (_pool): a run in one sees and leaves exactly what a normal run does, each is
fresh, a broken one falls back to the normal start, and none outlives the process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from verifirst.verifiers.bash import _pool, fixtures
from verifirst.verifiers.bash.sandbox import Sandbox, _scratch_base
from conftest import procs_of_uid

# What a run sees of its own process and shell (aside: pid 1's command line, bwrap's, names the launcher;
# bash's initial environment block has SHLVL=0 from the launcher's exec, and another order).
VIEW = ("id; grep -E '^(Sig(Ign|Blk)|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status; "
        "ulimit -a; ls -l /proc/self/fd | tail -n +2 | awk '{print $9, $10, $11}' | sed 's/:\\[[0-9]*\\]//'; "
        "echo $$ $PPID $0 $SHLVL; "
        "ps -eo pid,ppid,comm --no-headers; trap -p; shopt | md5sum; declare -p | grep -v BASH_EXECUTION_STRING; "
        "echo \"$BASH_EXECUTION_STRING\" | md5sum; yes | head -1; echo ${PIPESTATUS[@]}; env | sort; umask; pwd; "
        "tr '\\0' '\\n' < /proc/$$/environ | grep -v ^SHLVL= | sort")


def _sandbox() -> Sandbox:
    try:
        sb = Sandbox(timeout_s=5.0)
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"no sandbox here: {exc}")
    if not sb.overlay:
        pytest.skip("warm sandboxes need the overlay")
    return sb


@pytest.fixture
def sb(monkeypatch):
    monkeypatch.setenv("VERIFIRST_SANDBOX_POOL", "1")
    _pool.clear()
    yield _sandbox()
    _pool.clear()


def _warm(sb: Sandbox, fixture: str = "nl2sh-fs1") -> None:
    """Two runs, so the fixture's key gets warm sandboxes, and time for them to be ready."""
    sb.run("true", fixture)
    sb.run("true", fixture)
    assert _pool.size() == _pool.PER_KEY
    time.sleep(0.3)


def test_a_warm_run_sees_what_a_normal_run_sees(sb, monkeypatch):
    _warm(sb)
    pooled = sb.run(VIEW, "nl2sh-fs1")
    assert pooled.timings["prepare_ms"] < 50  # it was warm: no bwrap start before the command
    monkeypatch.setenv("VERIFIRST_SANDBOX_POOL", "0")
    normal = sb.run(VIEW, "nl2sh-fs1")
    assert pooled.exit_code == normal.exit_code == 0, pooled.stderr
    assert pooled.stdout == normal.stdout
    assert pooled.stderr == normal.stderr


def test_each_warm_run_is_fresh_and_diffs_against_the_fixture(sb, monkeypatch):
    _warm(sb)
    cmd = "echo x > /testbed/new.txt; rm -rf /testbed/*; ls -a /testbed /tmp; mkdir /made; chmod 700 /root"
    runs = [sb.run(cmd, "nl2sh-fs1") for _ in range(3)]
    monkeypatch.setenv("VERIFIRST_SANDBOX_POOL", "0")
    normal = sb.run(cmd, "nl2sh-fs1")
    for r in runs:
        assert (r.stdout, r.exit_code, r.fs_diff.key()) == (normal.stdout, normal.exit_code, normal.fs_diff.key())
    gold, cand = sb.run_pair("ls /testbed | wc -l", "ls /testbed | wc -l", "nl2sh-fs1")
    assert gold.stdout == cand.stdout != "0\n" and gold.fs_diff.empty and cand.fs_diff.empty


def test_the_clock_starts_at_send_and_limits_hold(sb):
    sb2 = Sandbox(timeout_s=1.0)
    sb2.run("true", "empty")
    sb2.run("true", "empty")
    time.sleep(1.5)  # the warm sandboxes have waited past the timeout
    r = sb2.run("sleep 0.5; ulimit -n; echo done", "empty")
    assert r.stdout == f"{sb2.limits['nofile']}\ndone\n" and not r.timed_out
    r = sb2.run("sleep 5", "empty")
    assert r.timed_out and r.timings["total_ms"] < 4000


def test_a_broken_warm_sandbox_falls_back_to_a_normal_start(sb):
    _warm(sb)
    with _pool._LOCK:
        warm = [w for q in _pool._POOL.values() for w in q]
    for w in warm:
        w.kill()  # bwrap gone, and with it the launcher: the command cannot be sent
        w.proc.wait(timeout=5)
    time.sleep(0.2)
    r = sb.run("echo ok", "nl2sh-fs1")
    assert r.stdout == "ok\n" and r.exit_code == 0


def test_long_commands_and_sysadmin_start_normally(sb):
    _warm(sb)
    n = _pool.size()
    long = "echo " + "a" * (_pool.MAX_COMMAND_BYTES + 10) + " | wc -c"
    assert sb.run(long, "nl2sh-fs1").stdout == f"{_pool.MAX_COMMAND_BYTES + 11}\n"
    assert _pool.size() == n  # none taken
    sb.run("true", "sysadmin")
    sb.run("true", "sysadmin")
    assert _pool.size() == n  # sysadmin mode never gets one


def test_off_switch(monkeypatch):
    monkeypatch.setenv("VERIFIRST_SANDBOX_POOL", "0")
    _pool.clear()
    sb = _sandbox()
    for _ in range(3):
        sb.run("true", "nl2sh-fs1")
    assert _pool.size() == 0


CHILD = r"""
import json, os, sys
from verifirst.verifiers.bash import _bwrap, _pool
_bwrap.SANDBOX_UID = int(sys.argv[1])
from verifirst.verifiers.bash.sandbox import Sandbox
sb = Sandbox()
for _ in range(3):
    sb.run_pair("true", "true", "nl2sh-fs1")
print(json.dumps({"warm": _pool.size()}))
"""


def test_no_warm_sandbox_outlives_the_process(tmp_path):
    uid = 3_200_000 + os.getpid() % 50_000
    before = set(os.listdir(_scratch_base()[0]))
    p = subprocess.run([sys.executable, "-c", CHILD, str(uid)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "VERIFIRST_SANDBOX_POOL": "1"})
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["warm"] == _pool.PER_KEY
    deadline = time.time() + 5
    while time.time() < deadline and procs_of_uid(uid):
        time.sleep(0.05)
    assert procs_of_uid(uid) == []
    left = {d for d in set(os.listdir(_scratch_base()[0])) - before if d.startswith("run-")}
    if os.geteuid() == 0:  # unprivileged, other runs may share the scratch base
        assert left == set()



def test_a_forked_child_does_not_use_the_parents_warm_sandboxes(sb):
    _warm(sb)
    n = _pool.size()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        os.write(w, str(_pool.size()).encode())
        os._exit(0)
    os.close(w)
    got = os.read(r, 16)
    os.waitpid(pid, 0)
    os.close(r)
    assert got == b"0" and _pool.size() == n
    assert sb.run("echo ok", fixtures.resolve("nl2sh-fs1")).stdout == "ok\n"
