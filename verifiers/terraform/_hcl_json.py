"""Terraform's JSON configuration syntax (`*.tf.json`) -> the same Body as HCL text.

JSON cannot tell a nested block from an attribute holding an object; as terraform does, the
provider schema decides (a key the schema names as a block type is a block). Strings are
templates ("${var.x}"); the arguments terraform reads as expressions in JSON (`provider`,
`depends_on`, a variable's `type`, `lifecycle.ignore_changes`) are parsed as expressions.
"""
from __future__ import annotations

import json

from verifirst.verifiers.terraform import _hcl_ast as A

_LABELS = {"resource": 2, "data": 2, "ephemeral": 2, "module": 1, "variable": 1, "output": 1, "provider": 1,
           "check": 1, "locals": 0, "terraform": 0, "moved": 0, "import": 0, "removed": 0}
_META_BLOCKS = {"lifecycle", "provisioner", "connection"}
# arguments JSON holds as expressions in a string, per block kind
_EXPRESSION_ARGS = {"resource": {"provider", "depends_on"}, "data": {"provider", "depends_on"},
                    "module": {"providers", "depends_on"}, "output": {"depends_on"}, "variable": {"type"},
                    "lifecycle": {"ignore_changes", "replace_triggered_by"}}


def parse_json_body(text: str, filename: str, schema=None) -> A.Body:
    """A `.tf.json` file as a Body. Raises HclSyntaxError for JSON that does not parse or a
    top-level value that is not an object.

    Args:
        text: the file's text.
        filename: named in errors.
        schema: the ProviderSchema that tells blocks from attributes (None: all attributes).
    """
    try:
        doc = json.loads(text.lstrip("\ufeff"))
    except json.JSONDecodeError as exc:
        raise A.HclSyntaxError(f"Invalid JSON: {exc.msg}", filename, exc.lineno, exc.colno) from None
    if not isinstance(doc, dict):
        raise A.HclSyntaxError("Invalid JSON configuration: the root value must be an object", filename, 1)
    return _Json(text, filename, schema).root(doc)


class _Json:
    def __init__(self, text: str, filename: str, schema):
        self.text, self.filename, self.schema = text, filename, schema

    def line(self, key: str) -> int:
        """The line of a key's first appearance (JSON keeps no positions)."""
        i = self.text.find(json.dumps(key))
        return self.text.count("\n", 0, i) + 1 if i >= 0 else 1

    def root(self, doc: dict) -> A.Body:
        body = A.Body()
        for kind, value in doc.items():
            if kind == "//":
                continue
            n = _LABELS.get(kind)
            if n is None:  # build_module reports the unsupported block type
                body.blocks.append(A.Block(kind, [], A.Body(), self.line(kind)))
                continue
            for labels, content in _labelled(value, n):
                body.blocks.append(A.Block(kind, labels, self.body(content, self._schema_for(kind, labels), kind),
                                           self.line(labels[-1] if labels else kind)))
        return body

    def _schema_for(self, kind: str, labels: list) -> dict | None:
        if self.schema is None:
            return None
        if kind in ("resource", "data") and labels:
            return self.schema.block("managed" if kind == "resource" else "data", labels[0])
        if kind == "provider" and labels:
            return self.schema.provider_config(labels[0])
        return _FIXED.get(kind)

    def body(self, obj, bs: dict | None, kind: str = "") -> A.Body:
        body = A.Body()
        exprs = _EXPRESSION_ARGS.get(kind, ())
        if not isinstance(obj, dict):
            return body
        btypes = (bs or {}).get("block_types") or {}
        for key, value in obj.items():
            if key == "//":
                continue
            line = self.line(key)
            if key == "dynamic" and isinstance(value, dict):
                for label, content in value.items():
                    inner = (btypes.get(label) or {}).get("block")
                    for c in value_list(content):
                        dyn = self.body({k: v for k, v in c.items() if k != "content"}, None)
                        for cc in value_list(c.get("content", [])):
                            dyn.blocks.append(A.Block("content", [], self.body(cc, inner), line))
                        body.blocks.append(A.Block("dynamic", [label], dyn, line))
            elif key in btypes or key in _META_BLOCKS or (bs or {}).get("blocks_named", {}).get(key) is not None:
                inner = (btypes.get(key) or {}).get("block") or (bs or {}).get("blocks_named", {}).get(key)
                labels_n = 1 if key in ("provisioner", "backend") else 0
                for labels, content in _labelled(value, labels_n):
                    body.blocks.append(A.Block(key, labels, self.body(content, inner, key), line))
            else:
                attr = A.Attribute(key, self.expr(value, line, as_expression=key in exprs), line)
                body.attributes[key] = attr
        return body

    def expr(self, v, line: int, as_expression: bool = False) -> A.Node:
        if isinstance(v, str):
            if as_expression:
                return self._parse(v.replace("${", "").rstrip("}") if v.startswith("${") else v, line)
            if "${" in v or "%{" in v:
                return self._parse(json.dumps(v), line)
            return A.Template([v], line)
        if isinstance(v, list):
            return A.TupleCons([self.expr(x, line, as_expression) for x in v], line)
        if isinstance(v, dict):
            return A.ObjectCons([(A.Lit(k, line), self.expr(x, line)) for k, x in v.items() if k != "//"], line)
        return A.Lit(v, line)

    def _parse(self, source: str, line: int) -> A.Node:
        return A.parse_expression(source, self.filename, line)


def value_list(v) -> list:
    """A JSON block value: one object or an array of them."""
    return [x for x in (v if isinstance(v, list) else [v]) if isinstance(x, dict)]


def _labelled(value, n: int):
    """(labels, content) pairs of a JSON block with n labels: {"l1": {"l2": {...}}}."""
    if n == 0:
        for c in value_list(value):
            yield [], c
        return
    for obj in value_list(value):
        for label, inner in obj.items():
            if label == "//":
                continue
            for labels, content in _labelled(inner, n - 1):
                yield [label, *labels], content


# terraform's own blocks inside terraform / variable / module bodies
_FIXED = {
    "terraform": {"blocks_named": {"required_providers": {}, "backend": {}, "cloud": {}}},
    "variable": {"blocks_named": {"validation": {}}},
    "output": {"blocks_named": {"precondition": {}}},
    "check": {"blocks_named": {"assert": {}}},
}
