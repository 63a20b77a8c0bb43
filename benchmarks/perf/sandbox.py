"""Sandbox cost per NL2SH-ALFA task, and how the 300 gold commands behave in it.

    python benchmarks/perf/sandbox.py --json            # ms per task (gold + gold2 + diffs) vs plain subprocess,
                                                        # where the time goes, sysadmin mode, FEH ms per pair
    python benchmarks/perf/sandbox.py --gold-report     # non-zero golds and why; gold-vs-gold re-run:
                                                        # byte-identical, and judged equivalent by FEH
    (either with --out F: write the result, with the machine it ran on, to F)

The tasks come from the icalfa package's assets (located with importlib, never imported);
file N runs on fixture nl2sh-fsN. Two baselines, measured in the same rounds: (1) the same work
without the sandbox (`plain_same_commands`): each task's gold and gold2 run one after the other by
plain `bash -c` subprocesses, each in a fresh copy of the task's fixture written to a temporary
directory (the fixture's own top-level directories, /testbed and the like, rewritten to the copy),
the copy removed after, as a verifier without a sandbox would have to; as root only, by a helper
process at an unused uid in a network namespace of its own (a gold's curl reaches nothing, its
kill reaches no other process), no limits; (2) two plain `bash -c 'echo hello'` (a fixed command:
not the same work, kept for comparison with earlier results). The trivial pair
(`true` twice in the sandbox) is the like-for-like comparison, and the floor under it
(namespace_floor.c: the same namespaces and mounts by a launcher of the least code, no bwrap,
no Python) says how much of it any sandbox built from kernel namespaces pays on this machine.
The sandbox's own launcher (vf-sandbox) and bubblewrap are compared on the same tasks, interleaved
("launchers").
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import resource
import statistics
import subprocess
import time
from collections import Counter
from pathlib import Path


def load_tasks() -> list[dict]:
    spec = importlib.util.find_spec("icalfa")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("icalfa is not installed: `pip install --no-deps icalfa==0.3.6` (it ships NL2SH-ALFA test)")
    root = Path(list(spec.submodule_search_locations)[0]) / "assets" / "datasets"
    tasks = []
    for n in range(1, 6):
        rows = json.loads((root / f"nl2bash_fs_{n}.json").read_text())
        for i, r in enumerate(rows):
            tasks.append({"id": f"fs{n}-{i}", "fixture": f"nl2sh-fs{n}", "query": r["query"],
                          "gold": r["gold"], "gold2": r["gold2"]})
    return tasks


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 2)


def _cpu_s() -> float:
    """CPU seconds of this process and its reaped children, and of the sandbox's spawner and the
    runs it reaped (RUSAGE_CHILDREN misses those): a cost that host load does not inflate much."""
    from verifirst.verifiers.bash import _spawner

    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime + _spawner.cpu_s()


def _timed(fn, n: int) -> tuple[list[float], float]:
    """(wall ms of each of n calls, CPU ms per call of this process and its children)."""
    walls, cpu0 = [], _cpu_s()
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        walls.append((time.perf_counter() - t0) * 1000)
    return walls, (_cpu_s() - cpu0) * 1000 / n


def _med(xs: list[float]) -> float:
    return round(statistics.median(xs), 2)


def _plain_pair() -> None:
    """The baseline: two plain `bash -c` subprocesses, one after the other."""
    for _ in range(2):
        subprocess.run(["bash", "-c", "echo hello"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _task_ms(sb, tasks: list[dict], pause_ms: float = 0.0) -> list[float]:
    """Wall ms of each task's gold pair (run_pair), each after a pause of `pause_ms`."""
    out = []
    for t in tasks:
        if pause_ms:
            time.sleep(pause_ms / 1000)
        t0 = time.perf_counter()
        sb.run_pair(t["gold"], t["gold2"], t["fixture"])
        out.append((time.perf_counter() - t0) * 1000)
    return out


@contextlib.contextmanager
def _env_set(name: str, value: str):
    """Environment variable `name` at `value` inside the block, as it was after."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def _succeeded(run):
    """A run, as `run()` gives it, that must have worked: a failed one is never timed as a result."""
    def call():
        got = run()
        for r in got if isinstance(got, (tuple, list)) else (got,):
            if r.exit_code != 0:
                raise SystemExit(f"a benchmark run failed (exit {r.exit_code}): {r.stderr.strip()[:300]}")
    return call


def breakdown(sb, n: int = 60) -> dict:
    """Where a trivial run's time goes: the sandbox's own phases (RunResult.timings), and the
    process chain it starts, piece by piece (plain bash; bash as the dropped uid through
    setpriv, which a run paid before the spawner; bwrap with everything around `true`). Wall
    and CPU ms per run, medians; the cost of one exec's start, the fork server's gain, and the
    floor (namespace_floor)."""
    from verifirst.verifiers.bash import _bwrap
    from verifirst.verifiers.bash.sandbox import Sandbox, _ids

    def phases_of(box) -> dict:
        phases: dict[str, list[float]] = {}
        for _ in range(n):
            for k, v in box.run("true", "nl2sh-fs1").timings.items():
                phases.setdefault(k, []).append(v)
        return {k: _med(v) for k, v in phases.items()}

    copy = Sandbox(timeout_s=sb.timeout_s, overlay=False)
    chain = {}
    ids = _ids()
    pieces = {"bash -c": ["/bin/bash", "-c", "true"]}
    if ids:
        pieces["setpriv + bash -c"] = _bwrap.as_user(["/bin/bash", "-c", "true"], ids)[0]
    for name, argv in pieces.items():
        w, c = _timed(lambda: subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), n)
        chain[name] = {"wall_ms": _med(w), "cpu_ms": round(c, 2)}
    w, c = _timed(_succeeded(lambda: sb.run("true", "nl2sh-fs1")), n)
    chain["whole sandbox run"] = {"wall_ms": _med(w), "cpu_ms": round(c, 2)}
    from verifirst.verifiers.bash import _spawner

    mode = "overlay on a prepared fixture copy" if sb.overlay else "fresh fixture copy per run"
    if isinstance(_spawner._SPAWNERS.get((ids, sb._bwrap.path)), _spawner.ForkServer):
        mode += (f", each run's pid 1 cloned by a {sb._bwrap.kind} fork server already at the sandbox uid "
                 f"(no exec of {sb._bwrap.kind}, no monitor process)")
    mode += "; limits in force: " + limits_in_force(sb)
    return {"phases_ms": phases_of(sb), "phases_ms_fresh_copy": phases_of(copy), "chain": chain, "mode": mode,
            "exec_start": exec_start_cost(), "fork_server": fork_server_gain(sb), "floor": namespace_floor(sb)}


def launchers(tasks: list[dict], timeout_s: float, rounds: int = 5, n: int = 60) -> dict:
    """The headline measurement, in `rounds` rounds (a single pass moves by 10-20% with the
    machine's state): each round, the per-task median over `tasks` (gold pairs), the trivial
    pair's median and the plain pair's median; where the sandbox uses vf-sandbox, bubblewrap
    (VERIFIRST_SANDBOX_LAUNCHER=bwrap) is measured the same way in the same rounds, interleaved.
    Medians of the rounds' medians, wall ms, and their ratios to the plain pair, per launcher kind."""
    from verifirst.verifiers.bash.sandbox import Sandbox

    first = Sandbox(timeout_s=timeout_s)
    boxes = {first._bwrap.kind: first}
    if first._bwrap.kind == "vf-sandbox":
        with _env_set("VERIFIRST_SANDBOX_LAUNCHER", "bwrap"):
            boxes["bwrap"] = Sandbox(timeout_s=timeout_s)
    got: dict[str, dict[str, list]] = {k: {"task": [], "trivial": [], "per_task": []} for k in boxes}
    plain: list[float] = []
    from verifirst.benchmarks.perf.plain_same import PlainSame

    same = PlainSame.start(tasks, timeout_s)
    same_rounds: list[list[list[float]]] = []
    try:
        for _ in range(rounds):
            for name, box in boxes.items():
                box.run_pair("true", "true", "nl2sh-fs1")
                got[name]["per_task"].append(_task_ms(box, tasks))
                got[name]["task"].append(statistics.median(got[name]["per_task"][-1]))
                got[name]["trivial"].append(statistics.median(
                    _timed(_succeeded(lambda: box.run_pair("true", "true", "nl2sh-fs1")), n)[0]))  # noqa: B023
            plain.append(statistics.median(_timed(_plain_pair, n)[0]))
            if same is not None:
                same_rounds.append(same.round())
    finally:
        if same is not None:
            same.close()
    base = _med(plain)
    out: dict = {"plain_pair_ms": base, "rounds": rounds, "tasks": len(tasks), "measured": first._bwrap.kind}
    # per task, the median of its rounds: the same task's sandbox time over its plain time
    same_task = [statistics.median(r[i][0] for r in same_rounds) for i in range(len(tasks))] if same_rounds else []
    if same_task:
        bash_only = [statistics.median(r[i][1] for r in same_rounds) for i in range(len(tasks))]
        out["plain_same_commands_ms_per_task"] = _med(same_task)
        out["plain_same_commands_bash_only_ms_per_task"] = _med(bash_only)  # no copy, no removal
        out["rounds_plain_same_commands_ms_per_task"] = [_med([x[0] for x in r]) for r in same_rounds]
    for name, g in got.items():
        task, trivial = _med(g["task"]), _med(g["trivial"])
        out[name] = {"median_ms_per_task": task, "trivial_pair_ms": trivial,
                     "ratio_per_task": round(task / base, 2), "ratio_trivial": round(trivial / base, 2),
                     "rounds_ms_per_task": [round(x, 2) for x in g["task"]]}
        if same_task:
            mine = [statistics.median(r[i] for r in g["per_task"]) for i in range(len(tasks))]
            out[name]["ratio_vs_plain_same_commands"] = round(task / out["plain_same_commands_ms_per_task"], 2)
            out[name]["median_task_ratio_vs_plain_same_commands"] = _med([a / b for a, b in zip(mine, same_task)])
            out[name]["ratio_vs_plain_same_commands_bash_only"] = round(
                task / out["plain_same_commands_bash_only_ms_per_task"], 2)
    out["rounds_plain_pair_ms"] = [round(x, 2) for x in plain]
    return out


def fork_server_gain(sb, n: int = 100) -> dict | None:
    """The trivial pair with runs started by vf-sandbox's fork server against vf-sandbox exec'd for
    each run (VERIFIRST_SANDBOX_FORKSERVER=0), interleaved (medians, wall and CPU ms); None where
    there is no fork server (bubblewrap, no compiler)."""
    from verifirst.verifiers.bash import _spawner
    from verifirst.verifiers.bash.sandbox import _ids

    if not isinstance(_spawner._SPAWNERS.get((_ids(), sb._bwrap.path)), _spawner.ForkServer):
        return None
    walls: dict[str, list[float]] = {"on": [], "off": []}
    cpus = {"on": 0.0, "off": 0.0}
    for _ in range(n):
        for mode in walls:
            with _env_set("VERIFIRST_SANDBOX_FORKSERVER", "1" if mode == "on" else "0"):
                w, c = _timed(_succeeded(lambda: sb.run_pair("true", "true", "nl2sh-fs1")), 1)
            walls[mode] += w
            cpus[mode] += c / n
    return {f"{m}_pair_ms": _med(walls[m]) for m in walls} | {f"{m}_pair_cpu_ms": round(cpus[m], 2) for m in cpus}


def _c_compiler() -> str | None:
    """The C compiler on PATH (cc, else gcc), or None."""
    import shutil

    return shutil.which("cc") or shutil.which("gcc")


def _built(source: str, exe: str, flags: list[str] | tuple = ()) -> bool:
    """Whether `source` compiled (-O2, plus `flags`) into `exe` with _c_compiler()."""
    return subprocess.run([_c_compiler(), "-O2", *flags, "-o", exe, source], capture_output=True).returncode == 0


def exec_start_cost(n: int = 200) -> dict | None:
    """What one exec costs before a program does anything, by C library: a program with none (the
    kernel's exec alone), one statically linked with glibc, one dynamically linked. On a virtual
    machine glibc's start-up probes the CPU's caches with CPUID, which traps to the hypervisor:
    every exec in a run pays it, which is why the fork server spares bwrap's exec. Wall ms per
    exec (fork, exec, wait), medians; None without a C compiler."""
    import tempfile

    if _c_compiler() is None:
        return None
    progs = {"no_libc_ms": ("void _start(void){__asm__ volatile(\"mov $60,%eax; xor %edi,%edi; syscall\");}",
                            ["-static", "-nostdlib"]),
             "static_glibc_ms": ("int main(void){return 0;}", ["-static"]),
             "dynamic_glibc_ms": ("int main(void){return 0;}", [])}
    out = {}
    with tempfile.TemporaryDirectory() as d:
        for name, (src, flags) in progs.items():
            c, exe = os.path.join(d, f"{name}.c"), os.path.join(d, name)
            with open(c, "w") as fh:
                fh.write(src)
            if not _built(c, exe, flags):
                continue  # no static glibc installed, say
            w, _ = _timed(lambda: subprocess.run([exe]), n)
            out[name] = _med(w)
    return out or None


FLOOR_SOURCE = Path(__file__).with_name("namespace_floor.c")


def namespace_floor(sb, n: int = 100) -> dict | None:
    """The floor under the trivial pair: namespace_floor.c, a launcher of the least code doing the
    kernel work a sandboxed run cannot skip (every namespace, an overlay root, read-only /usr, /etc
    and /sys, /proc, /dev, pivot_root, a nested user namespace, then `bash -c true` as pid 2), with
    no bwrap and no Python, against two plain fork + exec of bash timed by the same harness; the sandbox's
    trivial pair (run_pair) and the plain pair (_plain_pair) interleaved with them. Wall ms, medians
    of `rounds` medians; None without a C compiler or where the harness cannot build its sandbox."""
    import tempfile

    from verifirst.verifiers.bash.sandbox import _ids

    if _c_compiler() is None:
        return None
    ids = _ids()
    uid, gid = ids if ids else (-1, -1)
    rounds = 5
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "namespace_floor")
        if not _built(str(FLOOR_SOURCE), exe):
            return None
        lower, scratch = os.path.join(d, "lower"), os.path.join(d, "scratch")
        for sub in ("usr", "etc", "sys", "proc", "dev", "tmp", "root"):
            os.makedirs(os.path.join(lower, sub))
        for name in ("bin", "sbin", "lib", "lib64"):
            os.symlink(f"usr/{name}", os.path.join(lower, name))
        os.mkdir(scratch)
        for p in (d, lower, scratch):
            os.chmod(p, 0o755)  # the sandbox uid walks them
        got: dict[str, list[float]] = {"harness_plain_pair_ms": [], "floor_single_ms": [], "floor_pair_ms": [],
                                       "sandbox_pair_ms": [], "plain_pair_ms": []}
        for r in range(rounds):
            for key, mode in (("harness_plain_pair_ms", "plain"), ("floor_single_ms", "single"),
                              ("floor_pair_ms", "pair")):
                runs = os.path.join(scratch, f"{mode}-{r}")
                os.mkdir(runs, 0o755)
                out = subprocess.run([exe, mode, lower, runs, str(n), str(uid), str(gid)], capture_output=True,
                                     text=True)
                if out.returncode != 0:
                    return None
                got[key].append(float(out.stdout))
            got["sandbox_pair_ms"].append(statistics.median(
                _timed(_succeeded(lambda: sb.run_pair("true", "true", "nl2sh-fs1")), n)[0]))
            got["plain_pair_ms"].append(statistics.median(_timed(_plain_pair, n)[0]))
        subprocess.run(["rm", "-rf", scratch], check=True)  # the runs' upper directories, some the sandbox uid's
    out = {k: _med(v) for k, v in got.items()}
    out["floor_pair_ratio_to_harness_plain"] = round(out["floor_pair_ms"] / out["harness_plain_pair_ms"], 2)
    out["sandbox_pair_over_floor_ms"] = round(out["sandbox_pair_ms"] - out["floor_pair_ms"], 2)
    return out


def realtime_ratio(sb, n: int = 150, tasks: list[dict] | None = None) -> dict | None:
    """The trivial pair (and, given `tasks`, their gold pairs: the per-task median and its ratio
    to the plain pair) against two plain `bash -c` with this process and its children at
    SCHED_FIFO priority 10, so neither waits behind the machine's other work: what a shared,
    loaded machine hides of an idle one. The sandbox's spawner, which starts every run, and the
    thread that reads its replies get the same policy (its runs inherit it). Root only (None
    otherwise); policies restored after."""
    from verifirst.verifiers.bash import _spawner

    if os.geteuid() != 0 or not hasattr(os, "sched_setscheduler"):
        return None
    procs = [0] + _spawner.task_ids()
    before = {p: (os.sched_getscheduler(p), os.sched_getparam(p)) for p in procs}
    try:
        for p in procs:
            os.sched_setscheduler(p, os.SCHED_FIFO, os.sched_param(10))
    except OSError:
        for p, (policy, param) in before.items():
            os.sched_setscheduler(p, policy, param)
        return None
    try:
        pair, _ = _timed(_succeeded(lambda: sb.run_pair("true", "true", "nl2sh-fs1")), n)
        plain, _ = _timed(_plain_pair, n)
        per_task = _task_ms(sb, tasks or [])
    finally:
        for p, (policy, param) in before.items():
            os.sched_setscheduler(p, policy, param)
    out = {"sandbox_pair_ms": _med(pair), "plain_pair_ms": _med(plain),
           "ratio": round(statistics.median(pair) / statistics.median(plain), 2), "policy": "SCHED_FIFO 10"}
    if per_task:
        out["median_ms_per_task"] = _med(per_task)
        out["ratio_per_task"] = round(statistics.median(per_task) / statistics.median(plain), 2)
    return out


def limits_in_force(sb) -> str:
    """What bounds each measured run (the threat model's limits), as a phrase for the results."""
    from verifirst.verifiers.bash import _cgroup, _seccomp

    parts = [f"rlimits on pid 1 (memory {sb.limits['as_bytes'] >> 20} MiB, {sb.limits['nproc']} processes)",
             "seccomp filter" if _seccomp.program() is not None else "no seccomp (libseccomp missing)",
             "a memory and pids cgroup per run" if _cgroup.available() else
             f"no cgroup per run ({_cgroup.unavailable_reason()})",
             "a tmpfs per run" if os.geteuid() == 0 else "a shared scratch tmpfs", "/dev/shm 64 MiB"]
    return ", ".join(parts)


def sysadmin_cost(sb, n: int = 20) -> dict:
    """A trivial run and a useradd in sysadmin mode (own /etc, 65536-id namespace as root)."""
    w, c = _timed(_succeeded(lambda: sb.run("true", "sysadmin")), n)
    u, uc = _timed(_succeeded(lambda: sb.run("useradd -m alice", "sysadmin")), n)
    return {"trivial_ms": _med(w), "trivial_cpu_ms": round(c, 2), "useradd_ms": _med(u), "useradd_cpu_ms": round(uc, 2)}


LONG = ("for i in $(seq 1 4000); do echo \"line $i of a long listing\"; done",
        "seq 1 4000 | while read i; do echo \"line $i of a long listing\"; done",
        "seq 1 4000 | sed 's/.*/entry & of a long listing/'")
SHORT = ("ls /testbed | wc -l", "ls -1 /testbed | wc -l", "ls /testbed | head -3")


def feh_pairs(n: int = 20) -> dict:
    """FEH ms per pair (sandbox runs + comparison), short and long outputs, equal and different.

    Equal outputs never reach the embedder; different ones do (loaded before timing)."""
    from verifirst.core.task import Item
    from verifirst.verifiers.bash.feh import FehVerifier

    v = FehVerifier("nl2sh")
    v.embed(["warm", "up"])
    out = {}
    for label, (gold, same, other) in (("short", SHORT), ("long", LONG)):
        for kind, cand in (("equal_output", same), ("different_output", other)):
            item = Item(id=label, inputs={"task": label}, gold={"command": gold, "fixture": "nl2sh-fs1"})
            verdicts = []
            w, _ = _timed(lambda: verdicts.append(v.verify(item, cand)), n)
            compare = [x.timings.get("compare_s", 0) * 1000 for x in verdicts]
            out[f"{label}_{kind}"] = {"ms_per_pair": _med(w), "compare_ms": _med(compare),
                                      "rule": verdicts[-1].details.get("rule"),
                                      "stdout_bytes": len(verdicts[-1].details["gold"]["stdout"])}
    return out


# The sandbox's own code (Python + C): issue 33 asked it smaller than the 3,780 lines it had then.
SANDBOX_FILES = ("sandbox.py", "_runs.py", "_spawner.py", "_launcher.py", "_launcher.c", "_forkserver.c", "_bwrap.py",
                 "_bwrap_access.py", "_sandbox_fs.py", "_sandbox_etc.py", "_cgroup.py", "_seccomp.py", "_usr_layer.py")
CODE_LINES_GOAL = 3780


def code_lines() -> dict:
    """The sandbox's files' raw line counts (as `wc -l` counts them), in total and per file."""
    here = Path(importlib.util.find_spec("verifirst.verifiers.bash").submodule_search_locations[0])
    per_file = {name: (here / name).read_bytes().count(b"\n") for name in SANDBOX_FILES}
    return {"total": sum(per_file.values()), "below": CODE_LINES_GOAL, "per_file": per_file}


def bench(limit: int | None, timeout_s: float) -> dict:
    from verifirst.verifiers.bash.sandbox import Sandbox

    tasks = load_tasks()[:limit]
    sb = Sandbox(timeout_s=timeout_s)
    sb.run_pair("true", "true", "nl2sh-fs1")  # warm: probe, /etc, fixture snapshots
    per_task, timed_out = [], 0
    load_before = os.getloadavg()[0]
    cpu0 = _cpu_s()
    t_all = time.perf_counter()
    for t in tasks:
        t0 = time.perf_counter()
        a, b = sb.run_pair(t["gold"], t["gold2"], t["fixture"])
        per_task.append((time.perf_counter() - t0) * 1000)
        timed_out += a.timed_out + b.timed_out
    wall = time.perf_counter() - t_all
    cpu = _cpu_s() - cpu0
    _, empty_cpu = _timed(_succeeded(lambda: sb.run_pair("true", "true", "nl2sh-fs1")), 100)
    _, baseline_cpu = _timed(_plain_pair, 100)
    lc = launchers(tasks, timeout_s)
    ours = lc[lc["measured"]]
    return {
        "tasks": len(tasks), "backend": sb.backend, "timeout_s": timeout_s,
        "compared": "sandbox: gold and gold2 at once (run_pair), FS diffs included, every limit in force; "
                    "ratio_vs_plain_same_commands: over the same gold and gold2 run one after the other by plain "
                    "`bash -c` subprocesses, no limits, each in a fresh copy of the task's fixture (written, run, "
                    "removed; the fixture's top-level directories rewritten to the copy), no FS diff; "
                    "..._bash_only: over the time of those two `bash -c` alone (no copy, no removal); "
                    "ratio_vs_plain_subprocess: over `bash -c 'echo hello'` twice (not the same work); "
                    f"medians of {lc['rounds']} rounds (launchers), each: every task, the trivial pair, the plain "
                    "pair, the same commands plain",
        "median_ms_per_task": ours["median_ms_per_task"], "p90_ms_per_task": _pct(per_task, 0.9),
        "mean_ms_per_task": round(statistics.fmean(per_task), 2),
        "median_ms_per_task_first_pass": round(statistics.median(per_task), 2),
        "median_ms_per_task_trivial_commands": ours["trivial_pair_ms"],
        "baseline_plain_subprocess_ms_per_task": lc["plain_pair_ms"],
        "ratio_vs_plain_subprocess": ours["ratio_per_task"],
        "baseline_plain_same_commands_ms_per_task": lc.get("plain_same_commands_ms_per_task"),
        "ratio_vs_plain_same_commands": ours.get("ratio_vs_plain_same_commands"),
        "median_task_ratio_vs_plain_same_commands": ours.get("median_task_ratio_vs_plain_same_commands"),
        "baseline_plain_same_commands_bash_only_ms_per_task": lc.get("plain_same_commands_bash_only_ms_per_task"),
        "ratio_vs_plain_same_commands_bash_only": ours.get("ratio_vs_plain_same_commands_bash_only"),
        # the same pair of trivial commands both ways: what the sandbox adds, without the commands' own cost
        "ratio_trivial_vs_plain_subprocess": ours["ratio_trivial"],
        "cpu_ms_per_task_trivial_commands": round(empty_cpu, 2),
        "baseline_plain_subprocess_cpu_ms_per_task": round(baseline_cpu, 2),
        "cpu_ratio_trivial_vs_plain_subprocess": round(empty_cpu / baseline_cpu, 2),
        "goal_ratio": 3.0,
        "throughput_tasks_per_s": round(len(tasks) / wall, 2), "wall_s": round(wall, 2),
        "cpu_ms_per_task": round(cpu * 1000 / len(tasks), 2),
        "loadavg_1m_before": round(load_before, 2), "cpus": os.cpu_count(),
        "runs_timed_out": timed_out, "goal_ms_per_task": 30, "meets_goal": ours["median_ms_per_task"] <= 30,
        "meets_goal_ratio_same_commands": ours.get("ratio_vs_plain_same_commands", 99) <= 3.0,
        "trivial_at_realtime_priority": realtime_ratio(sb, tasks=tasks),
        "launchers": lc, "limits_in_force": limits_in_force(sb),
        "breakdown": breakdown(sb), "sysadmin": sysadmin_cost(sb), "feh": feh_pairs(), "code_lines": code_lines(),
    }


_REASONS = (
    (r"command not found|No such file or directory.*(bin|exec)", "missing command"),
    (r"Temporary failure in name resolution|Could not resolve|no servers could be reached|unknown host|"
     r"Name or service not known|Network is unreachable|connection refused|Couldn't connect", "no network"),
    (r"Operation not permitted|Permission denied|Read-only file system", "not permitted in sandbox"),
    (r"No such file or directory|cannot access|cannot stat|not found", "path absent in fixture"),
    (r"usage:|Usage:|invalid option|unrecognized option|missing operand|syntax error|unexpected", "command misuse"),
)


def _reason(r) -> str:
    if r.timed_out:
        return "timed out"
    text = r.stderr
    for pattern, name in _REASONS:
        if re.search(pattern, text):
            return name
    return "non-zero status (no message)" if not text.strip() else "other"


def _differs(a, b) -> list[str]:
    out = []
    if a.stdout != b.stdout:
        out.append("stdout")
    if a.exit_code != b.exit_code:
        out.append("exit_code")
    if a.fs_diff.key() != b.fs_diff.key():
        out.append("fs_diff")
    return out


def gold_report(limit: int | None, timeout_s: float) -> dict:
    from verifirst.verifiers.bash.sandbox import Sandbox

    from verifirst.verifiers.bash.feh import FehVerifier

    tasks = load_tasks()[:limit]
    sb = Sandbox(timeout_s=timeout_s)
    other = None  # bubblewrap beside vf-sandbox: does each gold see the same in both?
    if sb._bwrap.kind == "vf-sandbox":
        with _env_set("VERIFIRST_SANDBOX_LAUNCHER", "bwrap"):
            other = Sandbox(timeout_s=timeout_s)
    feh = FehVerifier("nl2sh")  # the rules fitted on the 600 FEH pairs, which never pair a gold with itself
    failing, unequal, feh_unequal, feh_undecided, launchers_differ = [], [], [], [], []
    for t in tasks:
        a, b = sb.run_pair(t["gold"], t["gold"], t["fixture"])
        if other is not None:
            c = other.run(t["gold"], t["fixture"])
            d = _differs(a, c) + (["stderr"] if a.stderr != c.stderr else [])
            if d:
                launchers_differ.append({"id": t["id"], "gold": t["gold"], "differs": d})
        v = feh.compare(t["query"], t["gold"], t["gold"], a, b)
        if getattr(v, "inconclusive", None):  # nothing observable decided: neither equal nor unequal
            feh_undecided.append({"id": t["id"], "gold": t["gold"], "reason": v.inconclusive})
        elif v.passed is False:
            feh_unequal.append({"id": t["id"], "gold": t["gold"], "rule": v.details.get("rule"),
                                "differences": v.details.get("differences")})
        if a.exit_code != 0 or a.timed_out:
            first = next((ln for ln in a.stderr.splitlines() if ln.strip()), "")
            failing.append({"id": t["id"], "gold": t["gold"], "exit_code": a.exit_code, "reason": _reason(a),
                            "stderr": first[:200]})
        d = _differs(a, b)
        if d:
            unequal.append({"id": t["id"], "gold": t["gold"], "differs": d,
                            "stdout_a": a.stdout[:160], "stdout_b": b.stdout[:160]})
    n = len(tasks)
    return {
        "tasks": n, "backend": sb.backend,
        "gold_nonzero": len(failing), "gold_nonzero_by_reason": dict(Counter(f["reason"] for f in failing)),
        "gold_nonzero_list": failing,
        "gold_vs_gold_identical": n - len(unequal), "gold_vs_gold_identical_rate": round((n - len(unequal)) / n, 4),
        "gold_vs_gold_feh_equivalent": n - len(feh_unequal) - len(feh_undecided),
        "gold_vs_gold_feh_inconclusive": len(feh_undecided),
        "gold_vs_gold_feh_rate": round((n - len(feh_unequal) - len(feh_undecided)) / n, 4),
        "goal_rate": 0.98, "gold_vs_gold_not_identical": unequal, "gold_vs_gold_feh_not_equivalent": feh_unequal,
        "gold_vs_gold_feh_inconclusive_list": feh_undecided,
    } | ({} if other is None else {
        # a gold that differs between its own two runs differs between launchers too, by chance
        "launchers": f"{sb.backend} vs {other.backend}", "launchers_identical": n - len(launchers_differ),
        "launchers_differ_beyond_reruns": [x for x in launchers_differ
                                           if x["id"] not in {u["id"] for u in unequal}],
        "launchers_differ": launchers_differ})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print JSON (default output is JSON too)")
    ap.add_argument("--gold-report", action="store_true", help="gold exit codes and gold-vs-gold equivalence")
    ap.add_argument("--limit", type=int, default=None, help="first N tasks only")
    ap.add_argument("--timeout", type=float, default=5.0, help="per-command wall-clock limit (s)")
    ap.add_argument("--out", type=Path, default=None, help="write the result (with the machine) here")
    args = ap.parse_args(argv)
    from verifirst.benchmarks.perf.record import emit, machine

    started = machine()
    result = gold_report(args.limit, args.timeout) if args.gold_report else bench(args.limit, args.timeout)
    name = "sandbox_gold" if args.gold_report else "sandbox"
    emit({"benchmark": name, **result}, started, args.out, as_json=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
