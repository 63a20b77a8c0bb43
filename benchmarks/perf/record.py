"""Results files of the performance benchmarks: each carries the machine it ran on (cores, load
average when it started) and the date, so a number is never read without its conditions.

As a command it wraps a benchmark that prints JSON but has no --out of its own:

    python benchmarks/perf/record.py --out benchmarks/perf/results/feh_quality.json -- \
        python benchmarks/studies/feh_quality.py --json
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    """The conditions to record at a benchmark's start: cores, load average, date (UTC)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count()
    load = os.getloadavg()
    return {"nproc": usable, "cpu_count": os.cpu_count(),
            "loadavg_start": [round(x, 2) for x in load],
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "python": platform.python_version(), "platform": platform.platform(terse=True)}


def emit(result: dict, started: dict, out: Path | None, as_json: bool = True) -> None:
    """Attach the machine record to a benchmark's result; write it to `out`, or print it.

    Args:
        result: the benchmark's JSON-able result.
        started: what machine() returned when the benchmark started; the load average now is added.
        out: the results file to write (atomically); None prints to stdout instead.
        as_json: when printing, one line (True) or indented (False).
    """
    from verifirst.core.atomic import write_json

    # the load at the end too: a figure measured while others started work on the machine shows it
    rec = {**result, "machine": {**started, "loadavg_end": [round(x, 2) for x in os.getloadavg()]}}
    if out is not None:
        write_json(out, rec)
        print(f"wrote {out}", file=sys.stderr)
    else:
        print(json.dumps(rec, indent=None if as_json else 2))


def load_result(path: Path) -> dict[str, Any]:
    """A results file as a dict; ValueError names the file when it is absent or not a JSON object.

    Args:
        path: the results file.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: no such results file (run `make bench`)") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{e.lineno}: not JSON ({e.msg})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}:1: expected a JSON object, got {type(data).__name__}")
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="results file to write")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the benchmark command")
    a = ap.parse_args(argv)
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        print("record.py: no command given after --", file=sys.stderr)
        return 2
    started = machine()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        print(f"record.py: {' '.join(cmd)} exited {proc.returncode}; {a.out} not written", file=sys.stderr)
        return proc.returncode
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        print(f"record.py: output of {' '.join(cmd)}, line {e.lineno}: not JSON ({e.msg}); "
              f"{a.out} not written", file=sys.stderr)
        return 2
    if not isinstance(result, dict):
        print(f"record.py: output of {' '.join(cmd)} is not a JSON object; {a.out} not written", file=sys.stderr)
        return 2
    emit(result, started, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
