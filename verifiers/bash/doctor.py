"""`verifirst doctor`: which of the sandbox's isolation properties hold on this machine, checked by
running attacks against it, in a few seconds.

Each property of docs/sandbox-threat-model.md is looked at two ways: what the host offers (user
namespaces, seccomp, cgroups, the overlay, the launcher in use) and a candidate that tries to break
it (reads pid 1's memory, ptraces pid 1, adds a kernel key, holds more memory than the run may,
starves a concurrent run, rewrites a task's check). Exit 0 when every property holds, 1 when one
does not (each such line says what to do), 2 when no sandbox can be built at all.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Callable

__all__ = ["Finding", "check", "cli_doctor"]


@dataclass
class Finding:
    """One property: whether it holds here, what was seen, and what to do when it does not."""

    name: str
    holds: bool
    seen: str
    fix: str = ""


def _host(sb) -> list[Finding]:
    from verifirst.verifiers.bash import _cgroup, _seccomp

    out = [Finding("launcher", sb._bwrap.kind == "vf-sandbox", sb.backend,
                   "" if sb._bwrap.kind == "vf-sandbox" else
                   "install a C compiler (apt-get install gcc) so vf-sandbox is built: under bubblewrap pid 1 "
                   "stays dumpable and per-namespace counts are not capped"),
           Finding("seccomp", _seccomp.program() is not None, _seccomp.unavailable_reason() or "filter loaded",
                   "apt-get install libseccomp2"),
           Finding("cgroups per run", _cgroup.available(), _cgroup.unavailable_reason() or "memory and pids",
                   "run as root, or delegate a cgroup v2 subtree with the memory and pids controllers to this "
                   "user; until then the process limit holds per uid and memory per run only as sampled (every 20 ms)"),
           Finding("overlay root", bool(sb.overlay), "overlay" if sb.overlay else "a fresh copy per run",
                   "a kernel or bubblewrap (>= 0.10) with overlayfs in user namespaces; copies are slower, "
                   "not less isolated")]
    return out


# (name, candidate, what shows the attack failed in the candidate's RunResult, fix when it did not)
_ATTACKS: list[tuple[str, str, Callable, str]] = [
    ("pid 1's memory unreadable",
     "cat /proc/1/mem /proc/1/environ >/dev/null 2>&1 && echo READ || echo denied",
     lambda r: "READ" not in r.stdout, "use vf-sandbox (its pid 1 is not dumpable)"),
    ("ptrace of pid 1 denied",
     "python3 -c \"import ctypes; l=ctypes.CDLL(None); print('ATTACHED' if l.ptrace(16, 1, 0, 0) == 0 else 'denied')\"",
     lambda r: "ATTACHED" not in r.stdout, "install libseccomp2 (the filter denies it)"),
    ("kernel keyrings denied",
     "python3 -c \"import ctypes; l=ctypes.CDLL(None); "
     "print('KEY' if l.syscall(248, b'user', b'k', b'v', 1, 0xfffffffc) > 0 else 'denied')\"",
     lambda r: "KEY" not in r.stdout, "install libseccomp2 (the filter denies add_key and keyctl)"),
    ("memory bounded per run",
     "for i in 1 2 3; do python3 -c \"b = bytearray(500 << 20); import time; time.sleep(1); print('HELD')\" & "
     "done; wait",
     lambda r: r.stdout.count("HELD") < 3, "give the sandbox cgroups (run as root, or delegate a subtree)"),
    ("/dev/shm sized per run",
     "dd if=/dev/zero of=/dev/shm/f bs=1M count=100 2>/dev/null; du -m /dev/shm/f | cut -f1",
     lambda r: r.stdout.strip().isdigit() and int(r.stdout.strip()) <= 64, "use vf-sandbox or bubblewrap >= 0.8"),
    ("no process outlives its run",
     "setsid sh -c 'sleep 30' & disown; echo started",
     lambda r: r.timings["total_ms"] < 5000, "the launcher must make a pid namespace of its own"),
]


def _attack_findings(sb) -> list[Finding]:
    out = []
    for name, cmd, failed, fix in _ATTACKS:
        r = sb.run(cmd)
        seen = (r.stdout.strip() or r.stderr.strip() or f"exit {r.exit_code}, limits met: {r.limits_hit}")
        out.append(Finding(name, bool(failed(r)), " ".join(seen.split())[:120], fix))
    return out


def _concurrent(sb) -> Finding:
    filler = "for i in $(seq 40); do head -c 60000000 /dev/zero > /f$i 2>/dev/null || break; done; echo filled"
    gold, _ = sb.run_pair("sleep 0.3; seq 1 200000 > /tmp/o && wc -l < /tmp/o", filler, "empty")
    ok = gold.stdout.strip() == "200000"
    seen = gold.stdout.strip() or gold.stderr.strip()[:120]
    if ok and os.geteuid() != 0:  # this filler did not reach the limit, but one that writes longer would
        ok, seen = False, "runs share one scratch directory (not root): a run can fill it for another"
    return Finding("a concurrent run cannot be starved", ok, seen,
                   "run as root (each run then writes into a tmpfs of its own)")


def _check_tamper() -> Finding:
    from verifirst.core.task import Item
    from verifirst.verifiers.bash.oracle import BashTestsVerifier

    item = Item("doctor", {}, {"command": "echo 42", "check": 'grep -qx 42 "$VERIFIRST_STDOUT"'})
    attacker = ("(while :; do for f in /tmp/.verifirst-check/check/* /dev/shm/*/check/*; do "
                "[ -f \"$f\" ] && echo 'exit 0' > \"$f\"; done; done) >/dev/null 2>&1 & disown; echo 41")
    v = BashTestsVerifier(timeout_s=5).verify(item, attacker)
    return Finding("a candidate cannot rewrite the task's check", v.passed is False, v.stage,
                   "this is a defect: report it")


def _images() -> Finding:
    from verifirst.verifiers.bash import images

    built = images.built_images()
    seen = "; ".join(f"{' '.join(i['recipe'].get('packages', [])) or 'minbase'} "
                     f"({i['recipe'].get('suite', '?')}, {i['mib']} MiB)" for i in built) or "none built yet"
    return Finding("task images", True, f"{len(built)} Debian image(s) in {images.images_dir()}: {seen}")


def check() -> tuple[list[Finding], str | None]:
    """Every finding, and None; or no findings and why no sandbox can be built here."""
    from verifirst.verifiers.bash.sandbox import Sandbox, SandboxUnavailable

    try:
        sb = Sandbox(timeout_s=5.0)
    except SandboxUnavailable as exc:
        return [], str(exc)
    return _host(sb) + [_images()] + _attack_findings(sb) + [_concurrent(sb), _check_tamper()], None


def cli_doctor(as_json: bool = False) -> int:
    """`verifirst doctor [--json]`: prints each property, holds or not, and what to do.

    Args:
        as_json: print one JSON object instead of lines.

    Returns:
        0 every property holds, 1 some do not, 2 no sandbox here.
    """
    findings, broken = check()
    if as_json:
        print(json.dumps({"sandbox": broken is None, "why": broken, "findings": [asdict(f) for f in findings]},
                         indent=2))
    elif broken:
        print(f"no sandbox here: {broken}")
    else:
        for f in findings:
            print(f"{'ok ' if f.holds else 'NO '} {f.name}: {f.seen}" + ("" if f.holds else f"\n     fix: {f.fix}"))
        bad = sum(not f.holds for f in findings)
        print(f"{len(findings) - bad} of {len(findings)} hold" + (f"; {bad} do not (see fix:)" if bad else ""))
    if broken:
        return 2
    return 0 if all(f.holds for f in findings) else 1
