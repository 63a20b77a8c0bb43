"""A schema-only Terraform provider: serves a `terraform providers schema -json` file over the
plugin protocol (v6, via the `tf` package's generated gRPC code) and plans computed attributes
as unknown. Real terraform then runs validate/plan/show offline against the real schema.

Two ways to run it:
- managed: terraform starts it itself (dev_overrides launcher), TLS handshake on stdout;
- reattach: one long-lived process serves many terraform runs (TF_REATTACH_PROVIDERS), which
  saves the ~6 provider starts a single plan+show otherwise costs.

This module is the client side (the provider process, launchers, declared types); the schema
(_tf_provider_schema), its values (_tf_provider_values) and the server (_tf_provider_server)
live in their own modules and are re-exported here.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

# the schema, values and server modules; their names are re-exported (callers and tests use them here)
from verifirst.verifiers.terraform._tf_provider_schema import (_attr_pb, _block_pb, _pb, _schema_pb,  # noqa: F401
                                                               load_schema_dict, provider_names, short_name)
from verifirst.verifiers.terraform._tf_provider_server import (SchemaCatalog, _grpc_server,  # noqa: F401
                                                               _levenshtein, make_servicer, serve_managed,
                                                               serve_reattach)
from verifirst.verifiers.terraform._tf_provider_values import (_UNKNOWN_BYTES, _dummy, _is_unknown,  # noqa: F401
                                                               _nested_objects, _pack, _unknown, _unpack,
                                                               _well_known, config_diagnostics, fill_data_source,
                                                               plan_computed_unknown, plan_tags_all)

DEFAULT_AWS = "registry.terraform.io/hashicorp/aws"


# ---------------------------------------------------------------- client side: the process
class ProviderProcess:
    """One long-lived schema provider. `.env` points terraform at the full schema; `lease(types,
    data)` hands out a slot serving only those types, for one terraform run at a time."""

    def __init__(self, schema_path: str | os.PathLike, python: str | None = None, timeout_s: float = 60.0,
                 slots: int = 4):
        import queue
        self.schema_path = str(schema_path)
        raw = load_schema_dict(self.schema_path)  # fail early, in this process, on a bad file
        self.addresses = provider_names(raw)
        self._proc = subprocess.Popen(
            [python or sys.executable, "-m", "verifirst.verifiers.terraform._tf_provider_main", "--reattach",
             "--slots", str(slots), "--schema", self.schema_path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        line = self._read_line(timeout_s)
        try:
            self.slots = json.loads(line)["slots"]
        except (ValueError, KeyError, TypeError):
            self.close()
            raise RuntimeError(f"schema provider did not start: {line!r}") from None
        self.reattach = self.slots[0]
        self._free: "queue.Queue[int]" = queue.Queue()
        for i in range(1, len(self.slots)):
            self._free.put(i)
        self._ctl = threading.Lock()

    def _read_line(self, timeout_s: float) -> str:
        box: list[str] = []
        t = threading.Thread(target=lambda: box.append(self._proc.stdout.readline()), daemon=True)
        t.start()
        t.join(timeout_s)
        return box[0].strip() if box else ""

    @property
    def env(self) -> dict[str, str]:
        return {"TF_REATTACH_PROVIDERS": json.dumps(self.reattach)}

    def _subset(self, slot: int, types, data) -> None:
        with self._ctl:
            self._proc.stdin.write(json.dumps({"slot": slot, "types": types, "data": data}) + "\n")
            self._proc.stdin.flush()
            reply = self._read_line(30.0)
        if json.loads(reply or "{}").get("ok") != slot:
            raise RuntimeError(f"schema provider refused a subset: {reply!r}")

    def lease(self, types: list[str] | None = None, data: list[str] | None = None):
        """Context manager -> env for one terraform run against a schema of just these types."""
        import contextlib

        @contextlib.contextmanager
        def _lease():
            slot = self._free.get()
            try:
                self._subset(slot, types, data)
                yield {"TF_REATTACH_PROVIDERS": json.dumps(self.slots[slot])}
            finally:
                self._free.put(slot)
        return _lease()

    def alive(self) -> bool:
        return self._proc.poll() is None

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._proc.stdin.close()
                self._proc.wait(timeout=5)
            except (subprocess.TimeoutExpired, OSError):
                self._proc.terminate()
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._proc.kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


_DECL_RE = re.compile(r'^[ \t]*(resource|data)[ \t]+"?([A-Za-z][\w-]*)"?', re.M)


def declared_types(files: dict[str, str]) -> tuple[list[str], list[str]]:
    """(resource types, data source types) declared in .tf / .tf.json files."""
    rs, ds = set(), set()
    for name, text in files.items():
        if name.endswith(".tf.json"):
            try:
                doc = json.loads(text)
            except ValueError:
                continue
            for part in doc if isinstance(doc, list) else [doc]:
                if isinstance(part, dict):
                    for key, bucket in (("resource", rs), ("data", ds)):
                        blocks = part.get(key) or {}
                        for b in blocks if isinstance(blocks, list) else [blocks]:
                            if isinstance(b, dict):
                                bucket.update(b)
        else:
            for kind, t in _DECL_RE.findall(text):
                (rs if kind == "resource" else ds).add(t)
    return sorted(rs), sorted(ds)


def write_launcher(directory: str | os.PathLike, schema_path: str, address: str = DEFAULT_AWS,
                   python: str | None = None) -> Path:
    """terraform-provider-<name> script for dev_overrides: terraform starts it per use."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    exe = d / f"terraform-provider-{short_name(address)}"
    py = python or sys.executable
    exe.write_text("#!/bin/sh\n"
                   f"exec {json.dumps(py)} -m verifirst.verifiers.terraform._tf_provider_main "
                   f"--schema {json.dumps(str(schema_path))} --provider {json.dumps(address)}\n")
    exe.chmod(0o755)
    return exe


_SHARED: dict[str, ProviderProcess] = {}
_SHARED_LOCK = threading.Lock()


def shared_provider(schema_path: str | os.PathLike) -> ProviderProcess:
    """One provider process per schema file for this Python process (restarted if it died)."""
    import atexit
    key = str(Path(schema_path).resolve())
    with _SHARED_LOCK:
        proc = _SHARED.get(key)
        if proc is None or not proc.alive():
            proc = ProviderProcess(key)
            if not _SHARED:
                atexit.register(close_shared)
            _SHARED[key] = proc
        return proc


def close_shared() -> None:
    with _SHARED_LOCK:
        for proc in _SHARED.values():
            proc.close()
        _SHARED.clear()
