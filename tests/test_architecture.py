"""The kernel (verifirst/) names no domain: only cli.py, the composition root, imports programs,
verifiers, optimizers, retrieval or benchmarks; the registry names domain modules as strings."""
import ast
import re
from pathlib import Path

KERNEL = Path(__file__).resolve().parents[1] / "verifirst"
DOMAINS = ("programs", "verifiers", "optimizers", "retrieval", "benchmarks")
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


def test_only_the_registry_tables_name_domain_modules():
    """Outside cli.py, a domain module's dotted name appears only in registry.py (as a string)."""
    named = re.compile(r"verifirst\.(" + "|".join(DOMAINS) + r")\.\w+")
    offenders = []
    for p in _kernel_files():
        if p.name == "registry.py":
            continue
        for n, line in enumerate(p.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if named.search(code) and not code.strip().startswith(('"', "'")):  # prose in docstrings is fine
                offenders.append(f"{p.name}:{n}: {line.strip()}")
    assert offenders == [], "domain modules named outside the registry:\n" + "\n".join(offenders)


def test_registry_targets_all_load():
    """Every built-in name resolves to its factory (a moved module breaks here, not in a user's run)."""
    from verifirst.core import registry

    for kind, table in registry.tables().items():
        for name, entry in table.items():
            if entry.origin == "verifirst":
                assert entry.load() is not None, (kind, name)


def test_report_stage_tables_follow_the_verifiers_declared_funnel():
    """The kernel's report knows no verifier's stages: the report carries the funnel."""
    from verifirst.report import stage_rows

    body = {"before": {"stages": {"A_FAIL": 1, "Z_FAIL": 2, "PASS": 1}}}
    rep = {"splits": {"test": body}, "stage_order": ["Z_FAIL", "M_FAIL", "A_FAIL", "PASS"]}
    stages, rows = stage_rows(rep)
    assert stages == ["Z_FAIL", "M_FAIL", "A_FAIL", "PASS"] and rows == [["test", "before", "2", "0", "1", "1"]]
    assert stage_rows({"splits": {"test": body}})[0] == ["A_FAIL", "Z_FAIL", "PASS"]  # no funnel: sorted
