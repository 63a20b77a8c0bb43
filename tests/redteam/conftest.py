"""Red-team harness: each family module lists its attacks (ATTACKS), and `battery` runs them all,
once per mode, in a child Python (_runner.py) through the public paths; each test then asserts
that its attack FAILED (the sandbox held).

Modes: root-default / root-bwrap (the harness is root; the sandbox drops to its own uid
RUN_UID, as in production) and user-default / user-bwrap (the harness is an unprivileged uid,
USER_UID, started with setpriv, importing a world-readable copy of verifirst, as
tests/test_security.py does). "default" is whatever launcher the sandbox picks (vf-sandbox
where it builds); "bwrap" sets VERIFIRST_SANDBOX_LAUNCHER=bwrap. The unprivileged uid is one of
the suite's own (not `nobody`), so per-uid attacks (inotify, processes, keys) never reach
other processes of this machine.

user-default runs with cgroup v1 memory, pids and cpu directories delegated to its uid (as an
administrator delegates a subtree), so its runs get cgroups of their own; user-bwrap runs with none,
as on a host without delegation.

Each mode runs in its own scratch area: as root, a directory the sandbox mounts its size-capped
tmpfs on (VERIFIRST_SCRATCH_MB=128, so a fill is cheap); unprivileged, a 128 MiB tmpfs the
harness mounts for it (without one the unprivileged sandbox would use the host's /dev/shm, and a
fill attack would fill the host's).

VERIFIRST_REDTEAM_SRC=DIR runs the batteries against another copy of verifirst (a `git archive`
of an older commit, to compare); VERIFIRST_REDTEAM_REPORT=FILE writes every attack's outcome per
mode as JSON (the table in the report); VERIFIRST_REDTEAM_DUMP=DIR keeps each battery's raw results. See __init__.py for the table of attacks.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TOKEN = "vr" + uuid.uuid4().hex[:8]
# uids of the suite's own (+1 for bubblewrap): as root the sandbox's, unprivileged the harness's. A few
# dozen at most over all runs of the suite: the kernel keeps a uid's user keyring once made.
RUN_UID = 3_400_000 + 2 * (os.getpid() % 40)
USER_UID = 3_460_000 + 2 * (os.getpid() % 40)
SCRATCH_MB = 128
MODES = ("root-default", "root-bwrap", "user-default", "user-bwrap")
HOST_SECRET_ENV = {"VF_RT_SECRET": f"vfrt-env-{TOKEN}"}
WITNESS = f"vfw{TOKEN[2:9]}"  # the comm of a host process no run should see


@dataclass
class Attack:
    """One candidate and what its success would be.

    id: the attack's name; family: its row group in the table; success: what success means (the
    measurable effect); spec: what _runner runs (kind, command, gold, check, sandbox settings);
    succeeded(result, ctx): the evidence (a short string) when the attack worked, else None;
    ran(result, ctx): whether the attack really ran (its probe printed its marker), so a broken
    candidate is never counted as a held sandbox; modes: where it runs (default: all); first: run it
    before the others (it wants a fork server that has served nothing else).
    """

    id: str
    family: str
    success: str
    spec: dict
    succeeded: Callable[[dict, "Ctx"], str | None]
    ran: Callable[[dict, "Ctx"], bool] | None = None
    modes: tuple[str, ...] = MODES
    first: bool = False


@dataclass
class Ctx:
    """What the success conditions compare with: the mode and the host's own facts."""

    mode: str
    token: str = TOKEN
    scratch_root: str = ""
    host: dict = field(default_factory=dict)


# ---- helpers the family modules use ----------------------------------------------------------

def out(res: dict, i: int = -1) -> str:
    """stdout + stderr of run i (default: the last, the candidate's)."""
    runs = res.get("runs") or []
    if not runs:
        return ""
    r = runs[i]
    return r["stdout"] + "\n" + r["stderr"]


def stdout(res: dict, i: int = -1) -> str:
    runs = res.get("runs") or []
    return runs[i]["stdout"] if runs else ""


def marker_lines(text: str, prefix: str) -> list[str]:
    return [ln[len(prefix):].strip() for ln in text.splitlines() if ln.startswith(prefix)]


def passed(res: dict) -> str | None:
    v = res.get("verdict") or {}
    return f"verdict {v.get('stage')} score {v.get('score')}" if v.get("passed") else None


# ---- the batteries ------------------------------------------------------------------------------

def _user_available() -> str | None:
    try:  # test_security's rule for the unprivileged run, where it can be imported
        from test_security import _unprivileged_available
    except ImportError:
        _unprivileged_available = None
    if _unprivileged_available is not None:
        return _unprivileged_available()
    if os.geteuid() != 0:
        return "needs root to start the unprivileged harness (setpriv) and mount its scratch tmpfs"
    if not shutil.which("setpriv") or not os.path.exists("/usr/bin/python3"):
        return "setpriv or /usr/bin/python3 missing"
    return None


def _src() -> Path:
    return Path(os.environ.get("VERIFIRST_REDTEAM_SRC") or REPO)


def _shim(parent: str) -> str:
    """A world-readable copy of verifirst (with the verifiers domain) for the unprivileged uid."""
    d = os.path.join(parent, "shim")
    shutil.copytree(_src() / "verifirst", f"{d}/verifirst",
                    ignore=shutil.ignore_patterns("__pycache__", "programs", "optimizers", "retrieval",
                                                  "benchmarks", "ops"))
    shutil.copy(HERE / "_runner.py", f"{d}/_runner.py")
    for root, dirs, files in os.walk(d):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return d


def _host_facts() -> dict:
    facts: dict = {"macs": [], "block": [], "cgroup": [], "hostname": os.uname().nodename}
    for p in Path("/sys/class/net").glob("*/address"):
        try:
            mac = p.read_text().strip()
        except OSError:
            continue
        if mac and mac != "00:00:00:00:00:00":
            facts["macs"].append(mac)
    try:
        facts["block"] = [b for b in os.listdir("/sys/block") if not b.startswith(("loop", "ram"))]
    except OSError:
        pass
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            path = line.split(":", 2)[2]
            facts["cgroup"] += [seg for seg in path.split("/") if len(seg) >= 8]
    except OSError:
        pass
    st = os.stat("/")
    facts["root_dev"] = [os.major(st.st_dev), os.minor(st.st_dev)]
    return facts


@pytest.fixture(scope="session")
def host_witness():
    """A host process with a telltale name (comm) that no run should be able to see."""
    code = ("import ctypes,time,sys; ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0); "
            "time.sleep(300)")
    p = subprocess.Popen([sys.executable, "-c", code, WITNESS])
    yield WITNESS
    p.kill()
    p.wait()


def _mount_user_scratch(root: str, uid: int) -> str:
    base = os.path.join(root, f"verifirst-{uid}")
    os.makedirs(base)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SCRATCH_MB}m,nr_inodes=200000,mode=0700,"
                    f"uid={uid},gid={uid}", "vfrt-user-scratch", base], check=True)
    return base


def _unmount_under(root: str) -> None:
    for line in reversed(Path("/proc/self/mountinfo").read_text().splitlines()):
        mnt = line.split()[4]
        if mnt.startswith(root.rstrip("/") + "/"):
            subprocess.run(["umount", "-l", mnt], capture_output=True)


def _delegated_cgroups(uid: int, tag: str) -> list[Path]:
    """cgroup v1 memory, pids and cpu directories under our own, handed to `uid` (as an
    administrator delegates a subtree), for the user-default battery: the unprivileged sandbox
    then makes its run cgroups there. [] where this host has no such hierarchies."""
    own = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        for c in ctrls.split(","):
            own[c] = path
    made = []
    for ctrl in ("memory", "pids", "cpu"):
        parent = Path("/sys/fs/cgroup", ctrl, own.get(ctrl, "/").lstrip("/"))
        if ctrl not in own or not (parent / "tasks").exists():
            continue
        d = parent / f"vfrt-{tag}"
        d.mkdir()
        os.chown(d, uid, uid)
        made.append(d)
    return made


def _remove_cgroups(dirs: list[Path]) -> None:
    import time
    for d in dirs:
        for sub in sorted(d.rglob("*"), key=lambda p: -len(p.parts)):
            if sub.is_dir():
                sub.rmdir()
        for _ in range(100):
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)


def mode_uid(mode: str) -> int:
    """Each mode its own uid (as root: the sandbox's; unprivileged: the harness's), so the four
    batteries run at once without sharing per-uid counters (inotify, processes, keys)."""
    return (RUN_UID if mode.startswith("root") else USER_UID) + (1 if mode.endswith("-bwrap") else 0)


def mode_unavailable(mode: str) -> str | None:
    if mode.startswith("root"):
        return None if os.geteuid() == 0 else "not running as root"
    return _user_available()


def lock_dir() -> str:
    """A folder every mode's uid can open the battery's lock files in (see _runner.turn)."""
    d = tempfile.mkdtemp(prefix="vfrt-lock-")
    os.chmod(d, 0o755)
    for name in ("gate", "room"):
        Path(d, name).touch(mode=0o644)
        os.chmod(Path(d, name), 0o644)
    return d


def run_battery(mode: str, attacks: list[Attack], tmp_root: str, locks: str | None = None) -> dict:
    """Runs `attacks` in `mode` in one child; returns {"uid", "backend", "results", "scratch_root"}.
    `locks`: the shared lock folder, where other modes' batteries run at the same time."""
    root = mode.startswith("root")
    uid = mode_uid(mode)
    scratch = os.path.join(tmp_root, "scratch")
    os.makedirs(scratch)
    os.chmod(tmp_root, 0o755)
    os.chmod(scratch, 0o755)
    spec = {"token": TOKEN, "uid": uid, "lock": locks,
            "attacks": [dict(a.spec, id=a.id) for a in attacks if mode in a.modes]}
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIRST_")}
    env.update(HOST_SECRET_ENV, PYTHONDONTWRITEBYTECODE="1", VERIFIRST_SCRATCH=scratch,
               VERIFIRST_SCRATCH_MB=str(SCRATCH_MB))
    if mode.endswith("-bwrap"):
        env["VERIFIRST_SANDBOX_LAUNCHER"] = "bwrap"
    delegated: list[Path] = []
    if root:
        src = os.environ.get("VERIFIRST_REDTEAM_SRC")
        if src:
            env["PYTHONPATH"] = src
        cmd = [sys.executable, str(HERE / "_runner.py")]
    else:
        shim = _shim(tmp_root)
        _mount_user_scratch(scratch, uid)
        env.update(PYTHONPATH=shim, HOME="/tmp")
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "/usr/bin/python3",
               f"{shim}/_runner.py"]
        if mode == "user-default":  # with cgroups delegated to the user; user-bwrap without any
            delegated = _delegated_cgroups(uid, f"{uid}-{os.getpid()}")
            joins = "".join(f"echo $$ > {d}/cgroup.procs; " for d in delegated)
            cmd = ["/bin/sh", "-c", joins + 'exec "$@"', "sh", *cmd]
    try:
        p = subprocess.run(cmd, input=json.dumps(spec), capture_output=True, text=True, env=env, timeout=300,
                           cwd="/tmp")
    finally:
        if os.geteuid() == 0:
            _unmount_under(tmp_root)
        _remove_cgroups(delegated)
    if p.returncode != 0:
        raise RuntimeError(f"the {mode} battery failed (exit {p.returncode}): {p.stderr[-4000:]}")
    data = json.loads(p.stdout)
    assert (data["uid"] == 0) == root
    data["scratch_root"] = scratch
    dump = os.environ.get("VERIFIRST_REDTEAM_DUMP")
    if dump:
        os.makedirs(dump, exist_ok=True)
        Path(dump, f"{mode}.json").write_text(json.dumps(data, indent=1))
    return data


REPORT: dict[str, dict[str, str]] = {}


def _collected(session) -> tuple[list[Attack], list[str], dict]:
    """The attacks of the collected modules (in collection order, but an attack marked `first`
    leads: it wants a fork server that has served nothing else; then by memory limit, highest
    first), the modes asked for, and the
    modules' own work to run beside the batteries ({module name: its run_beside()})."""
    attacks, seen, modes, beside = [], set(), [], {}
    for item in session.items:
        mod = getattr(item, "module", None)
        if mod is not None and hasattr(mod, "ATTACKS") and mod.__name__ not in seen:
            seen.add(mod.__name__)
            attacks += mod.ATTACKS
            if hasattr(mod, "run_beside"):
                beside[mod.__name__] = mod.run_beside
        cs = getattr(item, "callspec", None)
        m = cs.params.get("battery") if cs else None
        if m and m not in modes:
            modes.append(m)
    # memory limits from high to low: a run's cgroup reused by a later run with a higher limit
    # fails to take it today (v1: memory.limit_in_bytes past memsw, EINVAL), failing every later run
    attacks.sort(key=lambda a: (not a.first, -a.spec.get("sandbox", {}).get("memory_mb", 1024)))
    return attacks, modes, beside


@pytest.fixture(scope="session")
def batteries(request, host_witness, host_snapshot) -> dict:
    """Every collected attack, run once per mode; the modes' batteries run at the same time (each
    in its own child, uid and scratch area), so the suite takes as long as the slowest mode. A
    module's run_beside() (the Terraform bombs) runs beside them; its result is under "beside"."""
    attacks, modes, beside = _collected(request.session)
    found: dict[str, dict] = {"beside": {}}
    locks = lock_dir()  # an attack spec'd "alone" (timing) runs while the other modes wait

    def aside(name: str, fn) -> None:
        try:
            found["beside"][name] = fn()
        except Exception as exc:  # noqa: BLE001 - the module runs it itself then, and sees why
            found["beside"][name] = {"error": f"{type(exc).__name__}: {exc}"}

    def one(mode: str) -> None:
        why = mode_unavailable(mode)
        if why:
            found[mode] = {"skip": why}
            return
        tmp_root = tempfile.mkdtemp(prefix=f"vfrt-{mode}-")
        try:
            found[mode] = run_battery(mode, attacks, tmp_root, locks)
        except Exception as exc:  # noqa: BLE001 - reported by each test of the mode
            found[mode] = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            shutil.rmtree(tmp_root, ignore_errors=True)

    threads = [threading.Thread(target=one, args=(m,)) for m in modes]
    threads += [threading.Thread(target=aside, args=(n, fn)) for n, fn in beside.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    shutil.rmtree(locks, ignore_errors=True)
    return found


@pytest.fixture(scope="module", params=MODES)
def battery(request, batteries):
    """(Ctx, results by attack id) in one mode."""
    mode = request.param
    data = batteries.get(mode) or {"skip": "not collected"}
    if "skip" in data:
        pytest.skip(data["skip"])
    if "error" in data:
        pytest.fail(data["error"])
    ctx = Ctx(mode=mode, scratch_root=data["scratch_root"],
              host=dict(_host_facts(), backend=data.get("backend", "")))
    return ctx, data["results"]


# Where docs/sandbox-threat-model.md says a property does not hold ("Limits"), an attack that succeeds
# there is an expected failure (xfail), named with the limit; it still fails the suite anywhere else.
# What remains: each entry says exactly why the attack still succeeds there.
KNOWN_LIMITS: dict[tuple[str, str], str] = {}


def check_attack(battery, attack: Attack, extra: dict | None = None) -> None:
    """The assertion every attack test makes: it ran, and it did not succeed (or, where the threat
    model names the limit, an expected failure saying which)."""
    ctx, results = battery
    if ctx.mode not in attack.modes:
        pytest.skip(f"{attack.id} does not run in {ctx.mode}")
    ctx.host.update(extra or {})
    res = results[attack.id]
    key = f"{ctx.mode} ({ctx.host.get('backend', '?')})"
    if res.get("error"):
        REPORT.setdefault(attack.id, {})[key] = "ERROR"
        pytest.fail(f"{attack.id}: the harness failed to run it:\n{res['error']}")
    evidence = attack.succeeded(res, ctx)
    if evidence is None and attack.ran is not None and not attack.ran(res, ctx):
        REPORT.setdefault(attack.id, {})[key] = "DID-NOT-RUN"
        pytest.fail(f"{attack.id}: the attack did not run as written (its probe printed nothing): "
                    f"{json.dumps(res)[:3000]}")
    REPORT.setdefault(attack.id, {})[key] = "SUCCEEDS" if evidence else "FAILS"
    limit = KNOWN_LIMITS.get((attack.id, ctx.mode))
    if evidence is not None and limit:
        pytest.xfail(f"{attack.id} succeeds in {key}, a documented limit ({limit}): {evidence}")
    assert evidence is None, f"{attack.id} SUCCEEDED in {key} ({attack.success}): {evidence}"


def attack_ids(attacks: list[Attack]) -> list:
    return [pytest.param(a, id=a.id) for a in attacks]


@pytest.fixture(scope="session", autouse=True)
def _write_report():
    yield
    path = os.environ.get("VERIFIRST_REDTEAM_REPORT")
    if path and REPORT:
        old = {}
        if os.path.exists(path):
            try:
                old = json.loads(Path(path).read_text())
            except ValueError:
                old = {}
        for k, v in REPORT.items():
            old.setdefault(k, {}).update(v)
        Path(path).write_text(json.dumps(old, indent=1, sort_keys=True))


# ---- the host before and after the whole suite --------------------------------------------------

def etc_hashes() -> dict[str, str]:
    out: dict[str, str] = {}
    for root, dirs, files in os.walk("/etc"):
        for f in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            p = os.path.join(root, f)
            try:
                if os.path.islink(p):
                    out[p] = "link:" + os.readlink(p)
                elif os.path.isfile(p):
                    with open(p, "rb") as fh:
                        out[p] = hashlib.sha256(fh.read()).hexdigest()
            except OSError:
                out[p] = "unreadable"
    return out


def user_keys() -> set[tuple[str, str, str]]:
    """(id, type, description) of the keys in /proc/keys owned by us (the user)."""
    keys = set()
    try:
        lines = Path("/proc/keys").read_text().splitlines()
    except OSError:
        return keys
    for line in lines:
        f = line.split(None, 8)
        if len(f) >= 9 and f[5] == str(os.getuid()):
            keys.add((f[0], f[7], f[8].split(":")[0]))
    return keys


def canary_tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


OTHER_RUN = Path(f"/tmp/vfrt-otherrun-{TOKEN}")  # another run's files, as a run's scratch lays them out


@pytest.fixture(scope="session", autouse=True)
def host_snapshot():
    """The host's /etc, the user's keys, and another run's files (a canary tree laid out as a
    run's scratch is), before the suite; test_zz_host_unchanged compares them after."""
    canary = OTHER_RUN
    canary.mkdir()
    for rel in ("run-other/up/tmp/result.txt", "run-other/up/etc/passwd", "lower-other/fs/data.txt"):
        (canary / rel).parent.mkdir(parents=True, exist_ok=True)
        (canary / rel).write_text(f"another run's file {TOKEN}\n")
    for p in [canary, *canary.rglob("*")]:  # writable by anyone: a run that reached it could change it
        os.chmod(p, 0o777 if p.is_dir() else 0o666)
    dpkg = Path("/var/lib/dpkg/status")
    snap = {"etc": etc_hashes(), "keys": user_keys(), "canary_dir": canary, "canary": canary_tree(canary),
            "dpkg": dpkg.stat().st_mtime if dpkg.exists() else None}
    yield snap
    shutil.rmtree(canary, ignore_errors=True)
