"""Load a `terraform providers schema -json` file (.json or .json.gz) into a ProviderSchema.

Several providers may be present; resource and data source types are looked up across all of
them. Parsed schemas are cached per (path, mtime, size) since the AWS one takes ~0.3 s to parse.
"""
from __future__ import annotations

import gzip
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from verifirst.errors import InputError

EXPECTED_SHAPE = ('{"format_version": ..., "provider_schemas": {"<address>": {"provider": {...}, '
                  '"resource_schemas": {...}, "data_source_schemas": {...}}}}')

_CACHE: dict[tuple, "ProviderSchema"] = {}
_LOCK = threading.Lock()


@dataclass
class ProviderSchema:
    """Lookups over one schema file. `resource(t)` and `data_source(t)` give the block schema
    (the dict with `attributes` / `block_types`) or None for an unknown type."""

    raw: dict
    path: str = ""
    _resources: dict = field(default_factory=dict, repr=False)
    _data_sources: dict = field(default_factory=dict, repr=False)
    _owner: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        for address, prov in self.raw.get("provider_schemas", {}).items():
            for t, entry in (prov.get("resource_schemas") or {}).items():
                self._resources.setdefault(t, entry)
                self._owner.setdefault(("managed", t), address)
            for t, entry in (prov.get("data_source_schemas") or {}).items():
                self._data_sources.setdefault(t, entry)
                self._owner.setdefault(("data", t), address)

    # -- lookups -----------------------------------------------------------------------------
    def resource(self, type_name: str) -> dict | None:
        entry = self._resources.get(type_name)
        return entry["block"] if entry else None

    def data_source(self, type_name: str) -> dict | None:
        entry = self._data_sources.get(type_name)
        return entry["block"] if entry else None

    def block(self, mode: str, type_name: str) -> dict | None:
        """mode is "managed" or "data" as in plan JSON."""
        return self.resource(type_name) if mode == "managed" else self.data_source(type_name)

    def schema_version(self, mode: str, type_name: str) -> int:
        table = self._resources if mode == "managed" else self._data_sources
        entry = table.get(type_name) or {}
        return int(entry.get("version", 0) or 0)

    def provider_address(self, mode: str = "managed", type_name: str | None = None) -> str:
        """Full provider address (registry.terraform.io/hashicorp/aws) owning a type, or the
        address whose local name matches the type prefix, or the first provider."""
        if type_name is not None and (mode, type_name) in self._owner:
            return self._owner[(mode, type_name)]
        addresses = list(self.raw.get("provider_schemas", {}))
        if type_name:
            prefix = type_name.split("_", 1)[0]
            for a in addresses:
                if a.rsplit("/", 1)[-1] == prefix:
                    return a
        return addresses[0] if addresses else "registry.terraform.io/hashicorp/" + (
            (type_name or "aws").split("_", 1)[0])

    def provider_config(self, local_name: str | None = None) -> dict | None:
        """Block schema of a provider's own configuration (the `provider "aws" {}` block)."""
        for address, prov in self.raw.get("provider_schemas", {}).items():
            if local_name is None or address.rsplit("/", 1)[-1] == local_name:
                return (prov.get("provider") or {}).get("block", {"attributes": {}})
        return None

    def provider_names(self) -> list[str]:
        return [a.rsplit("/", 1)[-1] for a in self.raw.get("provider_schemas", {})]

    def resource_types(self) -> list[str]:
        return sorted(self._resources)

    def data_source_types(self) -> list[str]:
        return sorted(self._data_sources)


def _validate(raw, path: str) -> None:
    if not isinstance(raw, dict):
        raise InputError("schema file is not a JSON object", path=path, expected=EXPECTED_SHAPE)
    if "provider_schemas" not in raw or not isinstance(raw["provider_schemas"], dict):
        raise InputError("missing key 'provider_schemas'", path=path, field="provider_schemas",
                         expected=EXPECTED_SHAPE)
    for address, prov in raw["provider_schemas"].items():
        where = f"provider_schemas.{address}"
        if not isinstance(prov, dict):
            raise InputError("provider entry is not an object", path=path, field=where,
                             expected=EXPECTED_SHAPE)
        if "resource_schemas" not in prov and "data_source_schemas" not in prov:
            raise InputError("missing key 'resource_schemas'", path=path,
                             field=f"{where}.resource_schemas", expected=EXPECTED_SHAPE)
        for table in ("resource_schemas", "data_source_schemas"):
            entries = prov.get(table) or {}
            if not isinstance(entries, dict):
                raise InputError(f"'{table}' is not an object", path=path,
                                 field=f"{where}.{table}", expected=EXPECTED_SHAPE)
            for t, entry in entries.items():
                if not isinstance(entry, dict) or not isinstance(entry.get("block"), dict):
                    raise InputError("missing key 'block'", path=path,
                                     field=f"{where}.{table}.{t}.block",
                                     expected='{"version": N, "block": {"attributes": {...}}}')


def from_dict(raw: dict, path: str = "<dict>") -> ProviderSchema:
    _validate(raw, path)
    return ProviderSchema(raw=raw, path=path)


def load_schema(path) -> ProviderSchema:
    """Parse (or return the cached parse of) a provider schema file."""
    if isinstance(path, ProviderSchema):
        return path
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        raise InputError(f"cannot read schema file: {exc.strerror}", path=str(p),
                         expected="a `terraform providers schema -json` file (.json or .json.gz)")
    key = (str(p.resolve()), st.st_mtime_ns, st.st_size)
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is not None:
        return hit
    try:
        opener = gzip.open if p.name.endswith(".gz") else open
        with opener(p, "rt", encoding="utf-8") as fh:
            raw = json.load(fh)
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read schema file: {exc}", path=str(p),
                         expected="a `terraform providers schema -json` file (.json or .json.gz)")
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", path=str(p), line=exc.lineno,
                         expected=EXPECTED_SHAPE)
    schema = from_dict(raw, str(p))
    with _LOCK:
        _CACHE[key] = schema
    return schema


def default_schema_path() -> str | None:
    """The AWS schema in ../shared when present (tests, benchmarks), else None."""
    env = os.environ.get("VERIFIRST_TF_SCHEMA")
    if env:
        return env
    here = Path(__file__).resolve().parents[2]
    cand = here.parent / "shared" / "data" / "aws-provider-schema" / \
        "aws_provider_schema_6.47.0.slim.json.gz"
    return str(cand) if cand.exists() else None
