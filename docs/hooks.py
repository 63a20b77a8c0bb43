"""MkDocs hooks: pages generated from the code at build time, so they cannot drift from it.

- reference/api.md: one mkdocstrings entry per public name of `verifirst` (its lazy table and the
  registry's public classes), grouped;
- reference/experiment-file.md: from the schema in verifirst/config.py (docs/gen_config_ref.py);
- reference/cli.md: from the typer app in verifirst/cli.py (docs/gen_cli_ref.py);
- performance.md: from benchmarks/perf/results/*.json (docs/gen_perf.py);
- the `<!-- layout-table -->` marker in architecture.md: each package's modules with the first line
  of their docstring.
"""
from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

from mkdocs.structure.files import File

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
LAYOUT_MARKER = "<!-- layout-table -->"

# Public names by topic; a name missing here still gets a page entry, under "Other".
API_GROUPS = {
    "Run, evaluate, calibrate": ["optimize", "evaluate", "run", "load_config", "calibrate", "monitor", "Result",
                                 "MLflow", "Budget"],
    "Data and splits": ["Item", "Suite", "make_splits", "SplitManifest"],
    "Models": ["make_lm", "make_models"],
    "Metrics and scorers": ["Metric", "mlflow_scorer", "dspy_metric"],
    "Optimizers": ["AutoRefine", "AutoRefineAligner", "Engine", "EngineContext", "EngineResult",
                   "TeleprompterEngine"],
    "Tracking and callbacks": ["Tracker", "RunCallback"],
    "Executors": ["Threads", "Ray"],
    "Errors": ["InputError", "LeakageError"],
}


def _load(name: str):
    """A module of docs/ by file name (hooks are loaded by path, so docs/ is not importable)."""
    spec = importlib.util.spec_from_file_location(f"verifirst_docs_{name}", DOCS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def source_path(dotted: str) -> str:
    """The dotted path as the checkout lays it out: `verifirst.optimizers` is the top-level
    `optimizers/` directory (pyproject's package-dir), which mkdocstrings reads from source."""
    import tomllib

    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for pkg in sorted(package_dir, key=len, reverse=True):
        if dotted.startswith(pkg + ".") and package_dir[pkg] != pkg.replace(".", "/"):
            return package_dir[pkg].replace("/", ".") + dotted[len(pkg):]
    return dotted


def public_api() -> dict[str, str]:
    """{public name: dotted source path of its definition} for `import verifirst as vf; vf.NAME`."""
    import verifirst
    from verifirst.core.registry import PUBLIC

    table = {name: f"{mod}.{attr}" for name, (mod, attr) in verifirst._LAZY.items()}
    table.update({name: entry.target.replace(":", ".") for name, entry in PUBLIC.items()})  # registered by domains
    return {name: source_path(path) for name, path in table.items()}


def api_page() -> str:
    """The API reference: a mkdocstrings `:::` entry per public name."""
    api = public_api()
    lines = ["# API reference", "",
             "Everything below is reachable as `vf.NAME` after `import verifirst as vf` (heavy modules "
             "load on first use). Generated from the docstrings.", ""]
    seen: set[str] = set()
    groups = {**API_GROUPS, "Other": [n for n in api if not any(n in g for g in API_GROUPS.values())]}
    for title, names in groups.items():
        names = [n for n in names if n in api]
        if not names:
            continue
        lines += [f"## {title}", ""]
        for name in names:
            seen.add(name)
            lines += [f"::: {api[name]}", "    options:", f"      heading: vf.{name}", f"      toc_label: vf.{name}", ""]
    return "\n".join(lines)


def _first_line(path: Path) -> str:
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    except SyntaxError:
        return ""
    return " ".join(doc.strip().split("\n\n")[0].split()).replace("|", "\\|")


def layout_table() -> str:
    """Each package directory's modules with the first paragraph of their docstring."""
    dirs = ["verifirst", "verifirst/core", "verifirst/lm", "verifirst/loop", "verifirst/report", "verifirst/tracking",
            "programs", "verifiers", "verifiers/bash", "verifiers/terraform", "optimizers", "retrieval", "benchmarks",
            "benchmarks/perf", "benchmarks/studies", "ops"]
    lines = ["| module | what it is |", "|---|---|"]
    for d in dirs:
        for path in sorted((ROOT / d).glob("*.py")):
            if path.name.startswith("_") and not (path.name == "__init__.py" and d.count("/") == 1
                                                  and d.startswith("verifirst/")):
                continue  # a layer package's __init__ says what the layer is
            lines.append(f"| `{d}/{path.name}` | {_first_line(path)} |")
    return "\n".join(lines)


def on_files(files, config):
    """Add the generated pages to the build."""
    if str(ROOT) not in sys.path:  # `mkdocs` run from elsewhere still finds this checkout's packages
        sys.path.insert(0, str(ROOT))
    generated = {
        "reference/api.md": api_page(),
        "reference/experiment-file.md": _load("gen_config_ref").page(),
        "reference/cli.md": _load("gen_cli_ref").page(),
        "performance.md": _load("gen_perf").page(),
    }
    for uri, content in generated.items():
        files.append(File.generated(config, uri, content=content))
    return files


def on_page_markdown(markdown, page, config, files):
    """Fill the layout marker with the current module table."""
    if LAYOUT_MARKER in markdown:
        return markdown.replace(LAYOUT_MARKER, layout_table())
    return markdown
