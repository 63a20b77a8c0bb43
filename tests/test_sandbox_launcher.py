"""vf-sandbox, the sandbox's own launcher: a command sees what it sees under bubblewrap (ids,
capabilities, limits, mounts, /dev, /proc, namespaces, environment, file-system effect), but
for the differences named here; it refuses what it does not implement, never follows a symbolic
link out of the root, and the sandbox falls back to bubblewrap wherever it cannot be used."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from verifirst.verifiers.bash import _bwrap, _launcher
from verifirst.verifiers.bash.sandbox import Sandbox, SandboxUnavailable, _copy_parents, _scratch_base

pytestmark = pytest.mark.skipif(next(_launcher.built(tuple(_copy_parents())), None) is None,
                                reason="no C compiler: the sandbox uses bubblewrap")

VIEW = ("id; grep -E '^(Sig(Ign|Blk)|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status; "
        "ulimit -a; ulimit -Ha; ls -l /proc/self/fd | tail -n +2 | awk '{print $9, $10, $11}'; echo $$ $PPID; "
        "ps -eo pid,ppid,pgid,sid,comm --no-headers; trap -p; umask; pwd; env | sort; "
        "tr '\\0' '\\n' < /proc/$$/environ; cut -d' ' -f4- /proc/self/mountinfo; "
        "ls -la --time-style=+ / /dev /proc/$$/ns; hostname; cat /proc/self/uid_map /proc/self/gid_map "
        "/proc/self/setgroups /proc/sys/user/max_user_namespaces; unshare -U true; echo userns=$?; "
        "ip -o link; cat /proc/self/cgroup; echo f > /made; mkdir -p /tmp/d && chmod 700 /tmp/d; rm -f /etc/hostname")


def _bubblewrap(monkeypatch) -> Sandbox:
    monkeypatch.setenv("VERIFIRST_SANDBOX_LAUNCHER", "bwrap")
    try:
        sb = Sandbox()
    finally:
        monkeypatch.delenv("VERIFIRST_SANDBOX_LAUNCHER")
    assert sb._bwrap.kind == "bwrap"
    return sb


def _normal(text: str, launcher: str) -> str:
    """What differs between any two runs (pipe and namespace inodes, the scratch paths), masked."""
    text = re.sub(r"(pipe|user|net|mnt|pid|ipc|uts|cgroup|time)(_for_children)?:\[\d+\]", r"\1:[N]", text)
    text = re.sub(r"/(oldroot/)?(dev/shm/verifirst-\d+|mnt)/[^,\s]+", "SCRATCH", text)
    text = re.sub(r"(lowerdir|upperdir|workdir)=[^,\s]+", r"\1=SCRATCH", text)  # vf-sandbox: relative names
    return re.sub(rf"^(\s+1\s+0\s+1\s+1) {launcher}$", r"\1 LAUNCHER", text, flags=re.M)


@pytest.mark.parametrize("fixture", ["nl2sh-fs1", "sysadmin"])
def test_a_command_sees_what_it_sees_under_bubblewrap(fixture, monkeypatch):
    ours, theirs = Sandbox(), _bubblewrap(monkeypatch)
    assert ours._bwrap.kind == "vf-sandbox" and ours.backend.startswith("vf-sandbox 1.1.2")
    a, b = ours.run(VIEW, fixture), theirs.run(VIEW, fixture)
    assert (a.exit_code, a.backend, b.backend) == (b.exit_code, "vf-sandbox", "bwrap"), a.stderr
    assert a.stderr == b.stderr and a.fs_diff == b.fs_diff and a.fs_diff.added
    # vf-sandbox names the overlay's layers without host paths; bubblewrap finds them at /mnt (_layers_at)
    assert "/dev/shm/verifirst" not in a.stdout + b.stdout
    assert "lowerdir=/oldroot/mnt/" in b.stdout or "lowerdir=" not in b.stdout
    mine, bwraps = _normal(a.stdout, "vf-sandbox").splitlines(), _normal(b.stdout, "bwrap").splitlines()
    # the differences, on purpose: the overlay root is nosuid,nodev too; /proc/irq and /proc/bus are
    # covered read-only (bwrap leaves them when it runs unprivileged); the --userns descriptor is
    # not left open in the command (bwrap leaves it as fd 3)
    assert "Permission denied" not in a.stderr + b.stderr
    root = "/ / rw,nosuid,nodev,relatime - overlay overlay rw,lowerdir=SCRATCH,upperdir=SCRATCH,workdir=SCRATCH,"
    assert any(line.startswith(root) for line in mine)
    covered = [line for line in mine if re.match(r"/(irq|bus) /proc/\1 ro,nosuid,nodev,noexec", line)]
    assert len(covered) == 2
    mine = [line.replace("rw,nosuid,nodev,relatime - overlay", "rw,relatime - overlay") for line in mine
            if line not in covered]
    # under bubblewrap pid 1 is bubblewrap's own (dumpable): its memory and maps are covered (vf-sandbox's is not)
    pid1 = [line for line in bwraps if re.match(r"/null /proc/1/(task/1/)?(mem|maps|smaps|numa_maps) ro,", line)]
    assert len(pid1) == 8 and not [line for line in mine if " /proc/1/" in line]
    bwraps = [line for line in bwraps if line not in pid1]
    # /sys is the same under both: read-only, with the host's CPUs only (no host devices, NICs, cgroup tree)
    sys_mine = [line.split(" - ")[0].split(" ", 1)[1] for line in mine if re.match(r"/\S* /sys(/| )", line)]
    assert sys_mine == ["/sys ro,nosuid,nodev,relatime", "/sys/devices/system/cpu ro,nosuid,nodev,relatime"]
    # and /dev is sized: it holds mount points and links only, and a run must not fill memory through it
    dev = [i for i, line in enumerate(mine) if " /dev rw," in line and "size=64k,nr_inodes=256," in line]
    assert len(dev) == 1
    mine[dev[0]] = mine[dev[0]].replace("size=64k,nr_inodes=256,", "")
    if fixture == "sysadmin":
        held = [line for line in bwraps if re.fullmatch(r"\d+ -> user:\[N\]", line)]
        assert len(held) == 1 and not [line for line in mine if re.fullmatch(r"\d+ -> user:\[N\]", line)]
        bwraps = [line for line in bwraps if line not in held]
        bwraps = [re.sub(r"^(\d+) -> /proc/\d+/fd$", "FD -> /proc/N/fd", line) for line in bwraps]
        mine = [re.sub(r"^(\d+) -> /proc/\d+/fd$", "FD -> /proc/N/fd", line) for line in mine]
    # bubblewrap's signals are reset by `env --default-signal`, through glibc, which refuses glibc's own
    # 32 and 33: a host that left those ignored (a CI chain did) keeps them ignored there, and only there
    mine_ign = [line for line in mine if line.startswith("SigIgn:")]
    assert mine_ign == ["SigIgn:\t0000000000000000"]
    glibc_own = 1 << 31 | 1 << 32
    bwraps = [f"SigIgn:\t{int(line.split()[1], 16) & ~glibc_own:016x}" if line.startswith("SigIgn:") else line
              for line in bwraps]
    proc_links = re.compile(r"^(dr-xr-xr-x) +\d+ (nobody nogroup +0 +proc)$")  # counts /proc's entries
    # ls pads its columns to the widest entry, and /proc's link count (the host's process count) sets it
    ls_row = re.compile(r"^[-dlcbps][-rwxsStT]{9} ")
    mine, bwraps = ([re.sub(" +", " ", proc_links.sub(r"\1 N \2", line)) if ls_row.match(line) else line
                     for line in lines] for lines in (mine, bwraps))
    assert mine == bwraps


def test_runs_keep_their_exit_status_signal_limits_and_isolation():
    sb = Sandbox(timeout_s=2.0)
    assert sb._bwrap.kind == "vf-sandbox"
    assert sb.run("exit 7").exit_code == 7
    r = sb.run("kill -SEGV $$")
    assert (r.exit_code, r.signal) == (139, 11)
    r = sb.run("sleep 30 & setsid sleep 30 & echo started")  # what the command leaves dies with it
    assert r.stdout == "started\n" and r.timings["total_ms"] < 1500
    r = sb.run("useradd -m bob && su bob -c id && passwd -l bob", "sysadmin")
    assert r.exit_code == 0 and "uid=1001(bob)" in r.stdout, r.stderr


def _launch(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    exe = next(_launcher.built(tuple(_copy_parents())))
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=10, cwd=cwd,
                          stdin=subprocess.DEVNULL)


def test_it_refuses_what_it_does_not_implement():
    base = ["--unshare-all", "--unshare-user", "--clearenv", "--bind", "/nonexistent", "/"]
    for bad, said in [(["--bind-try", "/a", "/b"], "unsupported option --bind-try"),
                      (["--uid", "1000"], "only id 0 inside"),
                      (["--cap-add", "CAP_NOPE"], "unknown capability CAP_NOPE"),
                      (["--setenv", "A"], "--setenv takes more arguments")]:
        p = _launch(*base, *bad, *([] if bad[0] == "--setenv" else ["--", "/bin/true"]))
        assert p.returncode == 1 and said in p.stderr, (bad, p.stderr)
    p = _launch("--unshare-all", "--unshare-user", "--bind", "/nonexistent", "/", "--", "/bin/true")
    assert p.returncode == 1 and "--clearenv is required" in p.stderr
    p = _launch("--unshare-user", "--unshare-pid", "--clearenv", "--bind", "/nonexistent", "/", "--", "/bin/true")
    assert p.returncode == 1 and "every namespace must be unshared" in p.stderr
    p = _launch("--unshare-all", "--clearenv", "--ro-bind", "/usr", "/usr", "--", "/bin/true")
    assert p.returncode == 1 and "the first mount must be the root" in p.stderr
    assert _launch("--version").stdout == "vf-sandbox 1.1.2\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="runs the launcher directly as root, where it can map id 0")
def test_a_mount_point_that_is_a_symbolic_link_is_refused_not_followed():
    """A root whose `usr` points elsewhere: bwrap would follow it; we stop before mounting there."""
    with tempfile.TemporaryDirectory(dir=_scratch_base()[0]) as d:
        root, outside = Path(d, "root"), Path(d, "outside")
        root.mkdir()
        outside.mkdir()
        (root / "usr").symlink_to(outside)
        p = _launch("--unshare-all", "--unshare-user", "--die-with-parent", "--clearenv", "--bind", str(root), "/",
                    "--ro-bind", "/usr", "/usr", "--", "/bin/true")
        assert p.returncode == 1 and "mount point /usr" in p.stderr and "symbolic link" in p.stderr
        assert not any(outside.iterdir())


def _fake_launcher(body: str) -> str:
    d = Path(tempfile.mkdtemp(dir=_scratch_base()[0], prefix="fake-launcher-"))
    d.chmod(0o755)
    exe = d / "vf-sandbox"
    exe.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && echo 'vf-sandbox 1.1.2' && exit 0\n{body}\n")
    exe.chmod(0o755)
    return str(exe)


def test_a_launcher_that_cannot_build_the_sandbox_here_falls_back_to_bubblewrap(monkeypatch):
    broken = _fake_launcher("echo 'vf-sandbox: create the namespaces: Operation not permitted' >&2; exit 1")
    monkeypatch.setattr(_launcher, "built", lambda parents: (broken,))
    monkeypatch.setattr(_bwrap, "_FOUND", {})
    try:
        sb = Sandbox()
        assert sb._bwrap.kind == "bwrap" and _launcher.refused()
        assert sb.run("echo hi").stdout == "hi\n" and Sandbox()._bwrap.kind == "bwrap"  # not tried again
    finally:
        _launcher.refuse(False)
        shutil.rmtree(Path(broken).parent)


def test_bubblewrap_when_asked_for_or_when_nothing_compiles(monkeypatch):
    monkeypatch.setattr(_bwrap, "_FOUND", {})
    named = _bubblewrap(monkeypatch)._bwrap.path
    assert Sandbox(bwrap=named)._bwrap.kind == "bwrap"
    monkeypatch.setenv("VERIFIRST_BWRAP", named)
    assert Sandbox()._bwrap.kind == "bwrap"
    monkeypatch.delenv("VERIFIRST_BWRAP")
    monkeypatch.setattr(_launcher, "_compiler", lambda: None)
    _launcher._built_in.cache_clear()
    try:
        monkeypatch.setattr(_bwrap, "_FOUND", {})
        assert Sandbox()._bwrap.kind == "bwrap"
    finally:
        _launcher._built_in.cache_clear()


def test_a_launcher_the_sandbox_uid_cannot_run_is_passed_over_for_the_next_place(monkeypatch, tmp_path):
    """The first place (the scratch base) may be mounted noexec: the next one's build is used, and
    a place after a launcher that runs is never built in."""
    real = next(_launcher.built(tuple(_copy_parents())))
    unrunnable = tmp_path / "vf-sandbox"
    unrunnable.write_text("#!/bin/sh\necho 'vf-sandbox 1.1.2'\n")
    unrunnable.chmod(0o644)
    places = {Path("/first"): str(unrunnable), Path("/second"): real}
    asked = []
    monkeypatch.setattr(_launcher, "_built_in", lambda parent: asked.append(parent) or places.get(parent))
    from verifirst.verifiers.bash.sandbox import _ids
    found = _bwrap._own_launcher(_ids(), lambda: [Path("/first"), Path("/second"), Path("/third")])
    assert found is not None and found.path == real and asked == [Path("/first"), Path("/second")]


@pytest.mark.skipif(os.geteuid() != 0, reason="the fork server runs at the sandbox uid as root only")
@pytest.mark.parametrize("fixture", ["nl2sh-fs1", "sysadmin"])
def test_runs_die_with_the_server_that_started_them(fixture):
    """--die-with-parent holds in both modes (sysadmin enters its user namespace first, which
    changes the monitor's credentials): a run whose fork server is killed ends at once."""
    import signal
    import threading
    import time

    from verifirst.verifiers.bash import _spawner
    from verifirst.verifiers.bash.sandbox import _ids

    sb = Sandbox(timeout_s=60)
    sb.run("true", fixture)
    server = _spawner._SPAWNERS[(_ids(), sb._bwrap.path)]
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("r", sb.run("sleep 30 & sleep 31", fixture)))
    t0 = time.monotonic()
    t.start()
    time.sleep(0.5)
    os.kill(server._proc.pid, signal.SIGKILL)
    t.join(timeout=20)
    assert not t.is_alive() and time.monotonic() - t0 < 15 and got["r"].signal == signal.SIGKILL
    assert sb.run("echo again", fixture).stdout == "again\n"
    alive = lambda: [p for p in _ids_procs() if "sleep" in _cmdline(p)]  # noqa: E731
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and alive():
        time.sleep(0.05)
    assert not alive()


def _ids_procs() -> list[int]:
    from conftest import procs_of_uid
    from verifirst.verifiers.bash.sandbox import _ids

    return procs_of_uid(_ids()[0])


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def test_a_probe_that_fails_with_bubblewrap_too_does_not_refuse_the_launcher(monkeypatch):
    """Limits that pid 1 never got fail under either launcher: the error is raised, and the next
    sandbox still uses the same vf-sandbox (it had been refused for the rest of the process, and
    one built in the next place used instead)."""
    from verifirst.verifiers.bash import sandbox as sandbox_mod

    def fresh_probe_state():
        monkeypatch.setattr(sandbox_mod, "_STATE", {k: v for k, v in sandbox_mod._STATE.items()
                                                     if not (isinstance(k, tuple) and k[0] == "probe")})

    used = Sandbox(nofile=300)._bwrap.path
    fresh_probe_state()
    with monkeypatch.context() as m:
        m.setattr(_bwrap, "_pid1_limits", lambda limits: [])  # pid 1 does not get them
        m.setattr(_bwrap, "bwrap_wrapper", lambda args, ids, limits, fds, **_: _bwrap.as_user(args, ids))
        with pytest.raises(SandboxUnavailable, match="resource limits were not applied"):
            Sandbox(nofile=300)
    fresh_probe_state()
    sb = Sandbox(nofile=300)
    assert sb._bwrap.kind == "vf-sandbox" and sb._bwrap.path == used and not _launcher.refused()
    assert sb.run("ulimit -n").stdout == "300\n"


def _ns_pids(pid: int) -> list[str]:
    """The pid's numbers in its pid namespaces, outermost first (/proc/PID/status NSpid)."""
    with open(f"/proc/{pid}/status") as fh:
        return next(line.split()[1:] for line in fh if line.startswith("NSpid:"))


@pytest.mark.parametrize("fixture, cloned", [("nl2sh-fs1", True), ("sysadmin", False)])
def test_the_fork_server_clones_pid_1_itself_unless_a_user_namespace_is_given(fixture, cloned):
    """A run in a user namespace of its own is the server's child and pid 1 of its namespaces (no
    monitor between them), started outside a process group of its own: it is killed by its pid,
    and that ends what it ran. A sysadmin run (--userns) keeps its monitor."""
    from verifirst.verifiers.bash import fixtures
    from verifirst.verifiers.bash.sandbox import _drive, _Job

    sb = Sandbox(timeout_s=20)
    job = _Job(sb, "sleep 15 & sleep 15; echo never", fixtures.build(fixture))
    try:
        pid, server = job.proc.pid, job.proc._owner._proc.pid
        with open(f"/proc/{pid}/stat") as fh:
            ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        assert ppid == server and job.proc.leader is not cloned
        assert _ns_pids(pid) == ([str(pid), "1"] if cloned else [str(pid)])
    finally:
        job.kill()
        _drive([job])
        r = job.finish()
    assert r.signal == 9 and r.stdout == "" and r.timings["total_ms"] < 10_000


def _has_interpreter(path: str) -> bool:
    """Whether an ELF file names a program interpreter (PT_INTERP): dynamically linked."""
    import struct

    data = Path(path).read_bytes()
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    return any(struct.unpack_from("<I", data, phoff + i * phentsize)[0] == 3 for i in range(phnum))


def test_it_is_linked_statically_where_it_can_be_and_a_failed_static_build_is_not_retried(monkeypatch, tmp_path):
    cc = _launcher._compiler()
    libc = subprocess.run([cc, "-print-file-name=libc.a"], capture_output=True, text=True).stdout.strip()
    _launcher._built_in.cache_clear()
    try:
        if os.path.isabs(libc):
            assert not _has_interpreter(_launcher._built_in(tmp_path / "with-libc-a"))
        monkeypatch.setattr(_launcher, "BUILDS", (["-static", "-Wl,--no-such-option"],
                                                  []))
        dynamic = _launcher._built_in(tmp_path / "without")
        assert dynamic and _has_interpreter(dynamic)
        assert subprocess.run([dynamic, "--version"], capture_output=True, text=True).stdout == "vf-sandbox 1.1.2\n"
        _launcher._built_in.cache_clear()  # another process: the dynamic build is found, nothing compiled
        compiled = []
        monkeypatch.setattr(_launcher.subprocess, "run", lambda *a, **k: compiled.append(a) or 1 / 0)
        assert _launcher._built_in(tmp_path / "without") == dynamic and compiled == []
    finally:
        _launcher._built_in.cache_clear()


def test_bubblewrap_finds_the_layers_at_the_first_neutral_directory_that_holds_nothing_it_binds(monkeypatch, tmp_path):
    """Bubblewrap names its layers by their real paths: the wrapper binds the scratch area at a
    directory of LAYERS in a mount namespace of its own, and rewrites bubblewrap's paths to it."""
    taken, free = tmp_path / "taken", tmp_path / "free"
    taken.mkdir(), free.mkdir()
    monkeypatch.setattr(_bwrap, "LAYERS", (str(tmp_path / "missing"), str(taken), str(free)))
    scratch = "/dev/shm/verifirst-7"
    args = ["bwrap", "--ro-bind", f"{taken}/img", "/img", "--overlay-src", f"{scratch}/lower-1/fs",
            "--ro-bind", f"{scratch}/sys", "/sys", "--", "/bin/bash", "-c", f"echo {scratch}"]
    moved, prefix = _bwrap._layers_at(args, scratch, None)
    assert moved[:7] == ["bwrap", "--ro-bind", f"{taken}/img", "/img", "--overlay-src", f"{free}/lower-1/fs",
                         "--ro-bind"] and moved[7] == f"{free}/sys"
    assert moved[-1] == f"echo {scratch}"  # the command is not bubblewrap's to read
    assert prefix[-3:-1] == ["-c", f'{shutil.which("mount", path="/usr/bin:/bin")} --rbind "$0" {free} && exec "$@"']
    assert prefix[-1] == scratch and "--mount" in prefix
    monkeypatch.setattr(_bwrap, "LAYERS", (str(taken),))
    assert _bwrap._layers_at(args, scratch, None) == (args, [])  # none will do: unchanged
