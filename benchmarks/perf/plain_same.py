"""The plain side of the sandbox benchmark's same-work baseline (benchmarks/perf/sandbox.py,
`plain_same_commands`): each task's gold and gold2 run one after the other by plain `bash -c`
subprocesses, no limits, each in a fresh copy of the task's fixture (written to the tmpfs the
sandbox's scratch is on, run, removed), as a verifier without a sandbox would have to. Gold
commands are not the host's to run: as root only, in a helper process at an unused uid in a
network namespace of its own (a gold's curl reaches nothing, its kill no other process).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOST_TOP = {"bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32", "media", "mnt", "opt", "proc", "run",
            "sbin", "srv", "sys", "tmp", "usr", "var"}  # a plain run uses the host's: never rewritten


def _rewrite(command: str, tops: set[str], copy: str) -> str:
    """`command` with absolute paths into the fixture's own top-level directories (`tops`) moved to `copy`."""
    if not tops:
        return command
    alt = "|".join(sorted(map(re.escape, tops)))
    return re.sub(rf"(?<![\w.~/-])/({alt})(?=/|$|[^\w.-])", lambda m: f"{copy}/{m.group(1)}", command)


def plain_same_helper(tasks_path: str) -> int:
    """The helper process's work (PlainSame starts it):
    for each line on stdin, every task of `tasks_path` once, printing a JSON list of [wall ms, of
    which in `bash -c`, [exit codes]] per task (gold then gold2, each: a fresh fixture copy on the tmpfs the
    sandbox's scratch is on, `bash -c`, the copy removed)."""
    tasks = json.loads(Path(tasks_path).read_text())  # stdlib only: each fixture as a tree `start` wrote
    base = tempfile.mkdtemp(prefix="plain-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    for _ in sys.stdin:
        out = []
        for t in tasks:
            t0, in_bash, codes = time.perf_counter(), 0.0, []
            for command in (t["gold"], t["gold2"]):
                copy = tempfile.mkdtemp(dir=base)
                shutil.copytree(t["src"], copy, symlinks=True, dirs_exist_ok=True)
                t1 = time.perf_counter()
                try:
                    codes.append(subprocess.run(["bash", "-c", _rewrite(command, set(t["tops"]), copy)], cwd=copy,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   timeout=t["timeout_s"], env={**t["env"], "HOME": copy + "/root",
                                                                "PATH": os.environ.get("PATH", "/usr/bin:/bin")}).returncode)
                except subprocess.TimeoutExpired:
                    codes.append(None)
                in_bash += time.perf_counter() - t1
                if not _removed(copy):  # a command left a directory it cannot write
                    subprocess.run(["chmod", "-R", "u+rwx", copy], stderr=subprocess.DEVNULL)
                    shutil.rmtree(copy, ignore_errors=True)
            out.append([(time.perf_counter() - t0) * 1000, in_bash * 1000, codes])
        print(json.dumps(out), flush=True)
    shutil.rmtree(base, ignore_errors=True)
    return 0


def _removed(path: str) -> bool:
    """Whether `path` could be removed as it is (a command may leave a directory without write permission)."""
    try:
        shutil.rmtree(path)
        return True
    except OSError:
        return False


def _stdlib_python() -> list[str]:
    """The helper as the other uid runs it: this file's text (stdlib only) given to a python that uid
    can reach (a checkout or venv under a 0700 directory is closed to it)."""
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    return [python, "-c", Path(__file__).read_text()]  # its __main__ block runs the helper on argv[1]


class PlainSame:
    """The helper process of plain_same_helper, at an unused uid in its own network namespace
    (root only: `start` gives None otherwise); `round()` runs every task once there."""

    @classmethod
    def start(cls, tasks: list[dict], timeout_s: float) -> "PlainSame | None":
        unshare, setpriv = shutil.which("unshare"), shutil.which("setpriv")
        if os.geteuid() != 0 or not unshare or not setpriv:
            return None
        self = cls()
        uid = 3_300_000 + os.getpid() % 50_000  # no other process runs as it
        from verifirst.verifiers.bash import fixtures

        self.src = tempfile.mkdtemp(prefix="plain-src-")  # each fixture written once, readable by the uid
        fxs = {name: fixtures.resolve(name) for name in {t["fixture"] for t in tasks}}
        for name, fx in fxs.items():
            os.makedirs(f"{self.src}/{name}")
            fixtures.write_tree(fx, f"{self.src}/{name}")
        subprocess.run(["chmod", "-R", "a+rX", self.src], check=True)
        fd, self.tasks_path = tempfile.mkstemp(suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump([dict(t, timeout_s=timeout_s, src=f"{self.src}/{t['fixture']}", env=fxs[t["fixture"]].env,
                            tops=sorted({e.path.split("/")[0] for e in fxs[t["fixture"]].entries} - HOST_TOP))
                       for t in tasks], fh)
        os.chmod(self.tasks_path, 0o644)
        self.proc = subprocess.Popen([unshare, "--net", "--", setpriv, f"--reuid={uid}", f"--regid={uid}",
                                      "--clear-groups", *_stdlib_python(), self.tasks_path],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/tmp",
                                     env=dict(os.environ))
        return self

    def round(self) -> list[list[float]]:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("the plain-subprocess baseline's helper died")
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        os.unlink(self.tasks_path)
        shutil.rmtree(self.src, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(plain_same_helper(sys.argv[1]))
