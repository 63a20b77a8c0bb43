"""checkov as the Terraform verifier's scanner gate: find it, keep one scanner process, read findings.

checkov's pins conflict with ours, so it lives in a venv of its own (`make` puts it in
`.tools/checkov`) and runs as a separate process. Importing checkov takes seconds and a scan of a
small configuration tens of milliseconds, so one long-lived process (`_checkov_worker.py`, run by
the Python of checkov's venv) serves every scan; a checkov that is not a Python script is run as
`checkov -d DIR --framework terraform -o json --skip-download` per scan instead. Scans are
offline: no API key, no downloads, no external modules.
"""
from __future__ import annotations

import atexit
import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

CHECKOV_VERSION = "3.3.30"
WORKER = Path(__file__).resolve().parent / "_checkov_worker.py"
CHECKOV_FIX = (f"Fix: `make install-test` (installs checkov {CHECKOV_VERSION} in .tools/checkov), or install it "
               f"in a venv of its own (its pins conflict with verifirst's): `python -m venv ckv && ckv/bin/pip "
               f"install checkov=={CHECKOV_VERSION}`, then set verifier.options.checkov or VERIFIRST_CHECKOV to "
               f"ckv/bin/checkov.")
_PIP_TRAMPOLINE = re.compile(r"""exec'?\s+['"]([^'"]+)['"]""")


def _relative(name: str) -> Path:
    """A file's place in the scan folder: its path below the configuration (a module's file keeps
    modules/net/main.tf, so checkov follows the module call); a path leaving it, its name alone."""
    p = Path(name)
    return p if not p.is_absolute() and ".." not in p.parts and p.parts else Path(p.name)


class CheckovError(RuntimeError):
    """checkov crashed, timed out or could not read the configuration: nothing was observed, so the
    item is a verifier error (counted apart), never PASS or FAIL."""


def checkov_candidates(option: str | None = None) -> list[str]:
    """Where checkov is looked for, in order: the `checkov` option, VERIFIRST_CHECKOV, `checkov` on
    PATH, then `.tools/checkov/bin/checkov` under the repository root (an editable install)."""
    out = [option, os.environ.get("VERIFIRST_CHECKOV"), shutil.which("checkov")]
    here = Path(__file__).resolve()
    out += [str(root / ".tools" / "checkov" / "bin" / "checkov") for root in (here.parents[2], here.parents[3])]
    return [c for c in out if c]


def find_checkov(option: str | None = None) -> str | None:
    """The checkov executable to use, or None when there is none.

    Args:
        option: verifier.options.checkov; when given it must exist (no fallback past it).
    """
    if option:
        return option if os.access(option, os.X_OK) and Path(option).is_file() else None
    return next((c for c in checkov_candidates() if os.access(c, os.X_OK) and Path(c).is_file()), None)


def interpreter_of(binary: str) -> str | None:
    """The Python that runs a pip-installed checkov script (its shebang, or pip's /bin/sh
    trampoline for long paths); None when the script is something else."""
    try:
        head = Path(binary).read_bytes()[:1024].decode("utf-8", "replace")
    except OSError:
        return None
    first = head.splitlines()[0] if head else ""
    if not first.startswith("#!"):
        return None
    cmd = first[2:].strip().split()
    if cmd and "python" in Path(cmd[0]).name:
        return cmd[0]
    m = _PIP_TRAMPOLINE.search(head)
    if m and "python" in Path(m.group(1)).name:
        return m.group(1)
    return None


@dataclass
class Finding:
    """One failed checkov check on one resource."""

    check_id: str
    check_name: str
    resource: str
    guideline: str | None = None
    file: str | None = None
    lines: list[int] = field(default_factory=list)

    def message(self) -> str:
        # Offline, checkov has no guideline URLs (they come from its platform); the check name is
        # the guideline sentence ("Ensure ...").
        where = f" ({self.file.lstrip('/')}:{self.lines[0]}-{self.lines[-1]})" if self.file and self.lines else ""
        guide = f" Guideline: {self.guideline}" if self.guideline else ""
        return f"{self.check_id}: {self.check_name}{where}.{guide}"


@dataclass
class ScanResult:
    failed: list[Finding]
    passed: int
    ms: float = 0.0


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _parse(raw: dict) -> ScanResult:
    if raw.get("parsing_errors"):
        names = ", ".join(Path(str(p)).name for p in raw["parsing_errors"])
        raise CheckovError(f"checkov could not parse {names}")
    found = [Finding(f["check_id"], f.get("check_name") or "", f.get("resource") or "", f.get("guideline"),
                     f.get("file"), list(f.get("lines") or [])) for f in raw.get("failed", [])]
    found.sort(key=lambda f: (f.resource, f.check_id))  # checkov's own order varies between runs
    return ScanResult(found, int(raw.get("passed", 0)))


class CheckovScanner:
    """Scans configurations with one checkov installation; safe to share between threads.

    Args:
        binary: the checkov executable (see find_checkov).
        timeout_s: longest a scan (or the worker's start) may take; past it the worker is killed
            and the scan raises CheckovError.
    """

    def __init__(self, binary: str, timeout_s: float = 120.0):
        self.binary, self.timeout_s = binary, timeout_s
        self.python = interpreter_of(binary)
        self.version: str | None = None
        self.start_ms: float | None = None
        self._proc: subprocess.Popen | None = None
        self._buf = b""
        self._stderr = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ worker process
    def start(self) -> None:
        """Start the worker (imports checkov once); a no-op when it runs already."""
        with self._lock:
            self._ensure()

    def _ensure(self) -> None:
        if self.python is None or (self._proc is not None and self._proc.poll() is None):
            return
        self._kill()
        t0 = time.perf_counter()
        self._stderr = tempfile.TemporaryFile()
        try:  # -I: the worker's folder (which holds this checkov.py) must not shadow the package
            self._proc = subprocess.Popen([self.python, "-I", str(WORKER)], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=self._stderr, env=_env())
        except OSError as e:
            raise CheckovError(f"cannot start checkov's Python {self.python}: {e}") from None
        hello = self._read(time.monotonic() + self.timeout_s, "start")
        self.version = hello.get("version")
        self.start_ms = round((time.perf_counter() - t0) * 1000, 1)

    def _stderr_tail(self) -> str:
        if self._stderr is None or self._stderr.closed:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")[-1500:].strip()

    def _read(self, deadline: float, what: str) -> dict:
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill()
                raise CheckovError(f"checkov {what} timed out after {self.timeout_s:g} s")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                tail = self._stderr_tail()
                self._kill()
                raise CheckovError(f"checkov exited during {what}" + (f": {tail}" if tail else ""))
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        msg = json.loads(line)
        if "error" in msg:
            raise CheckovError(f"checkov failed: {msg['error']}")
        return msg

    def _kill(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
            for f in (self._proc.stdin, self._proc.stdout):
                if f:
                    f.close()
        if self._stderr is not None:
            self._stderr.close()
        self._proc, self._buf, self._stderr = None, b"", None

    def close(self) -> None:
        """Stop the worker process."""
        with self._lock:
            self._kill()

    # ------------------------------------------------------------------ scanning
    def scan_many(self, configs: list[dict], checks: list[str] | None = None,
                  skip_checks: list[str] | None = None) -> list[ScanResult]:
        """Scan several configurations in one request (one temp folder each).

        Args:
            configs: {file name: text} per configuration.
            checks: run only these check ids (checkov --check).
            skip_checks: leave these check ids out (checkov --skip-check).

        Raises:
            CheckovError: checkov crashed, timed out or could not parse a file.
        """
        with tempfile.TemporaryDirectory(prefix="vf-checkov-") as tmp:
            dirs = []
            for i, files in enumerate(configs):
                d = Path(tmp) / str(i)
                d.mkdir()
                for name, text in files.items():
                    f = d / _relative(name)
                    f.parent.mkdir(parents=True, exist_ok=True)
                    f.write_text(text, encoding="utf-8")
                dirs.append(str(d))
            t0 = time.perf_counter()
            if self.python is None:
                raw = {d: self._scan_cli(d, checks, skip_checks) for d in dirs}
            else:
                with self._lock:
                    self._ensure()
                    req = {"dirs": dirs, "checks": checks, "skip_checks": skip_checks}
                    try:
                        self._proc.stdin.write((json.dumps(req) + "\n").encode())
                        self._proc.stdin.flush()
                    except OSError as e:
                        self._kill()
                        raise CheckovError(f"checkov worker is gone: {e}") from None
                    raw = self._read(time.monotonic() + self.timeout_s, "scan")["results"]
            ms = (time.perf_counter() - t0) * 1000 / max(1, len(dirs))
            out = [_parse(raw[d]) for d in dirs]
            for r in out:
                r.ms = round(ms, 1)
            return out

    def scan(self, files: dict, checks: list[str] | None = None,
             skip_checks: list[str] | None = None) -> ScanResult:
        """Scan one configuration ({file name: text}); see scan_many."""
        return self.scan_many([files], checks, skip_checks)[0]

    def _scan_cli(self, d: str, checks, skip_checks) -> dict:
        cmd = [self.binary, "-d", d, "--framework", "terraform", "-o", "json", "--skip-download",
               "--download-external-modules", "false"]
        if checks:
            cmd += ["--check", ",".join(checks)]
        if skip_checks:
            cmd += ["--skip-check", ",".join(skip_checks)]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout_s, env=_env())
        except subprocess.TimeoutExpired:
            raise CheckovError(f"checkov timed out after {self.timeout_s:g} s") from None
        if p.returncode not in (0, 1):
            raise CheckovError(f"checkov exited {p.returncode}: {(p.stderr or p.stdout)[-1500:]}")
        try:
            doc = json.loads(p.stdout)
        except json.JSONDecodeError:
            raise CheckovError(f"checkov printed no JSON: {p.stdout[-500:]}") from None
        doc = next((x for x in doc if x.get("check_type") == "terraform"), {}) if isinstance(doc, list) else doc
        res = doc.get("results") or {}
        return {"failed": [{"check_id": f["check_id"], "check_name": f.get("check_name"),
                            "resource": f.get("resource"), "guideline": f.get("guideline"),
                            "file": f.get("file_path"), "lines": f.get("file_line_range")}
                           for f in res.get("failed_checks", [])],
                "passed": len(res.get("passed_checks", [])),
                "parsing_errors": res.get("parsing_errors", [])}


_SCANNERS: dict[tuple, CheckovScanner] = {}
_SCANNERS_LOCK = threading.Lock()


def scanner_for(binary: str, timeout_s: float = 120.0) -> CheckovScanner:
    """One shared scanner (one worker process) per checkov installation and timeout."""
    key = (binary, timeout_s)
    with _SCANNERS_LOCK:
        if key not in _SCANNERS:
            if not _SCANNERS:
                atexit.register(close_scanners)
            _SCANNERS[key] = CheckovScanner(binary, timeout_s)
        return _SCANNERS[key]


def close_scanners() -> None:
    """Stop every worker process."""
    with _SCANNERS_LOCK:
        for s in _SCANNERS.values():
            s.close()
        _SCANNERS.clear()
