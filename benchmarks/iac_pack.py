"""The built-in IaC packs: tasks we wrote, checkable with nothing from ../shared.

One pack per provider: AWS (benchmarks/data/iac_pack/, 25 tasks) and Google Cloud, Azure and
Kubernetes (benchmarks/data/iac_pack_<provider>/, ten each); `load_pack(provider="google")`, or
`[suite] name = "iac-builtin"` with `options = { provider = "google" }` in an experiment file.
Layout, one folder per task under the pack's folder, <task id>/:
  task.json            {"id", "prompt", "intent", "difficulty", "resource"}
  reference.tf         a config that passes validate, plan and the policy
  policy.rego          Rego v1, package terraform.validation, `default valid := false`
  counterexample.tf    a config that validates and plans but violates the policy
  *.plan.json          `terraform show -json` of reference/counterexample, made by
                       refresh_plans() with real terraform and the schema-serving provider
Every resource the AWS pack uses is in verifiers/terraform/data/iac_builtin_schema.json; the
other packs are checked against their provider's shipped schema (verifirst schema list).
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
SCHEMA_PATH = BUILTIN_SCHEMA  # the terraform verifier's built-in schema covers every AWS pack resource
# provider -> the pack's folder under data/
PACKS = {"aws": "iac_pack", "google": "iac_pack_google", "azurerm": "iac_pack_azurerm",
         "kubernetes": "iac_pack_kubernetes"}
POLICY_PACKAGE = "terraform.validation"
TASK_FIELDS = ("id", "prompt", "intent", "difficulty", "resource")
FILES = ("reference.tf", "policy.rego", "counterexample.tf")


def pack_dir(provider: str = "aws") -> Path:
    """The folder of a provider's built-in pack.

    Args:
        provider: aws | google | azurerm | kubernetes.

    Raises:
        InputError: a provider with no built-in pack, naming the ones there are.
    """
    if provider not in PACKS:
        raise InputError(f"no built-in IaC pack for provider {provider!r}", field="suite.options.provider",
                         expected=" | ".join(PACKS))
    return DATA_DIR / PACKS[provider]


def schema_path(provider: str = "aws") -> Path:
    """The schema a provider's pack was written and its plans made against.

    Args:
        provider: aws (the 21-type built-in subset) or a provider with a shipped schema.
    """
    if provider == "aws":
        return SCHEMA_PATH
    from verifirst.verifiers.terraform.tf_schema import choose_shipped

    chosen = choose_shipped(None, provider)
    if chosen is None:
        raise InputError(f"no shipped schema for provider {provider!r}", field="provider",
                         expected="a provider listed by `verifirst schema list`")
    return chosen.path


def _read_task(folder: Path, schema: Path = SCHEMA_PATH) -> Item:
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
                      "schema": str(schema), "source": "builtin-pack"})


def load_pack(directory: str | os.PathLike | None = None, provider: str = "aws") -> Suite:
    """A built-in pack (or a folder in its layout) as a Suite.

    Args:
        directory: a folder of task folders; None: the provider's built-in pack.
        provider: aws | google | azurerm | kubernetes: whose pack, and the schema its items name.

    Raises:
        InputError: an unknown provider, a missing folder, or a task folder missing a file or field.
    """
    default = pack_dir(provider)  # an unknown provider raises here, naming the packs there are
    d = Path(directory) if directory is not None else default
    schema = schema_path(provider)
    if not d.is_dir():
        raise InputError("IaC pack folder not found", path=str(d), expected="a folder of task folders")
    items = [_read_task(f, schema) for f in sorted(d.iterdir()) if f.is_dir()]
    if not items:
        raise InputError("IaC pack folder holds no tasks", path=str(d))
    name = "iac-pack" if provider == "aws" else f"iac-pack-{provider}"
    return Suite(name, items, description=f"built-in NL->Terraform tasks ({provider}) with Rego v1 policies",
                 meta={"schema": str(schema), "provider": provider})


def stored_plan(item_id: str, kind: str = "reference", directory: str | os.PathLike | None = None,
                provider: str = "aws") -> dict:
    """The stored `terraform show -json` plan of a task's reference or counterexample.

    Args:
        item_id: the task id.
        kind: reference | counterexample.
        directory: the pack folder; None: the provider's built-in pack.
        provider: whose pack, when directory is None.
    """
    p = (Path(directory) if directory is not None else pack_dir(provider)) / item_id / f"{kind}.plan.json"
    return json.loads(p.read_text())


def refresh_plans(directory: str | os.PathLike | None = None, terraform: str = "terraform",
                  provider: str = "aws") -> list[str]:
    """Rebuild every *.plan.json with real terraform and the schema-serving provider.

    Args:
        directory: the pack folder; None: the provider's built-in pack.
        terraform: the terraform binary.
        provider: whose schema the provider process serves (and whose pack, when directory is None).

    Returns the task ids whose config failed validate or plan (an empty list is the goal).
    """
    from verifirst.verifiers.terraform.tf_provider import ProviderProcess

    failed: list[str] = []
    directory = Path(directory) if directory is not None else pack_dir(provider)
    suite = load_pack(directory, provider)
    with ProviderProcess(schema_path(provider)) as prov:
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
    import sys

    bad = [f for p in (sys.argv[1:] or ["aws"]) for f in refresh_plans(provider=p)]
    print(json.dumps({"failed": bad}))
    raise SystemExit(1 if bad else 0)
