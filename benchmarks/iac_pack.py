"""The built-in IaC pack: tasks we wrote, checkable with nothing from ../shared.

Layout, one folder per task under benchmarks/data/iac_pack/<task id>/:
  task.json            {"id", "prompt", "intent", "difficulty", "resource"}
  reference.tf         a config that passes validate, plan and the policy
  policy.rego          Rego v1, package terraform.validation, `default valid := false`
  counterexample.tf    a config that validates and plans but violates the policy
  *.plan.json          `terraform show -json` of reference/counterexample, made by
                       refresh_plans() with real terraform and the schema-serving provider
Every resource the pack uses is in verifiers/terraform/data/iac_builtin_schema.json.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from verifirst.core.atomic import write_text
from verifirst.core.errors import InputError
from verifirst.core.task import Item, Suite
from verifirst.verifiers.terraform.verifier import BUILTIN_SCHEMA

DATA_DIR = Path(__file__).resolve().parent / "data"
PACK_DIR = DATA_DIR / "iac_pack"
SCHEMA_PATH = BUILTIN_SCHEMA  # the terraform verifier's built-in schema covers every pack resource
POLICY_PACKAGE = "terraform.validation"
TASK_FIELDS = ("id", "prompt", "intent", "difficulty", "resource")
FILES = ("reference.tf", "policy.rego", "counterexample.tf")


def _read_task(folder: Path) -> Item:
    meta_path = folder / "task.json"
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise InputError("task folder has no task.json", path=str(folder),
                         expected="task.json with " + ", ".join(TASK_FIELDS)) from None
    except json.JSONDecodeError as e:
        raise InputError(f"not valid JSON: {e.msg}", path=str(meta_path), line=e.lineno) from None
    for f in TASK_FIELDS:
        if f not in meta:
            raise InputError(f"missing field {f!r}", path=str(meta_path), field=f,
                             expected=", ".join(TASK_FIELDS))
    texts = {}
    for name in FILES:
        p = folder / name
        if not p.exists():
            raise InputError(f"missing {name}", path=str(folder), expected=", ".join(FILES))
        texts[name] = p.read_text()
    tid = str(meta["id"])
    return Item(id=tid, inputs={"prompt": meta["prompt"]},
                gold={"reference": texts["reference.tf"], "rego_policy": texts["policy.rego"],
                      "intent": meta["intent"], "counterexample": texts["counterexample.tf"],
                      "policy_package": POLICY_PACKAGE},
                group=tid,
                meta={"difficulty": int(meta["difficulty"]), "resource": meta["resource"],
                      "schema": str(SCHEMA_PATH), "source": "builtin-pack"})


def load_pack(directory: str | os.PathLike = PACK_DIR) -> Suite:
    d = Path(directory)
    if not d.is_dir():
        raise InputError("IaC pack folder not found", path=str(d), expected="a folder of task folders")
    items = [_read_task(f) for f in sorted(d.iterdir()) if f.is_dir()]
    if not items:
        raise InputError("IaC pack folder holds no tasks", path=str(d))
    return Suite("iac-pack", items, description="built-in NL->Terraform tasks with Rego v1 policies",
                 meta={"schema": str(SCHEMA_PATH)})


def stored_plan(item_id: str, kind: str = "reference", directory: str | os.PathLike = PACK_DIR) -> dict:
    """The stored `terraform show -json` plan of a task's reference or counterexample."""
    p = Path(directory) / item_id / f"{kind}.plan.json"
    return json.loads(p.read_text())


def refresh_plans(directory: str | os.PathLike = PACK_DIR, terraform: str = "terraform") -> list[str]:
    """Rebuild every *.plan.json with real terraform and the schema-serving provider.

    Returns the task ids whose config failed validate or plan (an empty list is the goal).
    """
    from verifirst.verifiers.terraform.tf_provider import ProviderProcess

    failed: list[str] = []
    suite = load_pack(directory)
    with ProviderProcess(SCHEMA_PATH) as prov:
        env = dict(os.environ, **prov.env, TF_IN_AUTOMATION="1", CHECKPOINT_DISABLE="1")
        for item in suite.items:
            for kind in ("reference", "counterexample"):
                work = Path(tempfile.mkdtemp(prefix="iacpack-"))
                try:
                    shutil.copy(Path(directory) / item.id / f"{kind}.tf", work / "main.tf")
                    run = lambda *a: subprocess.run([terraform, *a], cwd=work, env=env,
                                                    capture_output=True, text=True)
                    if run("plan", "-out=tfplan", "-input=false", "-refresh=false").returncode:
                        failed.append(f"{item.id}/{kind}")
                        continue
                    shown = run("show", "-json", "tfplan")
                    plan = json.loads(shown.stdout)
                    plan.pop("timestamp", None)  # keeps refreshes diff-free
                    write_text(Path(directory) / item.id / f"{kind}.plan.json",
                               json.dumps(plan, indent=1, sort_keys=True) + "\n")
                finally:
                    shutil.rmtree(work, ignore_errors=True)
    return failed


if __name__ == "__main__":
    bad = refresh_plans()
    print(json.dumps({"failed": bad}))
    raise SystemExit(1 if bad else 0)
