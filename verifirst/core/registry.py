"""Names in experiment files -> suites, programs, verifiers, engines. Imports are lazy: a suite's
dependencies load only when that suite is used. Installed packages add names through the
entry-point group `verifirst.components` (see load_plugins); the tables here are the only place
the kernel names domain modules, as strings."""
from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass
from typing import Any, Callable

from verifirst.core.errors import ConfigError


@dataclass(frozen=True)
class Entry:
    target: str  # "module:attr"
    help: str
    path_arg: str = "path"  # the factory's parameter that [suite] path goes to
    origin: str = "verifirst"  # or "plugin NAME (DIST VERSION)" for one added by an entry point
    obj: Any = None  # a plugin may hand the factory itself instead of a target string

    def load(self) -> Callable[..., Any]:
        if self.obj is not None:
            return self.obj
        mod, attr = self.target.split(":")
        return getattr(importlib.import_module(mod), attr)


SUITES = {
    "bash-builtin": Entry("verifirst.benchmarks.bash_pack:load_bash_pack", "built-in NL->Bash pack (40+ tasks)"),
    "nl2sh-alfa": Entry("verifirst.benchmarks.nl2sh:load_nl2sh", "NL2SH-ALFA test, 300 tasks (PyPI icalfa)", "source"),
    "intercode-bash": Entry("verifirst.benchmarks.intercode:load_intercode", "InterCode-Bash from a path"),
    "eabench": Entry("verifirst.benchmarks.eabench:load_eabench", "NL2Bash-EAbench from a path"),
    "iac-builtin": Entry("verifirst.benchmarks.iac_pack:load_pack", "built-in NL->Terraform pack (20+ tasks)",
                         "directory"),
    "iac-eval-v1": Entry("verifirst.benchmarks.iac_eval:load_iac_eval_v1", "IaC-Eval v1 CSV"),
    "iac-eval-v2": Entry("verifirst.benchmarks.iac_eval:load_iac_eval_v2", "IaC-Eval v2 CSV"),
    "iac-tasks": Entry("verifirst.benchmarks.iac_tasks:load_tasks", "a user's NL->Terraform tasks (folders or JSONL)"),
    "outcomes": Entry("verifirst.benchmarks.outcomes:load_outcomes", "outcome records (JSONL/CSV)"),
    "ice-score": Entry("verifirst.benchmarks.outcomes:load_ice_score", "HumanEval snippets with execution grades"),
}

PROGRAMS = {
    "bash-generator": Entry("verifirst.programs.bash:BashGenerator", "NL->Bash (options: variant=predict|cot)"),
    "iac-generator": Entry("verifirst.programs.builders:iac_program",
                           "NL->Terraform (options: strategy=cot|react-rag|react-mcp|repair|repair-rag, k)"),
    "passfail-judge": Entry("verifirst.programs.builders:passfail_judge",
                            "PASS/FAIL judge over an outcome view (options: view, prompt, prompt_file)"),
    "rubric-judge": Entry("verifirst.programs.builders:rubric_judge",
                          "weighted-rubric judge (options: view, prompt, prompt_file, threshold)"),
}

VERIFIERS = {
    "bash-exec": Entry("verifirst.verifiers.bash.feh:FehVerifier", "sandboxed execution equivalence (NL2SH FEH)"),
    "bash-tests": Entry("verifirst.verifiers.bash.oracle:BashTestsVerifier",
                        "the task's own check, run after the candidate in the same sandbox"),
    "bash-syntax": Entry("verifirst.verifiers.bash.shell_gates:BashSyntaxGate", "bash -n syntax gate"),
    "bash-pack": Entry("verifirst.benchmarks.bash_pack:PackVerifier", "the built-in pack's own checks"),
    "shellcheck": Entry("verifirst.verifiers.bash.shell_gates:ShellcheckGate", "shellcheck gate"),
    "terraform": Entry("verifirst.verifiers.terraform.verifier:TerraformVerifier", "validate -> plan -> OPA"),
    "label": Entry("verifirst.verifiers.label:LabelVerifier", "judge verdict vs recorded outcome"),
    "exact": Entry("verifirst.verifiers.exact:ExactMatch", "exact match with the reference (baseline)"),
}

# Optimizer engines by name; "none" (evaluate only) is not an engine.
ENGINES = {
    "gepa": Entry("verifirst.optimizers.gepa:GEPAEngine", "GEPA reflective prompt evolution"),
    "simba": Entry("verifirst.optimizers.simba:SIMBAEngine", "SIMBA stochastic introspective mini-batch ascent"),
    "autorefine": Entry("verifirst.optimizers.autorefine:AutoRefineEngine", "AutoRefine judge calibration"),
}

# The parts `verifirst calibrate` composes around the outcomes suite and the label verifier.
CALIBRATION = {
    "make-judge": Entry("verifirst.programs.judges:make_judge", "a judge program by kind (passfail | rubric)"),
    "run-judge": Entry("verifirst.optimizers.autorefine:run_judge", "a judge's scores over items"),
    "verdicts-at": Entry("verifirst.optimizers.autorefine:verdicts_at", "PASS/FAIL verdicts at a threshold"),
    "judge-report": Entry("verifirst.optimizers.autorefine:judge_report", "the judge section of a calibration report"),
    "align-anchor": Entry("verifirst.optimizers.mlflow_align:align_anchor", "MLflow make_judge + align() anchor"),
}

# Public classes a domain package provides under the top-level name (`verifirst.AutoRefine`):
# `verifirst/__init__.py` resolves these lazily, so `import verifirst` stays light.
PUBLIC = {
    "AutoRefine": "verifirst.optimizers.teleprompter:AutoRefine",
    "AutoRefineAligner": "verifirst.optimizers.aligner:AutoRefineAligner",
}

# Stage funnels (failing stages in the order a candidate meets them, PASS last) for ordering report
# tables when a report does not carry its verifier's own `stage_order`.
STAGE_ORDERS = {
    "terraform": Entry("verifirst.verifiers.terraform.iac_taxonomy:STAGES", "validate -> plan -> OPA"),
}


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
        load_plugins()  # lazily: only a name the built-in tables lack needs the installed plugins
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
        if entry.origin == "verifirst" and not isinstance(e, (ImportError, AttributeError)):
            raise
        by = "" if entry.origin == "verifirst" else f" (from {entry.origin})"
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


# -- plugins: the entry-point group `verifirst.components` --------------------------------------
# An installed distribution declares, in its pyproject.toml,
#   [project.entry-points."verifirst.components"]
#   mydomain = "mypkg.components:register"
# whose target is `register(registry)` (called with a Registrar) or a dict
#   {"verifier": {"name": "mypkg.mod:Factory" | (target, help) | {"target": ..., "help": ...}}}.
ENTRY_POINT_GROUP = "verifirst.components"
PLUGIN_ERRORS: dict[str, str] = {}  # plugin name -> why it added nothing (shown by `verifirst components`)
_PLUGINS_LOADED = [False]
_PLUGINS_LOCK = threading.RLock()


def tables() -> dict[str, dict[str, Entry]]:
    """The kinds a plugin may add to, each with its table."""
    return {"suite": SUITES, "program": PROGRAMS, "verifier": VERIFIERS, "engine": ENGINES,
            "stages": STAGE_ORDERS, "calibration": CALIBRATION}


def component(kind: str, name: str) -> Any:
    """A registered component (built in or from a plugin), loaded: how kernel modules reach a
    domain's code without importing it.

    Args:
        kind: a key of tables(), e.g. "suite", "verifier", "calibration".
        name: the registered name.
    """
    return resolve(kind, tables()[kind], name, f"{kind}.name", None)


class Registrar:
    """What a plugin's `register(registry)` receives: adds entries credited to that plugin."""

    def __init__(self, origin: str):
        self.origin = origin
        self.added: list[tuple[str, str]] = []

    def add(self, kind: str, name: str, target: Any, help: str = "", path_arg: str = "path") -> None:
        """Register one component.

        Args:
            kind: "suite", "program", "verifier", "engine", or "stages" (a tuple of stage
                names in funnel order, PASS last, that report tables follow).
            name: the name experiment files and the CLI use; a name already taken is refused.
            target: "package.module:attr", or the factory (class or function) itself; for
                "stages", also the tuple of stage names.
            help: one line shown by `verifirst components`.
            path_arg: for a suite, the factory parameter that `[suite] path` goes to.
        """
        table = tables().get(kind)
        if table is None:
            raise ValueError(f"unknown kind {kind!r}; one of {', '.join(tables())}")
        if not isinstance(name, str) or not name or ":" in name:
            raise ValueError(f"bad {kind} name {name!r}: a non-empty name without ':'")
        if name in table:
            raise ValueError(f"{kind} {name!r} is already registered by {table[name].origin}")
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
        table[name] = entry
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


def _origin(ep) -> str:
    dist = getattr(ep, "dist", None)
    return f"plugin {ep.name} ({dist.name} {dist.version})" if dist is not None else f"plugin {ep.name}"


def load_plugins(refresh: bool = False) -> dict[str, str]:
    """Load every installed `verifirst.components` plugin once; one that fails is recorded in
    PLUGIN_ERRORS under its name (and what it added is withdrawn), never raised, so a broken
    plugin troubles only the commands that name what it would have provided.

    Args:
        refresh: forget plugins loaded before and look again (tests install plugins mid-process).

    Returns:
        PLUGIN_ERRORS: plugin name -> the error.
    """
    from importlib.metadata import entry_points

    with _PLUGINS_LOCK:
        if _PLUGINS_LOADED[0] and not refresh:
            return PLUGIN_ERRORS
        unload_plugins()
        _PLUGINS_LOADED[0] = True
        _load_entry_points(entry_points(group=ENTRY_POINT_GROUP))
    return PLUGIN_ERRORS


def _load_entry_points(eps) -> None:
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
                tables()[kind].pop(name, None)
            PLUGIN_ERRORS[ep.name] = f"{ep.value}: {type(e).__name__}: {e}"


def unload_plugins() -> None:
    """Withdraw every plugin's entries; the next lookup of an unknown name loads them again."""
    for table in tables().values():
        for name in [n for n, e in table.items() if e.origin != "verifirst"]:
            del table[name]
    PLUGIN_ERRORS.clear()
    _PLUGINS_LOADED[0] = False


def _plugin_failures_note() -> str:
    if not PLUGIN_ERRORS:
        return ""
    return "; plugin(s) that failed to load, which may have provided it: " + "; ".join(
        f"{name!r} ({err})" for name, err in sorted(PLUGIN_ERRORS.items()))
