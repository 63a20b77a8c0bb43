"""The schema provider's schema side: a `terraform providers schema -json` file read into a dict,
its provider addresses, and its JSON schemas turned into tfplugin6 protobuf messages."""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

from verifirst.core.errors import InputError


# ---------------------------------------------------------------- schema file -> dict
def load_schema_dict(path: str | os.PathLike | dict) -> dict:
    """The raw `providers schema -json` dict from .json / .json.gz (or a dict already)."""
    if isinstance(path, dict):
        raw = path
        where = "<dict>"
    else:
        where = str(path)
        p = Path(path)
        if not p.is_file():
            raise InputError("schema file not found", path=where,
                             expected="a `terraform providers schema -json` file (.json or .json.gz)")
        data = p.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        try:
            raw = json.loads(data)
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON: {exc.msg}", path=where, line=exc.lineno,
                             expected="`terraform providers schema -json` output") from None
    schemas = raw.get("provider_schemas") if isinstance(raw, dict) else None
    if not isinstance(schemas, dict) or not schemas:
        raise InputError("no provider_schemas object", path=where, field="provider_schemas",
                         expected="`terraform providers schema -json` output")
    return raw


def provider_names(raw: dict) -> list[str]:
    return sorted(raw["provider_schemas"])


def short_name(address: str) -> str:
    """registry.terraform.io/hashicorp/aws -> aws (the executable is terraform-provider-aws)."""
    return address.rstrip("/").rsplit("/", 1)[-1]


# ---------------------------------------------------------------- JSON schema -> protobuf
def _pb():
    from tf.gen import tfplugin_pb2 as pb
    return pb


def _attr_pb(pb, name: str, a: dict):
    kw: dict[str, Any] = dict(name=name, required=bool(a.get("required")),
                              optional=bool(a.get("optional")), computed=bool(a.get("computed")),
                              sensitive=bool(a.get("sensitive")), deprecated=bool(a.get("deprecated")))
    if "nested_type" in a:
        nt = a["nested_type"]
        kw["nested_type"] = pb.Schema.Object(
            attributes=[_attr_pb(pb, n, x) for n, x in sorted(nt.get("attributes", {}).items())],
            nesting=getattr(pb.Schema.Object.NestingMode, nt.get("nesting_mode", "single").upper()),
            min_items=int(nt.get("min_items", 0)), max_items=int(nt.get("max_items", 0)))
    else:
        kw["type"] = json.dumps(a.get("type", "dynamic"), separators=(",", ":")).encode()
    return pb.Schema.Attribute(**kw)


def _block_pb(pb, b: dict):
    nested = []
    for n, bt in sorted(b.get("block_types", {}).items()):
        nested.append(pb.Schema.NestedBlock(
            type_name=n, block=_block_pb(pb, bt.get("block", {})),
            nesting=getattr(pb.Schema.NestedBlock.NestingMode, bt.get("nesting_mode", "list").upper()),
            min_items=int(bt.get("min_items", 0)), max_items=int(bt.get("max_items", 0))))
    return pb.Schema.Block(
        attributes=[_attr_pb(pb, n, a) for n, a in sorted(b.get("attributes", {}).items())],
        block_types=nested, deprecated=bool(b.get("deprecated")))


def _schema_pb(pb, s: dict | None):
    s = s or {"block": {}}
    return pb.Schema(version=int(s.get("version", 0)), block=_block_pb(pb, s.get("block", {})))

