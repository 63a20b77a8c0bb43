"""Evaluate _hcl_ast expressions the way terraform plan does: values may be UNKNOWN
(known after apply); the common functions are implemented (_hcl_funcs), file() reads relative
to the config dir. Errors carry terraform's summaries so a repair loop can act on them.
The value helpers live in _hcl_values and are re-exported here."""
from __future__ import annotations

from verifirst.verifiers.terraform import _hcl_ast as A
from verifirst.verifiers.terraform import limits
from verifirst.verifiers.terraform._hcl_errors import EvalError
from verifirst.verifiers.terraform._hcl_funcs import _PATH_FUNCS, _SHALLOW, FUNCTIONS, _raise_undeclared, _read
from verifirst.verifiers.terraform._hcl_values import (UNKNOWN, Scope, _num_str, has_unknown, tf_str,  # noqa: F401
                                                       to_bool, to_number, type_name)


def evaluate(node, scope: Scope):
    """Value of an expression node (python natives, UNKNOWN inside where not known)."""
    t = type(node)
    if t is A.Lit:
        return node.value
    if t is A.Template:
        parts = node.parts
        if len(parts) == 1 and not isinstance(parts[0], str):
            return evaluate(parts[0], scope)
        out = []
        for p in parts:
            if isinstance(p, str):
                out.append(p)
                continue
            v = evaluate(p, scope)
            if has_unknown(v):
                return UNKNOWN
            out.append(tf_str(v, p.line))
        text = "".join(out)
        if len(text) > limits.MAX_STRING:
            limits.check_size(text, "a template")
        return text
    if t is A.Var:
        if node.name in scope.bindings:
            return scope.bindings[node.name]
        return scope.resolver(node.name, node)
    if t is A.GetAttr:
        return get_attr(evaluate(node.obj, scope), node.name, node)
    if t is A.Index:
        return index(evaluate(node.obj, scope), evaluate(node.key, scope), node)
    if t is A.TupleCons:
        return [evaluate(x, scope) for x in node.items]
    if t is A.ObjectCons:
        out = {}
        for k, v in node.items:
            kv = evaluate(k, scope)
            if kv is UNKNOWN:
                return UNKNOWN
            out[tf_str(kv, k.line)] = evaluate(v, scope)
        return out
    if t is A.Call:
        return call(node, scope)
    if t is A.Cond:
        c = evaluate(node.cond, scope)
        if c is UNKNOWN:
            evaluate(node.true, scope), evaluate(node.false, scope)
            return UNKNOWN
        return evaluate(node.true if to_bool(c, node.line) else node.false, scope)
    if t is A.BinOp:
        return binop(node, scope)
    if t is A.Unary:
        v = evaluate(node.expr, scope)
        if v is UNKNOWN:
            return UNKNOWN
        return (not to_bool(v, node.line)) if node.op == "!" else -to_number(v, node.line)
    if t is A.Splat:
        src = evaluate(node.src, scope)
        if src is UNKNOWN:
            return UNKNOWN
        if src is None:
            return []
        items = src if isinstance(src, list) else [src]
        limits.spend(len(items), "splat expressions")
        return [evaluate(node.each, scope.child({"\0splat": x})) for x in items]
    if t is A.SplatItem:
        return scope.bindings["\0splat"]
    if t is A.ForExpr:
        return for_expr(node, scope)
    raise EvalError("Unsupported expression", type(node).__name__, getattr(node, "line", 0))


def get_attr(obj, name, node):
    if obj is UNKNOWN:
        return UNKNOWN
    if isinstance(obj, dict):
        if name in obj:
            return obj[name]
        raise EvalError("Unsupported attribute",  # terraform's summary, classed as terraform_cli classes it
                        f'This object does not have an attribute named "{name}".', node.line,
                        "SELF_DEFINED_PROPERTY")
    if obj is None:
        raise EvalError("Attempt to get attribute from null value",
                        "This value is null, so it does not have any attributes.", node.line, "TYPE")
    if isinstance(obj, list):
        raise EvalError("Unsupported attribute",
                        f'Can\'t access attributes on a list of objects. Did you mean to access '
                        f'attribute "{name}" for a specific element of the list, or across all '
                        f'elements of the list?', node.line, "SELF_DEFINED_PROPERTY")
    raise EvalError("Unsupported attribute", f"Can't access attributes on a primitive-typed value "
                    f"({type_name(obj)}).", node.line, "TYPE")


def index(obj, key, node):
    if obj is UNKNOWN or key is UNKNOWN:
        return UNKNOWN
    if isinstance(obj, list):
        try:
            i = to_number(key, node.line)
        except EvalError:
            raise EvalError("Invalid index", "The given key does not identify an element in this "
                            "collection value: a number is required.", node.line, "TYPE") from None
        if not isinstance(i, int) and not float(i).is_integer():
            raise EvalError("Invalid index", "The given key does not identify an element in this "
                            "collection value: indexing a sequence requires a whole number.",
                            node.line, "TYPE")
        i = int(i)
        if i < 0 or i >= len(obj):
            raise EvalError("Invalid index", "The given key does not identify an element in this "
                            "collection value: the given index is greater than or equal to the "
                            "length of the collection.", node.line, "BAD_REFERENCE")
        return obj[i]
    if isinstance(obj, dict):
        k = tf_str(key, node.line)
        if k not in obj:
            raise EvalError("Invalid index", "The given key does not identify an element in this "
                            "collection value.", node.line, "BAD_REFERENCE")
        return obj[k]
    if obj is None:
        raise EvalError("Attempt to index null value", "This value is null, so it does not have "
                        "any indices.", node.line, "TYPE")
    raise EvalError("Invalid index", "This value does not have any indices.", node.line, "TYPE")


def _equal(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def binop(node, scope):
    op = node.op
    left, right = evaluate(node.left, scope), evaluate(node.right, scope)
    if op in ("&&", "||"):
        if left is not UNKNOWN and right is not UNKNOWN:
            lb, rb = to_bool(left, node.line), to_bool(right, node.line)
            return (lb and rb) if op == "&&" else (lb or rb)
        if op == "&&" and (left is False or right is False):
            return False
        if op == "||" and (left is True or right is True):
            return True
        return UNKNOWN
    if has_unknown(left) or has_unknown(right):
        return UNKNOWN
    if op == "==":
        return _equal(left, right)
    if op == "!=":
        return not _equal(left, right)
    a, b = to_number(left, node.line), to_number(right, node.line)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        if b == 0:
            raise EvalError("Operation failed", "Error during operation: divide by zero.", node.line)
        r = a / b
        return int(r) if float(r).is_integer() else r
    if op == "%":
        return a % b
    return {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]


def for_expr(node, scope):
    coll = evaluate(node.coll, scope)
    if coll is UNKNOWN:
        return UNKNOWN
    if isinstance(coll, dict):
        pairs = list(coll.items())
    elif isinstance(coll, list):
        pairs = list(enumerate(coll))
    else:
        raise EvalError("Iteration over non-iterable value", "A value of type "
                        f"{type_name(coll)} cannot be used as the collection in a 'for' expression.",
                        node.line, "TYPE")
    limits.spend(len(pairs), "for expressions")
    is_obj = node.key is not None
    out_list, out_obj = [], {}
    for k, v in pairs:
        b = {node.vvar: v}
        if node.kvar:
            b[node.kvar] = k
        s = scope.child(b)
        if node.cond is not None:
            c = evaluate(node.cond, s)
            if c is UNKNOWN:
                return UNKNOWN
            if not to_bool(c, node.line):
                continue
        if is_obj:
            kv = evaluate(node.key, s)
            if kv is UNKNOWN:
                return UNKNOWN
            kv = tf_str(kv, node.line)
            val = evaluate(node.value, s)
            if node.group:
                out_obj.setdefault(kv, []).append(val)
            elif kv in out_obj:
                raise EvalError("Duplicate object key", f'Two different items produced the key "{kv}" '
                                "in this 'for' expression.", node.line)
            else:
                out_obj[kv] = val
        else:
            out_list.append(evaluate(node.value, s))
    return out_obj if is_obj else out_list


# --- functions ----------------------------------------------------------------------------
def call(node, scope):
    name = node.name.split("::")[-1]
    if name == "__directive__":
        return UNKNOWN
    if name in ("try", "can"):
        for a in node.args:
            try:
                v = evaluate(a, scope)
                return True if name == "can" else v
            except EvalError:
                if name == "can":
                    return False
        if name == "can":
            return False
        raise EvalError("Error in function call", 'Call to function "try" failed: no expression '
                        "succeeded.", node.line)
    fn = FUNCTIONS.get(name)
    if fn is None:
        raise EvalError("Call to unknown function", f'There is no function named "{name}".',
                        node.line)
    args = [evaluate(a, scope) for a in node.args]
    if node.expand and args:
        last = args.pop()
        if last is UNKNOWN:
            return UNKNOWN
        args.extend(last if isinstance(last, list) else list(last.values()))
    if name in _PATH_FUNCS:
        return fn(scope.base_dir, *args) if not has_unknown(args) else UNKNOWN
    if name in _SHALLOW:
        if any(a is UNKNOWN for a in args):
            return UNKNOWN
    elif has_unknown(args):
        return UNKNOWN
    limits.guard_call(name, args)  # refused before it is built when past a ceiling
    try:
        out = fn(*args)
        if isinstance(out, (list, dict, str)):
            limits.check_size(out, f'function "{name}"')
        return out
    except EvalError as e:
        e.line = e.line or node.line
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError, OverflowError) as exc:
        raise EvalError("Invalid function argument",
                        f'Call to function "{name}" failed: {exc}.', node.line, "TYPE") from None


def _templatefile(base, path, vars_=None):
    from verifirst.verifiers.terraform._hcl_ast import Template, _Converter
    text = _read(base, path)
    node = Template(_Converter(path)._template_parts(text, 1))
    return evaluate(node, Scope(lambda n, nd: (vars_ or {})[n] if n in (vars_ or {}) else
                                _raise_undeclared(n, nd), base))


FUNCTIONS["templatefile"] = _templatefile
