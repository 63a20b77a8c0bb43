"""A long-lived checkov scanner, run by the Python of checkov's own venv (it cannot import verifirst).

checkov takes seconds to import and tens of milliseconds to scan a small configuration, so one
process serves every scan. Protocol, one JSON object per line:
  out: {"ready": true, "version": "3.3.30"} once checkov is imported
  in:  {"dirs": [dir, ...], "checks": [...] | null, "skip_checks": [...] | null}
  out: {"results": {dir: {"failed": [...], "passed": n, "parsing_errors": [...]}}} or {"error": "..."}
"""
import json
import logging
import os
import sys


def _record(rec) -> dict:
    return {"check_id": rec.check_id, "check_name": rec.check_name, "resource": rec.resource,
            "guideline": rec.guideline, "file": rec.file_path, "lines": list(rec.file_line_range or [])}


def main() -> None:
    # The protocol owns the real stdout; anything checkov prints goes to stderr instead.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    logging.disable(logging.CRITICAL)  # a crashing single check is logged with a traceback
    from checkov.runner_filter import RunnerFilter
    from checkov.terraform.runner import Runner
    from checkov.version import version

    out.write(json.dumps({"ready": True, "version": version}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            results = {}
            for d in req["dirs"]:
                flt = RunnerFilter(framework=["terraform"], checks=req.get("checks") or None,
                                   skip_checks=req.get("skip_checks") or None,
                                   download_external_modules=False, show_progress_bar=False)
                rep = Runner().run(root_folder=d, runner_filter=flt)
                results[d] = {"failed": [_record(r) for r in rep.failed_checks],
                              "passed": len(rep.passed_checks),
                              "parsing_errors": list(rep.parsing_errors)}
            out.write(json.dumps({"results": results}) + "\n")
        except Exception as e:  # reported to the caller, which counts the item as a verifier error
            out.write(json.dumps({"error": f"{type(e).__name__}: {e}"[:2000]}) + "\n")


if __name__ == "__main__":
    main()
