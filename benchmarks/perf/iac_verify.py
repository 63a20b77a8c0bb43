"""ms per config for each Terraform verifier backend, in one run, and their agreement.

    python benchmarks/perf/iac_verify.py [--json] [--n 40] [--naive-n 3] [--schema F] [--out F]
        [--gates validate,plan,opa,checkov] [--suite dev40|builtin|modules] [--only python|terraform] [--repeat N]

Without --schema on dev40 the verifier uses its default: the shipped AWS schema that each
config's required_providers constraint picks (the newest when none); --schema F pins one file.

Configs: the IaC-Eval dev40 references plus a few broken variants (hallucinated argument, cycle,
unknown type), each with its own policy; `--suite modules`: the configurations that call modules
(tests/data/tf_modules), each a directory. Backends: 1 = terraform + schema provider kept alive
(reattach), 1-naive = terraform starting the provider itself (dev_overrides only), 2 = pure
Python (hcl_check + plan_synth, when present), 3 = real providers (when a mirror has them).
Goals: backend 1 <= 1500 ms/config, backend 2 <= 20 ms/config (without the checkov gate: with
it, each config that passes its policy also pays a checkov scan, reported as checkov_ms).
"""
from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
DEV40 = DATA / "iac-eval-v1" / "iac_eval_v1_dev40.csv"

BROKEN = {
    "self_defined": 'resource "aws_s3_bucket" "b" {\n  bucket = "x"\n  versioning_enabled = true\n}\n',
    "cycle": "".join(
        f'resource "aws_security_group" "{a}" {{\n  name = "{a}"\n  ingress {{\n    from_port = 0\n'
        f'    to_port = 0\n    protocol = "-1"\n    security_groups = [aws_security_group.{b}.id]\n'
        "  }\n}\n" for a, b in (("a", "b"), ("b", "a"))),
    "invalid_type": 'resource "aws_s3_bucket_versioning_enabled" "x" {\n  bucket = "b"\n}\n',
    "missing_required": 'resource "aws_iam_role" "r" {\n  name = "r"\n}\n',
}


PACK = ROOT / "benchmarks" / "data" / "iac_pack"
PACK_SCHEMA = ROOT / "verifiers" / "terraform" / "data" / "iac_builtin_schema.json"


MODULES = ROOT / "tests" / "data" / "tf_modules"


def _module_configs(n: int) -> list[tuple[str, str, str | None]]:
    """The configurations that call modules (tests/data/tf_modules), each a directory (a root, its
    local modules, a vendored .terraform/modules tree); their faulty variants are timed by
    benchmarks/studies/tf_module_agreement.py."""
    return [(d.name, str(d), None) for d in sorted(p for p in MODULES.iterdir() if p.is_dir())][:n]


def configs(n: int, suite: str) -> list[tuple[str, str, str | None]]:
    if suite == "modules":
        return _module_configs(n)
    if suite == "builtin":  # references and counterexamples of the built-in pack
        out = []
        for d in sorted(PACK.iterdir())[:n]:
            pol = (d / "policy.rego").read_text() if (d / "policy.rego").is_file() else None
            for f in ("reference.tf", "counterexample.tf"):
                if (d / f).is_file():
                    out.append((f"{d.name}/{f}", (d / f).read_text(), pol))
        return out
    rows = list(csv.DictReader(DEV40.open(newline="", encoding="utf-8")))[:n]
    out = [(f"dev40-{i}", r["Reference output"], r["Rego intent"] or None) for i, r in enumerate(rows)]
    return out + [(k, v, None) for k, v in BROKEN.items()]


def run_backend(name: str, verifier, cases) -> dict:
    per, cpu, verdicts, scans = [], [], {}, []
    for cid, hcl, pol in cases:
        t0, c0 = time.perf_counter(), time.process_time()
        v = verifier.verify_config(hcl, policy=pol)
        per.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
        verdicts[cid] = {"stage": v.stage, "classes": v.error_classes}
        if "checkov_ms" in v.timings:
            scans.append(v.timings["checkov_ms"])
    out = {"backend": name, "n": len(per),
           "ms_per_config": {"median": round(statistics.median(per), 1), "mean": round(statistics.mean(per), 1),
                             "max": round(max(per), 1)},
           # this process's CPU: the python backend's whole cost, robust to other load on the machine
           # (terraform's own work runs in child processes and is not in it)
           "cpu_ms_per_config": {"median": round(statistics.median(cpu), 1), "mean": round(statistics.mean(cpu), 1),
                                 "max": round(max(cpu), 1)},
           "label": getattr(verifier, "_label", None), "verdicts": verdicts}
    if scans:
        out["checkov_ms"] = {"scanned": len(scans), "median": round(statistics.median(scans), 1),
                             "mean": round(statistics.mean(scans), 1), "max": round(max(scans), 1)}
    return out


def start_gates(verifier) -> float | None:
    """Start what the gates need before timing (the checkov worker imports checkov once: seconds)."""
    if "checkov" not in verifier.gates:
        return None
    t0 = time.perf_counter()
    verifier.preflight()
    return round((time.perf_counter() - t0) * 1000, 1)


def agreement(a: dict, b: dict) -> dict:
    common = sorted(set(a["verdicts"]) & set(b["verdicts"]))
    same_stage = [c for c in common if a["verdicts"][c]["stage"] == b["verdicts"][c]["stage"]]
    same_cls = [c for c in common if a["verdicts"][c] == b["verdicts"][c]]
    return {"pair": f"{a['backend']} vs {b['backend']}", "n": len(common),
            "stage_agreement": round(len(same_stage) / len(common), 4) if common else None,
            "stage_and_class_agreement": round(len(same_cls) / len(common), 4) if common else None,
            "disagreements": {c: [a["verdicts"][c], b["verdicts"][c]] for c in common if c not in same_stage}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--n", type=int, default=40, help="dev40 references to use")
    ap.add_argument("--naive-n", type=int, default=3, help="configs for the naive (no reattach) run")
    ap.add_argument("--suite", choices=["dev40", "builtin", "modules"],
                    default="dev40" if DEV40.is_file() else "builtin")
    ap.add_argument("--schema", default=None,
                    help="default: the verifier's shipped schemas (dev40) or the built-in schema (builtin)")
    ap.add_argument("--out", type=Path, default=None, help="write the JSON result (with the machine) here")
    ap.add_argument("--only", choices=["python", "terraform"], default=None, help="run this backend alone")
    ap.add_argument("--repeat", type=int, default=1, help="verify each config this many times (a small suite's "
                    "median from more than one run each)")
    ap.add_argument("--gates", default=None,
                    help="comma list of validate,plan,opa,checkov (default: validate,plan,opa)")
    args = ap.parse_args(argv)
    gates = [g.strip() for g in args.gates.split(",") if g.strip()] if args.gates else None
    from verifirst.benchmarks.perf.record import emit, machine

    started = machine()
    if args.suite == "builtin":
        args.schema = args.schema or str(PACK_SCHEMA)

    from verifirst.verifiers.terraform import verifier as TV
    from verifirst.verifiers.terraform.terraform_cli import find_real_provider, find_terraform
    cases = configs(args.n, args.suite) * max(1, args.repeat)
    from verifirst.verifiers.terraform import tf_schema
    load_ms = {}
    for s in tf_schema.shipped_schemas():  # first parse in this process; cached afterwards
        t0 = time.perf_counter()
        tf_schema.load_schema(s.path)
        load_ms[f"{s.provider} {s.version}"] = round((time.perf_counter() - t0) * 1000, 1)
    report: dict = {"benchmark": "iac_verify", "suite": args.suite, "configs": len(cases) // max(1, args.repeat),
                    "repeat": max(1, args.repeat),
                    "schema": args.schema or "default (shipped, by required_providers)",
                    "schema_load_ms": load_ms, "backends": [], "skipped": {},
                    "gates": gates or ["validate", "plan", "opa"]}

    if args.only == "python":
        report["skipped"]["terraform"] = "--only python"
    elif find_terraform():
        t0 = time.perf_counter()
        b1 = TV.TerraformVerifier(backend="terraform", schema=args.schema, gates=gates)
        report["checkov_start_ms"] = start_gates(b1)
        b1.verify_config(cases[0][1])  # starts the shared provider process
        report["provider_start_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        res = run_backend("terraform", b1, cases)
        res["label"] = TV._runner("terraform", b1.schema_for({}), None, None).label
        res["provider_process"] = "one for all configs (TF_REATTACH_PROVIDERS)"
        report["backends"].append(res)
        if args.naive_n > 0:
            naive = TV.TerraformVerifier(backend="terraform", schema=args.schema, reattach=False, gates=gates)
            report["backends"].append(run_backend("terraform-naive", naive, cases[:args.naive_n]))
    else:
        report["skipped"]["terraform"] = "no terraform binary"

    try:
        if args.only == "terraform":
            raise ImportError("--only terraform")
        from verifirst.verifiers.terraform import hcl_check, plan_synth  # noqa: F401
        b2 = TV.TerraformVerifier(backend="python", schema=args.schema, gates=gates)
        report.setdefault("checkov_start_ms", start_gates(b2))
        b2.verify_config(cases[0][1])  # schema parse, cached afterwards
        report["backends"].append(run_backend("python", b2, cases))
    except ImportError as exc:
        report["skipped"]["python"] = f"pure-Python backend not available: {exc}"

    if find_real_provider() and args.only is None:
        b3 = TV.TerraformVerifier(backend="real", gates=gates)
        report["backends"].append(run_backend("real", b3, cases[:5]))
    else:
        report["skipped"]["real"] = "no real hashicorp/aws provider in a plugin cache or mirror"

    bs = report["backends"]
    report["agreement"] = [agreement(bs[i], bs[j]) for i in range(len(bs)) for j in range(i + 1, len(bs))]
    report["goals"] = {b["backend"]: {"terraform": 1500, "python": 20}.get(b["backend"]) for b in bs}
    if args.json or args.out:
        emit(report, started, args.out, as_json=False)
    else:
        for b in bs:
            ck = b.get("checkov_ms")
            print(f"{b['backend']:<16} n={b['n']:<3} median {b['ms_per_config']['median']} ms/config "
                  f"(mean {b['ms_per_config']['mean']}, max {b['ms_per_config']['max']}; process CPU median "
                  f"{b['cpu_ms_per_config']['median']} ms)"
                  + (f"; checkov median {ck['median']} ms on {ck['scanned']} scanned" if ck else ""))
        for a in report["agreement"]:
            print(f"{a['pair']}: stage agreement {a['stage_agreement']} on {a['n']}")
        print("schema parse (once per process): " + ", ".join(f"{k} {v} ms" for k, v in load_ms.items()))
        if report.get("checkov_start_ms") is not None:
            print(f"checkov worker start (once per process): {report['checkov_start_ms']} ms")
        for k, why in report["skipped"].items():
            print(f"skipped {k}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
