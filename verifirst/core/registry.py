"""Names in experiment files -> suites, programs, verifiers, engines, studies: the registry
mechanism, naming no component itself. Every component, built-in ones included, is added by the
`register(registry)` function (or dict) an installed distribution declares under the entry-point
group `verifirst.components`: verifirst's own domain packages declare theirs in verifirst's
pyproject.toml exactly as a plugin does in its own. Built-ins load on the first lookup, plugins
after them; a component's own module is imported only when that component is used."""
from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any, Callable

from verifirst.core.errors import ConfigError

BUILTIN = "verifirst"  # the origin of a component verifirst's own distribution registers


@dataclass(frozen=True)
class Entry:
    target: str  # "module:attr"
    help: str
    path_arg: str = "path"  # the factory's parameter that [suite] path goes to
    origin: str = BUILTIN  # or "plugin NAME (DIST VERSION)" for one added by another distribution
    obj: Any = None  # a plugin may hand the factory itself instead of a target string

    def load(self) -> Callable[..., Any]:
        if self.obj is not None:
            return self.obj
        mod, attr = self.target.split(":")
        return getattr(importlib.import_module(mod), attr)


class Table(MutableMapping):
    """The components of one kind, name -> Entry. Reading it first loads the built-ins (once)."""

    def __init__(self, kind: str):
        self.kind = kind
        self._data: dict[str, Entry] = {}

    def __getitem__(self, name: str) -> Entry:
        load_builtins()
        return self._data[name]

    def __setitem__(self, name: str, entry: Entry) -> None:
        self._data[name] = entry

    def __delitem__(self, name: str) -> None:
        del self._data[name]

    def __iter__(self) -> Iterator[str]:
        load_builtins()
        return iter(list(self._data))

    def __len__(self) -> int:
        load_builtins()
        return len(self._data)

    def __contains__(self, name: object) -> bool:
        load_builtins()
        return name in self._data

    def __repr__(self) -> str:
        return f"Table({self.kind!r}, {sorted(self._data)})"


# The kinds, each a table. `Registrar.add` documents what each kind's target is.
SUITES = Table("suite")
PROGRAMS = Table("program")
VERIFIERS = Table("verifier")
ENGINES = Table("engine")  # optimizer engines by name; "none" (evaluate only) is not an engine
STAGE_ORDERS = Table("stages")  # failing stages in funnel order, PASS last, for report tables
PUBLIC = Table("public")  # names reachable as `verifirst.NAME` (resolved lazily by verifirst/__init__.py)
STUDIES = Table("study")  # research studies, `verifirst bench NAME`: their main(argv)
_TABLES = {t.kind: t for t in (SUITES, PROGRAMS, VERIFIERS, ENGINES, STAGE_ORDERS, PUBLIC, STUDIES)}


def tables() -> dict[str, Table]:
    """The kinds a distribution may add to, each with its table."""
    return dict(_TABLES)


def stage_orders() -> list[tuple[str, ...]]:
    """The registered stage funnels, plugins' included, that can be loaded (one whose extra is
    missing is skipped)."""
    load_plugins()
    out = []
    for entry in STAGE_ORDERS.values():
        try:
            out.append(tuple(entry.load()))
        except Exception:  # noqa: BLE001 - an order is a display nicety, never a reason to fail a report
            continue
    return out


def resolve(kind: str, table: dict[str, Entry], name: str, field: str, path: str | None) -> Callable:
    """A registered name (built in or added by an installed plugin), or `package.module:attr`
    for your own component."""
    if name not in table:
        load_plugins()  # lazily: only a name the built-ins lack needs the installed plugins
    if name not in table and ":" in name:
        try:
            return Entry(name, "").load()
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"cannot import {kind} {name!r}: {e}", path=path, field=field,
                              expected="an importable module:attribute") from None
    if name not in table:
        raise ConfigError(f"unknown {kind} {name!r}" + _plugin_failures_note(), path=path, field=field,
                          expected="one of " + ", ".join(sorted(table)))
    entry = table[name]
    try:
        return entry.load()
    except Exception as e:  # a plugin's module may fail in any way; ours only by a missing extra
        if entry.origin == BUILTIN and not isinstance(e, (ImportError, AttributeError)):
            raise
        by = "" if entry.origin == BUILTIN else f" (from {entry.origin})"
        raise ConfigError(f"{kind} {name!r}{by} is not available: {e}", path=path, field=field,
                          expected="an installed component (`make install`)") from None


# Arguments the kernel hands a factory itself; an experiment file's options may not name them.
INJECTED = ("verifier", "items", "workdir", "judge_lm")


def accepted_options(factory: Callable) -> tuple[list[str], bool]:
    """The keyword options a factory takes (not the ones the kernel injects), and whether it
    takes any keyword (**kwargs).

    Args:
        factory: a class or function a registry entry loads.
    """
    import inspect

    try:
        sig = inspect.signature(factory.__init__ if inspect.isclass(factory) else factory)
    except (TypeError, ValueError):
        return [], True
    names = [n for n, p in sig.parameters.items()
             if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n not in INJECTED]
    return names, any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())


def check_options(kind: str, name: str, factory: Callable, options: dict, field: str, path: str | None = None,
                  line: int | None = None) -> None:
    """Refuse an option the factory does not take (`variantt`), naming it and the ones it takes.

    Args:
        kind: "program", "verifier", "suite" or "optimizer", for the message.
        name: the component's name.
        factory: the loaded factory.
        options: the options given.
        field: where the options are, e.g. `program.options`.
        path: the experiment file, if any.
        line: the options' line there, if known.
    """
    import difflib

    names, open_ended = accepted_options(factory)
    if open_ended:
        return
    for key in options:
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{kind} {name!r} has no option {key!r}{hint}", path=path, line=line,
                              field=f"{field}.{key}",
                              expected=("one of " + ", ".join(names)) if names else "no options")


# -- the entry-point group `verifirst.components` -----------------------------------------------
# A distribution declares, in its pyproject.toml,
#   [project.entry-points."verifirst.components"]
#   mydomain = "mypkg.components:register"
# whose target is `register(registry)` (called with a Registrar) or a dict
#   {"verifier": {"name": "mypkg.mod:Factory" | (target, help) | {"target": ..., "help": ...}}}.
# verifirst's own domain packages are declared the same way in verifirst's pyproject.toml: their
# entries load first, on the first lookup (origin "verifirst"); every other distribution's load
# after them, the first time a name the built-ins lack is looked up (origin "plugin NAME (DIST V)").
ENTRY_POINT_GROUP = "verifirst.components"
PLUGIN_ERRORS: dict[str, str] = {}  # plugin name -> why it added nothing (shown by `verifirst components`)
BUILTIN_ERRORS: dict[str, str] = {}  # the same for verifirst's own entry points (a stale or partial install)
_BUILTINS = ["unloaded"]  # -> "loading" -> "loaded"
_PLUGINS_LOADED = [False]
_LOCK = threading.RLock()


def component(kind: str, name: str) -> Any:
    """A registered component (built in or from a plugin), loaded: how kernel modules reach a
    domain's code without importing it.

    Args:
        kind: a key of tables(), e.g. "suite", "verifier", "engine".
        name: the registered name.
    """
    return resolve(kind, _TABLES[kind], name, f"{kind}.name", None)


class Registrar:
    """What an entry point's `register(registry)` receives: adds entries credited to its distribution."""

    def __init__(self, origin: str):
        self.origin = origin
        self.added: list[tuple[str, str]] = []

    def add(self, kind: str, name: str, target: Any, help: str = "", path_arg: str = "path") -> None:
        """Register one component.

        Args:
            kind: "suite", "program", "verifier", "engine" (an optimizer), "stages" (a tuple of
                stage names in funnel order, PASS last, that report tables follow), "public" (a class or
                function reachable as `verifirst.NAME`) or "study" (a research study's `main(argv)`, `verifirst bench NAME`).
            name: the name experiment files and the CLI use; a name already taken is refused.
            target: "package.module:attr", or the factory (class or function) itself; for
                "stages", also the tuple of stage names.
            help: one line shown by `verifirst components`.
            path_arg: for a suite, the factory parameter that `[suite] path` goes to.
        """
        table = _TABLES.get(kind)
        if table is None:
            raise ValueError(f"unknown kind {kind!r}; one of {', '.join(_TABLES)}")
        if not isinstance(name, str) or not name or ":" in name:
            raise ValueError(f"bad {kind} name {name!r}: a non-empty name without ':'")
        if name in table._data:
            raise ValueError(f"{kind} {name!r} is already registered by {table._data[name].origin}")
        if kind == "stages" and isinstance(target, (tuple, list)):
            entry = Entry(f"{self.origin}:{name}", help, path_arg, self.origin, obj=tuple(target))
        elif isinstance(target, str):
            if target.count(":") != 1:
                raise ValueError(f"{kind} {name!r}: target {target!r} is not 'package.module:attr'")
            entry = Entry(target, help, path_arg, self.origin)
        elif callable(target):
            where = f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', '?')}"
            entry = Entry(where, help, path_arg, self.origin, obj=target)
        else:
            raise ValueError(f"{kind} {name!r}: target must be 'module:attr' or a callable, "
                             f"not {type(target).__name__}")
        table._data[name] = entry
        self.added.append((kind, name))


def _register_dict(reg: Registrar, spec: dict) -> None:
    for kind, names in spec.items():
        if not isinstance(names, dict):
            raise ValueError(f"{kind!r} must map names to targets, not {type(names).__name__}")
        for name, val in names.items():
            if isinstance(val, dict):
                reg.add(kind, name, val.get("target"), val.get("help", ""), val.get("path_arg", "path"))
            elif isinstance(val, (tuple, list)):
                reg.add(kind, name, *val)
            else:
                reg.add(kind, name, val)


def _is_builtin(ep) -> bool:
    dist = getattr(ep, "dist", None)
    return dist is not None and re.sub(r"[-_.]+", "-", dist.name).lower() == BUILTIN


def _origin(ep) -> str:
    if _is_builtin(ep):
        return BUILTIN
    dist = getattr(ep, "dist", None)
    return f"plugin {ep.name} ({dist.name} {dist.version})" if dist is not None else f"plugin {ep.name}"


def _entry_points(builtin: bool) -> list:
    """verifirst's own entry points in the group, or every other distribution's."""
    from importlib.metadata import distributions, entry_points

    if not builtin:
        return [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if not _is_builtin(ep)]
    for dist in distributions(name=BUILTIN):  # the first that declares the group: metadata left in a
        eps = [ep for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP]  # checkout by an older
        if eps:  # build may come first on sys.path
            return eps
    return []


def load_builtins() -> dict[str, str]:
    """Register verifirst's own components, once: the `verifirst.components` entry points of the
    verifirst distribution (each domain package's `register`), in name order. Called by every
    table read, so nothing needs to call it first.

    Returns:
        BUILTIN_ERRORS: entry-point name -> why it added nothing (empty on a sound install).
    """
    if _BUILTINS[0] == "loaded":
        return BUILTIN_ERRORS
    with _LOCK:  # another thread waits here until the built-ins are all in
        if _BUILTINS[0] != "unloaded":  # loaded meanwhile, or this thread's register() reading a table
            return BUILTIN_ERRORS
        _BUILTINS[0] = "loading"
        try:
            eps = sorted(_entry_points(builtin=True), key=lambda ep: ep.name)
            if not eps:
                BUILTIN_ERRORS[BUILTIN] = (f"the installed verifirst distribution declares no {ENTRY_POINT_GROUP!r} "
                                           "entry points (a stale install): reinstall it, e.g. `make install` "
                                           "or `pip install -e .`")
            _load_entry_points(eps, BUILTIN_ERRORS)
        finally:
            _BUILTINS[0] = "loaded"
    return BUILTIN_ERRORS


def load_plugins(refresh: bool = False) -> dict[str, str]:
    """Load every other installed distribution's `verifirst.components` entry points once (after
    the built-ins); one that fails is recorded in PLUGIN_ERRORS under its name (and what it added
    is withdrawn), never raised, so a broken plugin troubles only the commands that name what it
    would have provided.

    Args:
        refresh: forget plugins loaded before and look again (tests install plugins mid-process).

    Returns:
        PLUGIN_ERRORS: plugin name -> the error.
    """
    load_builtins()
    with _LOCK:
        if _PLUGINS_LOADED[0] and not refresh:
            return PLUGIN_ERRORS
        unload_plugins()
        _PLUGINS_LOADED[0] = True
        _load_entry_points(_entry_points(builtin=False), PLUGIN_ERRORS)
    return PLUGIN_ERRORS


def _load_entry_points(eps, errors: dict[str, str]) -> None:
    seen = set()
    for ep in eps:
        if ep.name in seen:  # one distribution found twice on sys.path
            continue
        seen.add(ep.name)
        reg = Registrar(_origin(ep))
        try:
            target = ep.load()
            if isinstance(target, dict):
                _register_dict(reg, target)
            elif callable(target):
                target(reg)
            else:
                raise ValueError(f"{ep.value} is neither register(registry) nor a dict")
        except Exception as e:
            for kind, name in reg.added:
                _TABLES[kind]._data.pop(name, None)
            errors[ep.name] = f"{ep.value}: {type(e).__name__}: {e}"


def unload_plugins() -> None:
    """Withdraw every plugin's entries (the built-ins stay); the next lookup of an unknown name
    loads them again."""
    with _LOCK:
        for table in _TABLES.values():
            for name in [n for n, e in table._data.items() if e.origin != BUILTIN]:
                del table._data[name]
        PLUGIN_ERRORS.clear()
        _PLUGINS_LOADED[0] = False


def _plugin_failures_note() -> str:
    notes = [f"verifirst's own {name!r} ({err})" for name, err in sorted(BUILTIN_ERRORS.items())]
    notes += [f"{name!r} ({err})" for name, err in sorted(PLUGIN_ERRORS.items())]
    if not notes:
        return ""
    return "; entry point(s) that failed to load, which may have provided it: " + "; ".join(notes)
