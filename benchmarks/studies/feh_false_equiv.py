"""False-equivalence probe of FEH: pairs that are NOT equivalent, and how many FEH passes.

Three sources, each pair run in the sandbox (runs and embeddings cached, as feh_quality.py does):

- NL2SH-ALFA: the 600 pairs of feh_quality.py (300 rotated = not equivalent); accuracy on the
  conclusive pairs by the same grouped 5-fold CV, INCONCLUSIVE counted apart.
- InterCode-Bash: each gold against the gold 10 tasks on (not equivalent) and against itself,
  in the task's own fixture, with the parameters fitted on NL2SH-ALFA.
- Synthetic tasks (SYNTHETIC below), judged end to end by FehVerifier.verify: empty
  prerequisites, files the setup creates, scripts that take arguments, usage lines, user and
  group administration (ADMIN, in the `sysadmin` fixture; each gold also against itself).
- The EAbench-layout tasks under tests/data/eabench_tiny: FEH against the tasks' own checks
  (bash-tests), reported apart (not in the total: the checks, not labels, say what fails).

`--label before|after` stores the report under that key of the output file (the other key is
kept), so one file holds the probe on the code before and after a change.

    python benchmarks/studies/feh_false_equiv.py --label after [--out PATH] [--cache DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from verifirst.core.task import Item  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "perf" / "results" / "feh_false_equiv.json"
EATINY = Path(__file__).resolve().parents[2] / "tests" / "data" / "eabench_tiny"

_TWIN = ('if [ $# -ne 1 ]; then echo "Usage: $0 <limit>  (prints twin primes up to limit)"; exit 1; fi\n'
         'p(){ local n=$1 i; [ $n -lt 2 ] && return 1; for ((i=2;i*i<=n;i++)); do ((n%i==0)) && return 1; done; }\n'
         'for ((k=3;k+2<=$1;k++)); do p $k && p $((k+2)) && echo "$k $((k+2))"; done')
_FIB = ('if [ $# -ne 1 ]; then echo "Usage: $0 <count>  (prints Fibonacci numbers)"; exit 1; fi\n'
        'a=0; b=1; for ((i=0;i<$1;i++)); do echo $a; t=$((a+b)); a=$b; b=$t; done')
_FIB2 = ('[ -z "$1" ] && { echo "usage: fib N"; exit 2; }\n'
         'x=0; y=1; n=0; while [ $n -lt $1 ]; do echo $x; z=$((x+y)); x=$y; y=$z; n=$((n+1)); done')
_SQUARES = ('if [ -z "$1" ]; then echo "Usage: $0 N" >&2; exit 1; fi\n'
            'for ((i=1;i<=$1;i++)); do echo $((i*i)); done')
_ARGS = "set -- 12\n{command}"
_NOCMD = "#!/bin/bash\n\n"
_NOTES = "#!/bin/bash\nmkdir -p dir/sub\ntouch dir/a.txt dir/b.txt dir/sub/c.log\necho data > dir/d.txt\n"

# User and group administration, run in the sandbox's sysadmin mode (a writable /etc per run):
# (id, gold, candidate, extra gold fields); each pair differs in /etc or in its exit status.
ADMIN: list[tuple[str, str, str, dict]] = [
    ("admin-useradd", "useradd alice", "useradd bob", {}),
    ("admin-gpasswd", "gpasswd -r slackers", "gpasswd -R slackers", {"prerequisite": "groupadd slackers\n"}),
    ("admin-passwd", "passwd -l alice", "passwd -u alice", {"prerequisite": "useradd alice\n"}),
    ("admin-groupadd", "groupadd devs", "groupadd ops", {}),
    ("admin-usermod", "usermod -aG wheel alice", "usermod -L alice",
     {"prerequisite": "useradd alice\ngroupadd wheel\n"}),
    ("admin-userdel", "userdel alice", "groupdel alice", {"prerequisite": "useradd alice\n"}),
]

# (id, kind, gold, candidate, label, extra gold fields)
SYNTHETIC: list[tuple[str, str, str, str, bool, dict]] = [
    ("empty-pre-rev", "empty_prerequisite", "echo 12345 | rev", "uname -n", False, {"prerequisite": _NOCMD}),
    ("empty-pre-df", "empty_prerequisite", "df / | awk 'NR==2{print $4}'", "df / | awk 'NR==2{print $3}'", False,
     {"prerequisite": _NOCMD}),
    ("empty-pre-date", "empty_prerequisite", "date +%Y", "whoami", False, {"prerequisite": "# nothing to set up\n"}),
    ("empty-pre-wc", "empty_prerequisite", "printf 'a\\nb\\n' | wc -l", "echo hi", False,
     {"prerequisite": "#!/bin/sh\n# comment only\n\n"}),
    ("empty-pre-eq", "empty_prerequisite", "echo 12345 | rev", "rev <<< 12345", True, {"prerequisite": _NOCMD}),
    ("setup-count", "setup_files", "find dir -type f | wc -l", "echo -n | md5sum", False, {"prerequisite": _NOTES}),
    ("setup-ls", "setup_files", "ls dir", "true", False, {"prerequisite": _NOTES}),
    ("setup-cat", "setup_files", "cat dir/d.txt", "echo -n", False, {"prerequisite": _NOTES}),
    ("setup-rm", "setup_files", "rm dir/a.txt", "rm dir/b.txt", False, {"prerequisite": _NOTES}),
    ("setup-touch", "setup_files", "touch dir/new.txt", "echo ok > /dev/null", False, {"prerequisite": _NOTES}),
    ("setup-count-eq", "setup_files", "find dir -type f | wc -l", "ls -R dir | grep -c '\\.'", True,
     {"prerequisite": _NOTES}),
    ("setup-rm-eq", "setup_files", "rm dir/a.txt", "unlink dir/a.txt", True, {"prerequisite": _NOTES}),
    ("usage-twin-fib", "usage_lines", _TWIN, _FIB, False, {}),
    ("usage-fib-squares", "usage_lines", _FIB, _SQUARES, False, {}),
    ("usage-twin-fib2", "usage_lines", _TWIN, _FIB2, False, {}),
    ("args-twin-fib", "argument_scripts", _TWIN, _FIB, False, {"harness": _ARGS}),
    ("args-fib-squares", "argument_scripts", _FIB, _SQUARES, False, {"harness": _ARGS}),
    ("args-fib-fib2", "argument_scripts", _FIB, _FIB2, True, {"harness": _ARGS}),
    *((sid, "user_group_admin", gold, cand, False, {"fixture": "sysadmin", **extra})
      for sid, gold, cand, extra in ADMIN),
    # each administration gold against itself: judged by its /etc effect, so the mode really runs it
    *((f"{sid}-self", "user_group_admin", gold, gold, True, {"fixture": "sysadmin", **extra})
      for sid, gold, _, extra in ADMIN),
]


def synthetic_probe(verifier) -> dict:
    """Each synthetic pair through FehVerifier.verify; counts per kind and the rows."""
    rows, kinds = [], {}
    for sid, kind, gold, cand, label, extra in SYNTHETIC:
        item = Item(id=sid, inputs={"task": sid}, gold={"command": gold, "fixture": "empty", **extra})
        try:
            v = verifier.verify(item, cand)
            said = "inconclusive" if v.inconclusive else ("equivalent" if v.passed else "not_equivalent")
            rule = v.details.get("rule")
        except Exception as e:  # a verifier error is counted apart, never as a verdict
            said, rule = "error", f"{type(e).__name__}: {e}"[:200]
        k = kinds.setdefault(kind, {"pairs": 0, "not_equivalent_pairs": 0, "false_equivalent": 0,
                                    "equivalent_pairs": 0, "true_equivalent": 0, "inconclusive": 0, "error": 0})
        k["pairs"] += 1
        k["not_equivalent_pairs" if not label else "equivalent_pairs"] += 1
        k["false_equivalent"] += (not label and said == "equivalent")
        k["true_equivalent"] += (label and said == "equivalent")
        k["inconclusive"] += said == "inconclusive"
        k["error"] += said == "error"
        rows.append({"id": sid, "kind": kind, "fixture": item.gold["fixture"], "label": label, "verdict": said,
                     "rule": rule})
    return {"kinds": kinds, "rows": rows}


def eabench_agreement(root: Path, feh) -> dict:
    """FEH against the tasks' own checks (bash-tests) on an EAbench-layout dir: each gold and
    the next task's gold as candidates; agreement where both decide, and FEH's equivalences of
    scripts the check fails."""
    from verifirst.benchmarks.eabench import load_eabench
    from verifirst.verifiers.bash.oracle import BashTestsVerifier

    items = load_eabench(root).items
    oracle = BashTestsVerifier()
    rows, agree, both, fe, failing = [], 0, 0, 0, 0
    for i, it in enumerate(items):
        for cand_item in (it, items[(i + 1) % len(items)]):
            o = oracle.verify(it, cand_item.gold["command"])
            f = feh.verify(it, cand_item.gold["command"])
            rows.append({"task": it.id, "candidate": cand_item.id, "check": o.passed, "feh": f.passed})
            if o.passed is False:
                failing += 1
                fe += f.passed is True
            if o.passed is not None and f.passed is not None:
                both += 1
                agree += o.passed == f.passed
    return {"dir": root.name, "pairs": len(rows), "decided_by_both": both,
            "agreement": round(agree / both, 3) if both else None, "check_fails": failing,
            "feh_equivalent_where_check_fails": fe, "rows": rows}


def nl2sh_probe(cache_dir: Path, embed, workers: int) -> dict:
    """The 600 NL2SH-ALFA pairs: CV accuracy on conclusive pairs, false equivalences of 300 rotated."""
    from verifirst.benchmarks.nl2sh import load_nl2sh, nl2sh_pairs
    from verifirst.benchmarks.studies.feh_quality import RunCache, cv_mode, pair_features, run_pairs

    pairs = nl2sh_pairs(load_nl2sh(None))
    runs, info = run_pairs(pairs, RunCache(cache_dir / "nl2sh_pairs.jsonl"), workers=workers)
    feats = pair_features(pairs, runs, embed)
    sec, _ = cv_mode(feats, [p["label"] for p in pairs], [p["group"] for p in pairs], pairs, 5, 1,
                     inconclusive=True)
    s0 = sec["seed0"]
    return {"pairs": len(pairs), "accuracy_conclusive": s0["accuracy"], "wilson95": s0["wilson95"],
            "inconclusive": s0["inconclusive"], "not_equivalent_pairs": s0["false_equivalence"]["of"],
            "false_equivalent": s0["false_equivalence"]["count"], "run": info}


def intercode_probe(data_dir: Path, cache_dir: Path, embed, params, workers: int) -> dict:
    from verifirst.benchmarks.intercode import load_intercode
    from verifirst.benchmarks.studies.feh_new_user_probe import count, probe_pairs
    from verifirst.benchmarks.studies.feh_quality import RunCache, pair_features, run_pairs

    pairs = probe_pairs(load_intercode(data_dir).items, 10, "own")
    runs, info = run_pairs(pairs, RunCache(cache_dir / "intercode_probe.jsonl"), workers=workers)
    c = count(pair_features(pairs, runs, embed), pairs, params)
    rot = c["rotated"]
    return {"not_equivalent_pairs": rot["pairs"], "false_equivalent": rot["false_equivalent"],
            "inconclusive": rot["inconclusive"], "self_pairs": c["self"]["pairs"],
            "self_equivalent": c["self"]["equivalent"], "self_inconclusive": c["self"]["inconclusive"],
            "run": info}


def main(argv: list[str] | None = None) -> int:
    from verifirst.benchmarks.studies.feh_new_user_probe import default_intercode_dir
    from verifirst.benchmarks.studies.feh_quality import EmbedCache, default_cache_dir
    from verifirst.verifiers.bash._feh_params import fitted_nl2sh
    from verifirst.verifiers.bash.feh import FehVerifier

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--label", required=True, help="key of this report in the output (before, after)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--cache", type=Path, default=None, help="dir for cached sandbox runs")
    ap.add_argument("--intercode", type=Path, default=None)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    cache_dir = a.cache or default_cache_dir()
    embed = EmbedCache(cache_dir / "minilm_vectors.npz")
    params = fitted_nl2sh()
    report: dict = {"params": params.as_dict()}
    report["nl2sh"] = nl2sh_probe(cache_dir, embed, a.workers)
    ic = a.intercode or default_intercode_dir()
    report["intercode"] = (intercode_probe(ic, cache_dir, embed, params, a.workers) if ic.is_dir()
                           else {"skipped": f"no InterCode-Bash data at {ic}"})
    report["synthetic"] = synthetic_probe(FehVerifier(params, embed=embed))
    report["eabench_tiny"] = eabench_agreement(EATINY, FehVerifier(params, embed=embed))
    neg = fe = 0
    for sec in (report["nl2sh"], report["intercode"], *report["synthetic"]["kinds"].values()):
        neg += sec.get("not_equivalent_pairs", 0)
        fe += sec.get("false_equivalent", 0)
    report["total"] = {"not_equivalent_pairs": neg, "false_equivalent": fe,
                       "false_equivalence_rate": round(fe / neg, 3) if neg else 0.0}
    report["wall_s"] = round(time.perf_counter() - t0, 1)
    report["date"] = time.strftime("%Y-%m-%d", time.gmtime())
    old = json.loads(a.out.read_text(encoding="utf-8")) if a.out.exists() else {}
    old[a.label] = report
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(old, indent=2) + "\n", encoding="utf-8")
    t = report["total"]
    print(f"{a.label}: false equivalences {t['false_equivalent']}/{t['not_equivalent_pairs']} "
          f"({t['false_equivalence_rate']:.3f}); NL2SH accuracy {report['nl2sh']['accuracy_conclusive']:.3f} "
          f"({report['nl2sh']['inconclusive']} inconclusive); {report['wall_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
