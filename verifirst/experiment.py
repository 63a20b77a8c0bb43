"""An experiment file's parts, built by name from the registry: suite, splits, program, verifier,
executor. `vf.load_config` turns them into `vf.optimize` keywords; nothing here runs anything."""
from __future__ import annotations

import inspect
import random
from pathlib import Path

from verifirst.core import registry
from verifirst.config import Experiment
from verifirst.core.errors import ConfigError, InputError, VerifirstError
from verifirst.lm import Models
from verifirst.loop.splits import SplitManifest, make_splits
from verifirst.core.task import Suite


def _call(factory, options: dict, **extra):
    """Call a factory with the options it accepts plus any extras it names."""
    sig = inspect.signature(factory.__init__ if inspect.isclass(factory) else factory)
    accepts_kw = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    kw = dict(options)
    for k, v in extra.items():
        if v is not None and (k in sig.parameters or accepts_kw) and k not in kw:
            kw[k] = v
    return factory(**kw)


def load_suite(exp: Experiment) -> Suite:
    s = exp.suite
    src = str(exp.path) if exp.path else None
    factory = registry.resolve("suite", registry.SUITES, s["name"], "suite.name", src)
    entry = registry.SUITES.get(s["name"])
    check_component_options(exp, "suite", factory)  # an option the loader does not take: named, not a traceback
    try:
        suite = _call(factory, s.get("options") or {}, **{entry.path_arg if entry else "path": s.get("path")})
    except InputError as e:
        raise _placed(exp, "suite", factory, e) from None
    except VerifirstError:
        raise
    except (TypeError, ValueError) as e:
        raise ConfigError(f"suite {s['name']!r} could not be loaded: {e}", path=src, line=_options_line(exp, "suite"),
                          field="suite.options", expected="options the suite takes (see `verifirst components`)") \
            from None
    if not isinstance(suite, Suite):
        raise VerifirstError(f"suite {s['name']!r} returned {type(suite).__name__}, not a Suite")
    if s.get("limit"):
        items = list(suite.items)
        random.Random(exp.experiment["seed"]).shuffle(items)
        suite = Suite(suite.name, items[: s["limit"]], suite.description, suite.meta)
    return suite


def build_program(exp: Experiment, verifier=None, items=None):
    """The experiment's program; an option it does not take or a value it refuses is a
    configuration error naming program.options, not a traceback."""
    p = exp.program
    src = str(exp.path) if exp.path else None
    factory = registry.resolve("program", registry.PROGRAMS, p["name"], "program.name", src)
    check_component_options(exp, "program", factory)
    try:
        return _call(factory, p.get("options") or {}, verifier=verifier, items=items,
                     workdir=exp.experiment["workdir"])
    except VerifirstError:
        raise
    except (TypeError, ValueError, KeyError) as e:
        raise ConfigError(f"program {p['name']!r} could not be built: {e}", path=src,
                          line=_options_line(exp, "program"), field="program.options",
                          expected="options the program accepts (see `verifirst components`)") from None


def experiment_text(exp: Experiment) -> str:
    """The experiment file's text, to find a key's line ("" for an experiment built in Python).

    Args:
        exp: the experiment.
    """
    if not (exp.path and Path(exp.path).is_file()):
        return ""
    return Path(exp.path).read_text(encoding="utf-8", errors="replace")


def _placed(exp: Experiment, section: str, factory, error: InputError) -> InputError:
    """An error a suite loader or verifier raised, placed in the experiment file.

    An error about an option's own value (an unknown backend, a path not found) becomes the
    experiment file's, at the option's line, naming the full field (`verifier.options.backend`).
    An error inside a data file the option led to (a task's Rego at its line) keeps that file
    and line, and says which field of the experiment file led there.

    Args:
        exp: the experiment.
        section: "suite" or "verifier", the section whose component raised.
        factory: the component's factory, whose option names an error's field may be.
        error: what it raised.
    """
    src = str(exp.path) if exp.path else None
    key = _key_by_path(exp, section, error.path)
    if error.path and (error.line is not None or not _same_path(error.path, _option_value(exp, section, key))):
        field, line = _field_and_line(exp, section, key)
        led = f"{field} at {src}:{line}" if src and line else (f"{field} in {src}" if src else field)
        return InputError(f"{error.message} (read through {led})", path=error.path, line=error.line,
                          field=error.field, expected=error.expected)
    field, line = _field_and_line(exp, section, _key_by_field(exp, section, factory, error.field) or key)
    message = error.message
    if error.path:
        message += f": {error.path!r}" + _relative_note(error.path)
    return ConfigError(message, path=src, line=line, field=field, expected=error.expected)


def _key_by_path(exp: Experiment, section: str, path: str | None) -> str | None:
    """The key of [section] whose path value is, or holds, the file an error names."""
    if not path:
        return None
    body = getattr(exp, section)
    paths = {k: v for k, v in (body.get("options") or {}).items() if isinstance(v, str) and v}
    if section == "suite" and body.get("path"):
        paths = {"path": body["path"], **paths}
    return next((k for k, v in paths.items() if _same_path(path, v) or _within(path, v)), None)


def _key_by_field(exp: Experiment, section: str, factory, field: str | None) -> str | None:
    """The key of [section] an error's field names (`backend`, `suite.path`), if it is one."""
    if not field:
        return None
    body = getattr(exp, section)
    name = field.removeprefix(f"{section}.").removeprefix("options.")
    known = set(body.get("options") or {}) | set(registry.accepted_options(factory)[0])
    return name if name in known or (name in body and name != "options") else None


def _field_and_line(exp: Experiment, section: str, key: str | None) -> tuple[str, int | None]:
    """The full dotted field of a key of [section] (`suite.path`, `verifier.options.backend`) and
    its line in the experiment file (the options' line when the key has none of its own)."""
    from verifirst.config import _key_line, _line_of

    text = experiment_text(exp)
    body = getattr(exp, section)
    if key is None:
        return f"{section}.options", _options_line(exp, section)
    if key in body and key != "options" and key not in (body.get("options") or {}):
        return f"{section}.{key}", _line_of(text, section, key) or _line_of(text, section, None)
    return f"{section}.options.{key}", _key_line(text, section, key, "options") or _options_line(exp, section)


def _option_value(exp: Experiment, section: str, key: str | None):
    """The value the experiment file gives a key of [section] (an option's, else the section's)."""
    if key is None:
        return None
    body = getattr(exp, section)
    options = body.get("options") or {}
    return options[key] if key in options else body.get(key)


def _same_path(a: str, b) -> bool:
    """Whether b is a path string naming a (`tasks/` and `./tasks` are `tasks`)."""
    return isinstance(b, str) and bool(b) and Path(a) == Path(b)


def _within(path: str, folder: str) -> bool:
    """Whether path lies under folder, as the loader built it (folder / ...)."""
    return Path(folder) in Path(path).parents


def _relative_note(path: str) -> str:
    """For a relative path that does not exist: what it was resolved against, and the fix."""
    p = Path(path)
    if p.is_absolute() or p.exists():
        return ""  # an experiment file's paths are made absolute against its folder (config.resolve_paths)
    cwd = Path.cwd()
    return (f"; a relative path is read from the current directory ({cwd}), so {cwd / p} was tried: give an "
            "absolute path, or run verifirst from the directory the path is relative to")


def _options_line(exp: Experiment, section: str) -> int | None:
    from verifirst.config import _line_of

    text = experiment_text(exp)
    return (_line_of(text, section, "options") or _line_of(text, f"{section}.options", None)) if text else None


def _path_options(factory) -> set[str]:
    """The options of a factory annotated as paths (`str | os.PathLike`, `Path`)."""
    try:
        sig = inspect.signature(factory.__init__ if inspect.isclass(factory) else factory)
    except (TypeError, ValueError):
        return set()
    return {n for n, p in sig.parameters.items() if "Path" in str(p.annotation)}


def resolve_option_paths(exp: Experiment) -> None:
    """Options of [suite], [program] and [verifier] that their component declares as paths are read
    against the experiment file's folder, as suite.path is (config.resolve_paths); `~` expands.

    Args:
        exp: the experiment (its options are changed in place).
    """
    from verifirst.config import file_path

    base = Path(exp.path).parent if exp.path else None
    tables = {"suite": registry.SUITES, "program": registry.PROGRAMS, "verifier": registry.VERIFIERS}
    src = str(exp.path) if exp.path else None
    for section, table in tables.items():
        body = getattr(exp, section)
        options = body.get("options") or {}
        if not options:
            continue
        factory = registry.resolve(section, table, body["name"], f"{section}.name", src)
        for key in _path_options(factory) & set(options):
            if isinstance(options[key], str) and options[key]:
                options[key] = file_path(options[key], base)


def check_component_options(exp: Experiment, section: str, factory) -> None:
    """Refuse an option name the [section]'s factory does not take (e.g. `variantt`).

    Args:
        exp: the experiment.
        section: "program" or "verifier".
        factory: the loaded factory.
    """
    body = getattr(exp, section)
    registry.check_options(section, body["name"], factory, body.get("options") or {}, f"{section}.options",
                           str(exp.path) if exp.path else None, _options_line(exp, section))


def build_verifier(exp: Experiment, models: Models, items=None):
    """The experiment's verifier; a constructor that fails on anything but our own errors
    (a bad option, a missing tool) is reported as a configuration error, not a traceback.
    Given the suite's `items`, its preflight runs too (loop.preflight.check_verifiers: the
    toolchain runs, a schema or policy loads) before any LM call; an input error from either is
    placed in the experiment file: the option's line, or a data file's own line and the option
    that led there.

    Args:
        exp: the experiment.
        models: the run's LMs (the judge, for a verifier that takes one).
        items: the suite's items, for the preflight; None: no preflight.
    """
    from verifirst.loop.preflight import check_verifiers

    v = exp.verifier
    src = str(exp.path) if exp.path else None
    factory = registry.resolve("verifier", registry.VERIFIERS, v["name"], "verifier.name", src)
    check_component_options(exp, "verifier", factory)
    try:
        verifier = _call(factory, v.get("options") or {}, judge_lm=models.judge if exp.models.get("judge") else None)
        if items is not None:
            check_verifiers([verifier], items)
        return verifier
    except InputError as e:
        raise _placed(exp, "verifier", factory, e) from None
    except VerifirstError:
        raise
    except Exception as e:
        raise ConfigError(f"verifier {v['name']!r} could not be built: {type(e).__name__}: {e}", path=src,
                          line=_options_line(exp, "verifier"), field="verifier.options",
                          expected="options the verifier accepts (see `verifirst components`)") from None


def check_dirs(exp: Experiment) -> None:
    """The workdir must be a directory this process can write (an error names the file's line).

    Args:
        exp: the experiment.
    """
    from verifirst.config import _line_of, check_workdir

    src = str(exp.path) if exp.path else None
    text = Path(exp.path).read_text(encoding="utf-8", errors="replace") if src and Path(src).is_file() else ""
    check_workdir(exp.experiment["workdir"], path=src, line=_line_of(text, "experiment", "workdir"))


def make_executor(exp: Experiment):
    """Where the verifier runs: [experiment] executor ("thread" | "ray"), ray_address, threads (under
    Ray, the number of workers, each building the [verifier] by name once).

    Args:
        exp: the experiment.
    """
    from verifirst.loop.executor import VerifierSpec, from_config

    ex, v = exp.experiment, exp.verifier
    # a verifier handed the judge LM is shipped as built (a worker has no LM to hand it)
    spec = None if exp.models.get("judge") else VerifierSpec(v["name"], dict(v.get("options") or {}))
    executor = from_config(ex["executor"], ex.get("ray_address"), ex["threads"], spec)
    check = getattr(executor, "preflight", None)
    if check is not None:  # an address nothing answers at stops the run before anything is written
        src = str(exp.path) if exp.path else None
        line = None
        if exp.path and Path(exp.path).is_file():
            from verifirst.config import _line_of

            line = _line_of(Path(exp.path).read_text(encoding="utf-8"), "experiment", "ray_address")
        check(source=src, line=line)
    return executor


def make_manifest(exp: Experiment, suite: Suite) -> SplitManifest:
    sp = exp.splits
    if sp.get("manifest"):
        try:
            m = SplitManifest.load(sp["manifest"])
        except InputError as e:  # the manifest's own error, and the key of the experiment file that led there
            field, line = _field_and_line(exp, "splits", "manifest")
            src = str(exp.path) if exp.path else None
            led = f"{field} at {src}:{line}" if src and line else (f"{field} in {src}" if src else field)
            raise InputError(f"{e.message} (read through {led})", path=e.path, line=e.line, field=e.field,
                             expected=e.expected) from None
        ids = {it.id for it in suite.items}
        missing = [i for i in m.train + m.val + m.test if i not in ids]
        if missing:
            raise ConfigError(f"manifest names {len(missing)} item(s) not in suite {suite.name}, e.g. {missing[:3]}",
                              path=sp["manifest"], field="splits.manifest", expected="a manifest made for this suite")
        return m
    strat = sp.get("stratify")
    return make_splits(suite.items, key=lambda it: it.id, group=lambda it: it.group_key,
                       ratios=sp["ratios"], seed=exp.experiment["seed"],
                       stratify=(lambda it: str(it.meta.get(strat, it.gold.get(strat, "")))) if strat else None,
                       source=str(exp.path) if exp.path else None, by=sp.get("by") or "random",
                       time_field=sp.get("time_field"), windows=sp.get("windows"))
