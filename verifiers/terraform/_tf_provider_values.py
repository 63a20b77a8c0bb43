"""The schema provider's values: msgpack DynamicValues (unknown as msgpack ext 0), what a plan
makes of computed attributes and tags_all, stand-in values for data sources, and the config
diagnostics the AWS provider's SDK reports."""
from __future__ import annotations

import json
from typing import Any

_UNKNOWN_BYTES = b"\x00"


# ---------------------------------------------------------------- msgpack values
def _unpack(dv) -> Any:
    import msgpack
    if dv.msgpack:
        return msgpack.unpackb(dv.msgpack, raw=False, strict_map_key=False,
                               ext_hook=lambda code, data: msgpack.ExtType(code, data))
    if dv.json:
        return json.loads(dv.json)
    return None


def _pack(pb, value: Any):
    import msgpack
    return pb.DynamicValue(msgpack=msgpack.packb(value, use_bin_type=True))


def _is_unknown(v: Any) -> bool:
    import msgpack
    return isinstance(v, msgpack.ExtType)


def _unknown():
    import msgpack
    return msgpack.ExtType(0, _UNKNOWN_BYTES)


def _nested_objects(bt: dict, v: Any) -> list:
    """The object values of one nested block attribute, whatever its nesting mode."""
    if v is None or _is_unknown(v):
        return []
    mode = bt.get("nesting_mode", "list")
    if mode in ("single", "group"):
        return [v] if isinstance(v, dict) else []
    if mode == "map":
        return [x for x in v.values() if isinstance(x, dict)] if isinstance(v, dict) else []
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def plan_computed_unknown(block: dict, obj: dict) -> dict:
    """Computed attributes the config left null become unknown ("known after apply")."""
    for name, a in block.get("attributes", {}).items():
        if a.get("computed") and obj.get(name) is None:
            obj[name] = _unknown()
    for name, bt in block.get("block_types", {}).items():
        for child in _nested_objects(bt, obj.get(name)):
            plan_computed_unknown(bt.get("block", {}), child)
    return obj


def plan_tags_all(block: dict, obj: dict, default_tags: dict | None) -> dict:
    """The AWS provider plans tags_all = default_tags merged with tags when both are known."""
    attrs = block.get("attributes", {})
    if "tags_all" not in attrs or not _is_unknown(obj.get("tags_all")):
        return obj
    tags = obj.get("tags")
    known = (tags is None or (isinstance(tags, dict) and not any(_is_unknown(v) for v in tags.values())))
    if known and (tags or default_tags):
        obj["tags_all"] = {**(default_tags or {}), **(tags or {})}
    return obj


def _dummy(ty: Any, name: str, i: int = 0) -> Any:
    """A known stand-in for a data source's computed value, plausible enough for functions
    (cidrsubnet, jsondecode, indexing [0..2]) that configs apply to it."""
    if ty == "string":
        n = name.lower()
        if "cidr" in n:
            return f"10.{i}.0.0/16"
        if n.endswith("json") or "policy" in n or n == "document":
            return "{}"
        if n.endswith("arn") or n == "arn":
            return f"arn:aws:iam::123456789012:{name}-{i}"
        if "account" in n or n == "owner_id":
            return "123456789012"
        if "zone" in n or n == "names":
            return "us-east-1" + "abcdef"[i % 6]
        if "region" in n:
            return "us-east-1"
        return f"{name}-{i}"
    if ty == "number":
        return i + 1
    if ty == "bool":
        return False
    if ty == "dynamic":
        return None
    if isinstance(ty, list) and ty:
        kind = ty[0]
        if kind in ("list", "set"):
            return [_dummy(ty[1], name, k) for k in range(3)]
        if kind == "map":
            return {}
        if kind == "object":
            return {k: _dummy(t, k, i) for k, t in ty[1].items()}
        if kind == "tuple":
            return [_dummy(t, name, k) for k, t in enumerate(ty[1])]
    return None


def _well_known(type_name: str, region: str) -> dict:
    """Values configs commonly interpolate from ambient AWS data sources."""
    account = "123456789012"
    return {
        "aws_region": {"name": region, "id": region, "region": region,
                       "endpoint": f"ec2.{region}.amazonaws.com", "description": region},
        "aws_partition": {"partition": "aws", "id": "aws", "dns_suffix": "amazonaws.com",
                          "reverse_dns_prefix": "com.amazonaws"},
        "aws_caller_identity": {"account_id": account, "id": account, "user_id": "AIDAEXAMPLE",
                                "arn": f"arn:aws:iam::{account}:user/example"},
    }.get(type_name, {})


def fill_data_source(block: dict, obj: dict, type_name: str = "", region: str = "us-east-1") -> dict:
    known = _well_known(type_name, region)
    for name, a in block.get("attributes", {}).items():
        if a.get("computed") and (obj.get(name) is None or _is_unknown(obj.get(name))):
            obj[name] = known[name] if name in known else _dummy(a.get("type", "string"), name)
    for name, bt in block.get("block_types", {}).items():
        for child in _nested_objects(bt, obj.get(name)):
            fill_data_source(bt.get("block", {}), child)
    return obj


def config_diagnostics(type_name: str, schema: dict, config: Any, kind: str = "resource"):
    """(severity, summary, detail, path) found in a resource config, as the AWS provider's SDK
    reports them: computed-only attributes set (error), deprecated types and arguments (warning)."""
    out = []
    block = schema.get("block", {})
    type_deprecated = bool(block.get("deprecated"))
    if type_deprecated:
        out.append(("warning", f"Deprecated {kind}",
                    f"The {kind} type {type_name} is deprecated by the provider; use its successor.", []))

    def walk(b: dict, obj: Any, path: list):
        if not isinstance(obj, dict):
            return
        for name, a in b.get("attributes", {}).items():
            if obj.get(name) is None:
                continue
            if a.get("computed") and not a.get("optional") and not a.get("required"):
                out.append(("error", "Value for unconfigurable attribute",
                            f'Can\'t configure a value for "{name}": its value will be decided '
                            "automatically based on the result of applying this configuration.",
                            path + [name]))
            elif a.get("deprecated") and not type_deprecated:
                out.append(("warning", "Argument is deprecated",
                            f'The argument "{name}" of {type_name} is deprecated.', path + [name]))
        for name, bt in b.get("block_types", {}).items():
            v = obj.get(name)
            if bt.get("block", {}).get("deprecated") and _nested_objects(bt, v) and not type_deprecated:
                out.append(("warning", "Block is deprecated",
                            f'The block "{name}" of {type_name} is deprecated.', path + [name]))
            for child in _nested_objects(bt, v):
                walk(bt.get("block", {}), child, path + [name])

    walk(block, config, [])
    return out

