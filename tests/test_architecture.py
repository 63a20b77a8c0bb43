"""The kernel (verifirst/) names no domain: only cli.py, the composition root, imports programs,
verifiers, optimizers, retrieval or benchmarks, and no kernel module (cli.py included) names a domain
module even in a string. Domains register themselves, built-ins through the same
`verifirst.components` entry points as plugins."""
import ast
import re
from pathlib import Path

KERNEL = Path(__file__).resolve().parents[1] / "verifirst"
DOMAINS = ("judge", "programs", "verifiers", "optimizers", "retrieval", "benchmarks")
# The grep of the issue, line by line: `from .programs ...`, `import verifirst.verifiers ...`.
IMPORT_RE = re.compile(r"^\s*(from|import)\s+(\.|verifirst\.)(" + "|".join(DOMAINS) + r")\b")


def _kernel_files():
    return sorted(p for p in KERNEL.rglob("*.py") if p.name != "cli.py" and "__pycache__" not in p.parts)


def test_no_kernel_module_but_cli_imports_a_domain():
    offenders = [f"{p.name}:{n}: {line.strip()}" for p in _kernel_files()
                 for n, line in enumerate(p.read_text().splitlines(), 1) if IMPORT_RE.search(line)]
    assert offenders == [], "kernel modules importing domain packages:\n" + "\n".join(offenders)


def test_no_kernel_module_imports_a_domain_in_any_spelling():
    """What the line grep would miss: `from verifirst import verifiers`, `from .. import x`,
    imports inside functions split over lines, `importlib.import_module("verifirst.programs...")`."""
    offenders = []
    for p in _kernel_files():
        for node in ast.walk(ast.parse(p.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ("verifirst." if node.level else "") + (node.module or "")
                names = [base] + [f"{base}.{a.name}".replace("verifirst..", "verifirst.") for a in node.names]
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
                  == "import_module" and node.args and isinstance(node.args[0], ast.Constant)):
                names = [str(node.args[0].value)]
            for name in names:
                parts = name.strip(".").split(".")
                if len(parts) > 1 and parts[0] == "verifirst" and parts[1] in DOMAINS:
                    offenders.append(f"{p.name}:{node.lineno}: {name}")
    assert offenders == [], "kernel modules importing domain packages:\n" + "\n".join(offenders)


NAMED = re.compile(r"\bverifirst\.(" + "|".join(DOMAINS + ("ops",)) + r")\b")


def test_no_kernel_module_names_a_domain_module_even_in_a_string():
    """No string literal anywhere in verifirst/ (docstrings, tables, f-strings; cli.py included:
    its study list comes from the registry) names `verifirst.<domain>...`. The registry holds the
    mechanism only; each domain's `register` names its own modules."""
    offenders = []
    for p in sorted(q for q in KERNEL.rglob("*.py") if "__pycache__" not in q.parts):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAMED.search(node.value):
                offenders.append(f"{p.relative_to(KERNEL.parent)}:{node.lineno}: {node.value.strip()[:80]!r}")
    assert offenders == [], "kernel modules naming domain modules:\n" + "\n".join(offenders)


def test_builtins_register_through_the_entry_point_group_each_naming_only_its_own_modules():
    from importlib.metadata import distribution

    from verifirst.core import registry

    eps = [ep for ep in distribution("verifirst").entry_points if ep.group == registry.ENTRY_POINT_GROUP]
    assert {ep.name for ep in eps} >= {"judge", "programs", "verifiers", "optimizers", "benchmarks"}, \
        "verifirst's pyproject.toml declares its domains' register functions (reinstall: pip install -e .)"
    for ep in eps:
        package = ep.value.split(":")[0]
        assert NAMED.fullmatch(package), ep  # a domain package's own register function
        reg = registry.Registrar("probe")
        reg.add = lambda kind, name, target, *a, **k: added.append((kind, name, target))  # noqa: B023
        added: list = []
        ep.load()(reg)
        assert added, ep
        foreign = [(kind, name, t) for kind, name, t in added if not str(t).startswith(package + ".")]
        assert foreign == [], f"{ep.name} registers another package's modules: {foreign}"


def test_registry_targets_all_load():
    """Every built-in name resolves to its factory (a moved module breaks here, not in a user's run)."""
    from verifirst.core import registry

    assert registry.load_builtins() == {}
    builtins = [(kind, name, entry) for kind, table in registry.tables().items()
                for name, entry in table.items() if entry.origin == "verifirst"]
    assert {kind for kind, _, _ in builtins} == set(registry.tables())  # every kind has built-ins
    for kind, name, entry in builtins:
        assert entry.load() is not None, (kind, name)


def test_report_stage_tables_follow_the_verifiers_declared_funnel():
    """The kernel's report knows no verifier's stages: the report carries the funnel."""
    from verifirst.report import stage_rows

    body = {"before": {"stages": {"A_FAIL": 1, "Z_FAIL": 2, "PASS": 1}}}
    rep = {"splits": {"test": body}, "stage_order": ["Z_FAIL", "M_FAIL", "A_FAIL", "PASS"]}
    stages, rows = stage_rows(rep)
    assert stages == ["Z_FAIL", "M_FAIL", "A_FAIL", "PASS"] and rows == [["test", "before", "2", "0", "1", "1"]]
    assert stage_rows({"splits": {"test": body}})[0] == ["A_FAIL", "Z_FAIL", "PASS"]  # no funnel: sorted


MAX_MODULE_LINES = 600  # the project rule: small modules, none over 600 lines


def test_no_tracked_python_file_is_over_600_lines():
    """Every git-tracked .py file (the package folders, tests/, benchmarks/, docs/, examples/) stays
    at most MAX_MODULE_LINES lines; the failure names each offender with its count."""
    import shutil
    import subprocess

    import pytest

    root = KERNEL.parent
    if not shutil.which("git") or not (root / ".git").exists():
        pytest.skip("not a git checkout: the tracked files cannot be listed")
    listed = subprocess.run(["git", "ls-files", "-z", "--", "*.py"], cwd=root, capture_output=True, check=True)
    paths = [p for p in listed.stdout.decode().split("\0") if p]
    assert paths, "git ls-files listed no .py file"
    counts = {p: len((root / p).read_text(encoding="utf-8").splitlines()) for p in paths
              if (root / p).is_file() and not (root / p).is_symlink()}
    offenders = [f"{p}: {n} lines" for p, n in sorted(counts.items()) if n > MAX_MODULE_LINES]
    assert offenders == [], f"modules over {MAX_MODULE_LINES} lines (split them by responsibility):\n" + \
        "\n".join(offenders)
