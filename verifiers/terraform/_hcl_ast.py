"""HCL text -> small AST with line numbers, built on python-hcl2's lark grammar.

python-hcl2's own dict output keeps quotes and loses positions, so we walk its raw lark tree.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from lark import Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken


class HclSyntaxError(Exception):
    def __init__(self, message: str, filename: str, line: int | None, column: int | None = None):
        self.filename, self.line, self.column, self.summary = filename, line, column, message
        where = f"{filename} line {line}" if line else filename
        super().__init__(f"{message} (on {where})")


# --- expression nodes ---------------------------------------------------------------------
class Node:
    __slots__ = ("line",)


class Lit(Node):
    __slots__ = ("value",)

    def __init__(self, value, line=0):
        self.value, self.line = value, line


class Template(Node):
    """Quoted string / heredoc: parts are str or Node. A lone interpolation keeps its type."""
    __slots__ = ("parts",)

    def __init__(self, parts, line=0):
        self.parts, self.line = parts, line


class TupleCons(Node):
    __slots__ = ("items",)

    def __init__(self, items, line=0):
        self.items, self.line = items, line


class ObjectCons(Node):
    __slots__ = ("items",)  # list of (key Node, value Node); bare identifiers keys are Lit(str)

    def __init__(self, items, line=0):
        self.items, self.line = items, line


class Var(Node):
    __slots__ = ("name",)

    def __init__(self, name, line=0):
        self.name, self.line = name, line


class GetAttr(Node):
    __slots__ = ("obj", "name")

    def __init__(self, obj, name, line=0):
        self.obj, self.name, self.line = obj, name, line


class Index(Node):
    __slots__ = ("obj", "key")

    def __init__(self, obj, key, line=0):
        self.obj, self.key, self.line = obj, key, line


class Splat(Node):
    """src[*].a.b / src.*.a : `each` is applied to every element (a chain on SplatItem)."""
    __slots__ = ("src", "each")

    def __init__(self, src, each, line=0):
        self.src, self.each, self.line = src, each, line


class SplatItem(Node):
    __slots__ = ()

    def __init__(self, line=0):
        self.line = line


class Call(Node):
    __slots__ = ("name", "args", "expand")

    def __init__(self, name, args, expand=False, line=0):
        self.name, self.args, self.expand, self.line = name, args, expand, line


class Cond(Node):
    __slots__ = ("cond", "true", "false")

    def __init__(self, cond, true, false, line=0):
        self.cond, self.true, self.false, self.line = cond, true, false, line


class BinOp(Node):
    __slots__ = ("op", "left", "right")

    def __init__(self, op, left, right, line=0):
        self.op, self.left, self.right, self.line = op, left, right, line


class Unary(Node):
    __slots__ = ("op", "expr")

    def __init__(self, op, expr, line=0):
        self.op, self.expr, self.line = op, expr, line


class ForExpr(Node):
    __slots__ = ("kvar", "vvar", "coll", "key", "value", "cond", "group")

    def __init__(self, kvar, vvar, coll, key, value, cond, group=False, line=0):
        (self.kvar, self.vvar, self.coll, self.key, self.value, self.cond, self.group,
         self.line) = kvar, vvar, coll, key, value, cond, group, line


# --- bodies -------------------------------------------------------------------------------
@dataclass
class Attribute:
    name: str
    expr: Node
    line: int


@dataclass
class Block:
    type: str
    labels: list[str]
    body: "Body"
    line: int


@dataclass
class Body:
    attributes: dict[str, Attribute] = field(default_factory=dict)
    blocks: list[Block] = field(default_factory=list)
    duplicates: list[Attribute] = field(default_factory=list)

    def blocks_of(self, type_name: str) -> list[Block]:
        return [b for b in self.blocks if b.type == type_name]


# --- conversion -----------------------------------------------------------------------------
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}
_ESC_RE = re.compile(r'\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)', re.S)


def _unescape(s: str) -> str:
    def rep(m):
        c = m.group(1)
        if c[0] in "uU" and len(c) > 1:
            return chr(int(c[1:], 16))
        return _ESCAPES.get(c, "\\" + c)
    return _ESC_RE.sub(rep, s) if "\\" in s else s


def _line(t) -> int:
    if isinstance(t, Token):
        return t.line or 0
    meta = getattr(t, "meta", None)
    return getattr(meta, "line", 0) if meta is not None and not meta.empty else 0


def _kids(t: Tree) -> list:
    """Children without newline/comment noise and punctuation tokens."""
    out = []
    for c in t.children:
        if isinstance(c, Tree):
            if c.data != "new_line_or_comment":
                out.append(c)
        elif isinstance(c, Token):
            out.append(c)
    return out


def _name_of(t) -> str:
    if isinstance(t, Token):
        return str(t)
    if t.data in ("identifier", "keyword", "literal_value"):
        return str(t.children[0])
    if t.data == "string":
        return "".join(_unescape(str(p.children[0])) for p in t.children
                       if isinstance(p, Tree) and p.data == "string_part"
                       and isinstance(p.children[0], Token))
    if t.data == "expr_term":
        return _name_of(_kids(t)[0])
    raise ValueError(t.data)


class _Converter:
    def __init__(self, filename: str):
        self.filename = filename

    def body(self, t: Tree) -> Body:
        body = Body()
        for c in t.children:
            if not isinstance(c, Tree):
                continue
            if c.data == "attribute":
                k = _kids(c)
                name = _name_of(k[0])
                attr = Attribute(name, self.expr(k[-1]), _line(c))
                if name in body.attributes:
                    body.duplicates.append(attr)
                else:
                    body.attributes[name] = attr
            elif c.data == "block":
                k = [x for x in _kids(c) if not (isinstance(x, Token) and x.type in ("LBRACE", "RBRACE"))]
                inner = k[-1]
                names = [_name_of(x) for x in k[:-1]]
                body.blocks.append(Block(names[0], names[1:], self.body(inner), _line(c)))
        return body

    def expr(self, t) -> Node:
        if isinstance(t, Token):
            raise HclSyntaxError(f"Unexpected token {t!s}", self.filename, t.line)
        d, line = t.data, _line(t)
        m = getattr(self, "x_" + d, None)
        if m is None:
            raise HclSyntaxError(f"Unsupported expression ({d})", self.filename, line)
        return m(t, line)

    def x_expr_term(self, t, line):
        k = [c for c in _kids(t) if not (isinstance(c, Token) and c.type in ("LPAR", "RPAR"))]
        return self.expr(k[0])

    def x_int_lit(self, t, line):
        return Lit(int(str(t.children[0])), line)

    def x_float_lit(self, t, line):
        v = float(str(t.children[0]))
        return Lit(int(v) if v.is_integer() and "e" not in str(t.children[0]).lower() else v, line)

    def x_literal_value(self, t, line):
        return Lit({"true": True, "false": False, "null": None}[str(t.children[0])], line)

    def x_identifier(self, t, line):
        return Var(str(t.children[0]), line)

    x_keyword = x_identifier

    def x_string(self, t, line):
        parts: list = []
        for p in t.children:
            if not (isinstance(p, Tree) and p.data == "string_part"):
                continue
            c = p.children[0]
            if isinstance(c, Token):
                if c.type in ("ESCAPED_INTERPOLATION", "ESCAPED_DIRECTIVE"):
                    parts.append(str(c)[1:])
                else:
                    parts.append(_unescape(str(c)))
            elif c.data == "interpolation":
                parts.append(self.expr(_kids(c)[1]))
            else:  # template directives: evaluated as unknown text
                parts.append(Call("__directive__", [], line=line))
        return Template(_merge(parts), line)

    def x_template_string(self, t, line):
        return Template([_unescape(str(t.children[0])[2:-2])], line)

    def x_heredoc_template(self, t, line):
        return self._heredoc(str(t.children[0]), line, trim=False)

    def x_heredoc_template_trim(self, t, line):
        return self._heredoc(str(t.children[0]), line, trim=True)

    def _heredoc(self, raw: str, line: int, trim: bool) -> Node:
        first_nl = raw.index("\n")
        lines = raw[first_nl + 1:].split("\n")
        # last element is "" (after final newline), the one before is the marker line
        body_lines = lines[:-2]
        if trim:
            ind = [len(x) - len(x.lstrip(" \t")) for x in body_lines if x.strip()]
            cut = min(ind) if ind else 0
            body_lines = [x[cut:] for x in body_lines]
        text = "\n".join(body_lines) + ("\n" if body_lines else "")
        return Template(_merge(self._template_parts(text, line)), line)

    def _template_parts(self, text: str, line: int) -> list:
        parts, i, n = [], 0, len(text)
        buf = []
        while i < n:
            if text.startswith("$${", i) or text.startswith("%%{", i):
                buf.append(text[i + 1:i + 3])
                i += 3
                continue
            if text.startswith("${", i) or text.startswith("%{", i):
                j = _match_brace(text, i + 2)
                if j < 0:
                    raise HclSyntaxError("Unterminated template string", self.filename,
                                         line + text.count("\n", 0, i))
                inner = text[i + 2:j].strip().strip("~").strip()
                parts.append("".join(buf))
                buf = []
                if text[i] == "%":
                    parts.append(Call("__directive__", [], line=line))
                else:
                    sub_line = line + text.count("\n", 0, i) + 1
                    parts.append(parse_expression(inner, self.filename, sub_line))
                i = j + 1
                continue
            buf.append(text[i])
            i += 1
        parts.append("".join(buf))
        return parts

    def x_tuple(self, t, line):
        return TupleCons([self.expr(c) for c in _kids(t) if isinstance(c, Tree)], line)

    def x_object(self, t, line):
        items = []
        for c in _kids(t):
            if isinstance(c, Tree) and c.data == "object_elem":
                k = _kids(c)
                key_t = _kids(k[0])[0]
                key = self._object_key(key_t)
                items.append((key, self.expr(k[-1])))
        return ObjectCons(items, line)

    def _object_key(self, t) -> Node:
        if isinstance(t, Tree) and t.data == "keyword":
            return Lit(str(t.children[0]), _line(t))
        if isinstance(t, Tree) and t.data == "expr_term":
            inner = _kids(t)
            if len(inner) == 1 and isinstance(inner[0], Tree) and inner[0].data == "identifier":
                return Lit(str(inner[0].children[0]), _line(t))
        node = self.expr(t)
        if isinstance(node, Var):  # bare identifier key is a literal string in HCL
            return Lit(node.name, node.line)
        return node

    def x_function_call(self, t, line):
        k = _kids(t)
        idents = [c for c in k if isinstance(c, Tree) and c.data == "identifier"]
        name = "::".join(str(i.children[0]) for i in idents)
        args_t = [c for c in k if isinstance(c, Tree) and c.data == "arguments"]
        args, expand = [], False
        if args_t:
            for c in args_t[0].children:
                if isinstance(c, Tree) and c.data != "new_line_or_comment":
                    args.append(self.expr(c))
                elif isinstance(c, Token) and c.type == "ELLIPSIS":
                    expand = True
        return Call(name, args, expand, line)

    def x_get_attr_expr_term(self, t, line):
        k = _kids(t)
        return GetAttr(self.expr(k[0]), _name_of(_kids(k[1])[-1]), line)

    def x_index_expr_term(self, t, line):
        k = _kids(t)
        return self._apply_index(self.expr(k[0]), k[1], line)

    def _apply_index(self, obj, idx, line):
        if idx.data == "short_index":
            return Index(obj, Lit(int(str(_kids(idx)[-1]))), line)
        inner = [c for c in _kids(idx) if isinstance(c, Tree)]
        return Index(obj, self.expr(inner[0]), line)

    def _splat(self, t, line):
        k = _kids(t)
        src = self.expr(k[0])
        each: Node = SplatItem(line)
        for op in k[1].children:
            if not isinstance(op, Tree):
                continue
            if op.data == "get_attr":
                each = GetAttr(each, _name_of(_kids(op)[-1]), line)
            elif op.data in ("braces_index", "short_index"):
                each = self._apply_index(each, op, line)
        return Splat(src, each, line)

    x_attr_splat_expr_term = _splat
    x_full_splat_expr_term = _splat

    def x_conditional(self, t, line):
        k = [c for c in _kids(t) if isinstance(c, Tree)]
        return Cond(self.expr(k[0]), self.expr(k[1]), self.expr(k[2]), line)

    def x_binary_op(self, t, line):
        k = [c for c in _kids(t) if isinstance(c, Tree)]
        left = self.expr(k[0])
        term = _kids(k[1])
        op = str(term[0].children[0]).strip()
        return BinOp(op, left, self.expr(term[-1]), line)

    def x_unary_op(self, t, line):
        k = _kids(t)
        return Unary(str(k[0]), self.expr(k[1]), line)

    def _for(self, t, line, is_obj):
        k = [c for c in _kids(t) if isinstance(c, Tree)]
        intro = k[0]
        ids = [str(c.children[0]) for c in _kids(intro) if isinstance(c, Tree) and c.data == "identifier"]
        coll = [c for c in _kids(intro) if isinstance(c, Tree) and c.data != "identifier"][0]
        kvar, vvar = (ids[0], ids[1]) if len(ids) == 2 else (None, ids[0])
        cond = None
        rest = k[1:]
        if rest and rest[-1].data == "for_cond":
            cond = self.expr([c for c in _kids(rest[-1]) if isinstance(c, Tree)][0])
            rest = rest[:-1]
        group = any(isinstance(c, Token) and c.type == "ELLIPSIS" for c in t.children)
        if is_obj:
            return ForExpr(kvar, vvar, self.expr(coll), self.expr(rest[0]), self.expr(rest[1]),
                           cond, group, line)
        return ForExpr(kvar, vvar, self.expr(coll), None, self.expr(rest[0]), cond, False, line)

    def x_for_tuple_expr(self, t, line):
        return self._for(t, line, False)

    def x_for_object_expr(self, t, line):
        return self._for(t, line, True)


def _merge(parts: list) -> list:
    out: list = []
    for p in parts:
        if isinstance(p, str):
            if not p:
                continue
            if out and isinstance(out[-1], str):
                out[-1] += p
                continue
        out.append(p)
    return out


def _match_brace(text: str, i: int) -> int:
    depth, n, quote = 1, len(text), False
    while i < n:
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == '"':
                quote = False
        elif c == '"':
            quote = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _parser():
    from hcl2.parser import parser
    return parser()


def _syntax_error(exc: Exception, filename: str, text: str) -> HclSyntaxError:
    line = getattr(exc, "line", None)
    col = getattr(exc, "column", None)
    if isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        opens = text.count("{") - text.count("}")
        msg = ("Unclosed configuration block: there is no closing brace for a block before the end "
               "of the file" if opens > 0 else "Unexpected end of file: the configuration is incomplete")
        return HclSyntaxError(msg, filename, line if line and line > 0 else text.count("\n") + 1, col)
    if isinstance(exc, UnexpectedCharacters):
        ch = text.splitlines()[line - 1][col - 1:col] if line and col else "?"
        return HclSyntaxError(f"Invalid character {ch!r}: this character is not used within the "
                              "language", filename, line, col)
    if isinstance(exc, UnexpectedToken):
        tok = (str(exc.token).strip().splitlines() or [exc.token.type])[0]
        return HclSyntaxError(f"Argument or block definition required: unexpected {tok!r}; an "
                              "argument or block definition is required here (an argument is "
                              "`name = value`, a block is `type \"label\" { ... }`)", filename, line, col)
    return HclSyntaxError(f"Invalid syntax: {exc}", filename, line, col)


def parse_body(text: str, filename: str = "main.tf") -> Body:
    """Parse a whole .tf file. Raises HclSyntaxError with file and line."""
    try:
        tree = _parser().parse(text + "\n")
    except UnexpectedInput as exc:
        raise _syntax_error(exc, filename, text) from None
    return _Converter(filename).body(tree.children[0])


def parse_expression(text: str, filename: str = "main.tf", line: int = 1) -> Node:
    try:
        tree = _parser().parse("x = " + text + "\n")
    except UnexpectedInput as exc:
        raise HclSyntaxError(f"Invalid expression in template: {text[:60]!r}", filename, line) from None
    attr = [c for c in tree.children[0].children if isinstance(c, Tree) and c.data == "attribute"][0]
    node = _Converter(filename).expr(_kids(attr)[-1])
    _shift_lines(node, line - 1)
    return node


def _shift_lines(node, delta):
    if not delta or not isinstance(node, Node):
        return
    for n in walk(node):
        n.line = (n.line or 1) + delta


def walk(node):
    """Every Node below (and including) node."""
    stack = [node]
    while stack:
        n = stack.pop()
        if not isinstance(n, Node):
            continue
        yield n
        for slot in type(n).__slots__:
            v = getattr(n, slot, None)
            if isinstance(v, Node):
                stack.append(v)
            elif isinstance(v, list):
                for x in v:
                    if isinstance(x, tuple):
                        stack.extend(x)
                    else:
                        stack.append(x)
