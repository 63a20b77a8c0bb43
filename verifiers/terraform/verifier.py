"""TerraformVerifier: validate -> plan -> policy (-> checkov), one Verdict, three backends behind one interface.

Gates (option `gates`): validate and plan always run; "opa" applies the item's and the
organisation's Rego (default on); "checkov" adds the scanner gate (verifiers/terraform/checkov.py,
stage SCANNER_FAIL) after the policy (default off).

- "terraform": real terraform + the schema-serving provider (verifiers/terraform/tf_provider.py), no init;
- "python":    python-hcl2 checks + a synthesized plan (verifiers/terraform/hcl_check.py, plan_synth.py);
- "real":      real terraform + real providers from a plugin cache or mirror, `init -backend=false`;
- "auto":      "terraform" when a terraform binary is found, else "python".
Every verdict names its backend; details["backend_label"] says which binary and schema.
"""
from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from verifirst.core.errors import InputError
from verifirst.core.task import Item
from verifirst.verifiers.terraform import iac_taxonomy as T
from verifirst.verifiers.base import Verdict, VerifierError
from verifirst.verifiers.terraform.confine import check_references
from verifirst.verifiers.terraform.confine_eval import check_evaluated_paths
from verifirst.verifiers.terraform.schema_hints import schema_hints  # noqa: F401 (public here too)
from verifirst.verifiers.terraform.opa import MODES
from verifirst.verifiers.terraform.options import (DEFAULT_GATES, GATES, _check_bool, _check_choice, _check_ids,  # noqa: F401
                                                   _check_path_option, _check_policy_option, _check_timeout, _gates,
                                                   _is_policy_path)
from verifirst.verifiers.terraform.terraform_cli import (Diagnostic, RealTerraform, SchemaTerraform,
                                                         check_terraform_runs, feedback_text, find_real_provider,
                                                         find_terraform, mirror_candidates, read_config)
from verifirst.verifiers.terraform.workdir import config_dir

BACKENDS = ("auto", "terraform", "python", "real")
SCHEMA_FIX = ("Fix: write one with `verifirst schema pull --out FILE`, point verifier.options.schema at an "
              "existing file, or leave schema out to use the shipped schemas (`verifirst schema list`).")
# A 21-type subset of the AWS schema: the built-in pack's plans were made with it.
BUILTIN_SCHEMA = Path(__file__).resolve().parent / "data" / "iac_builtin_schema.json"
_FENCE_RE = re.compile(r"```[ \t]*(?:hcl|terraform|tf|HCL|Terraform)?[ \t]*\n(.*?)```", re.S)

_RUNNERS: dict[tuple, Any] = {}
_RUNNERS_LOCK = threading.Lock()


def extract_config(candidate: Any) -> Any:
    """The HCL inside a model answer: the first fenced block if there is one, else the text."""
    if isinstance(candidate, str):
        m = _FENCE_RE.search(candidate)
        if m:
            return m.group(1)
        return candidate
    return candidate


def default_schema() -> str:
    """The newest shipped AWS provider schema (VERIFIRST_TF_SCHEMA overrides it)."""
    from verifirst.verifiers.terraform.tf_schema import SHIPPED_DIR, default_schema_path

    path = default_schema_path()
    if path:
        return path
    raise InputError("no schema given and no shipped schema found", field="schema",
                     expected=f"a `terraform providers schema -json` file, or the files under {SHIPPED_DIR}")


def _runner(backend: str, schema: str | None, binary: str | None, mirror: str | None,
            reattach: bool = True):
    """One runner per (backend, schema, binary): the provider process and CLI config are shared."""
    key = (backend, schema, binary, mirror, reattach)
    with _RUNNERS_LOCK:
        r = _RUNNERS.get(key)
        if r is None or (getattr(r, "provider", None) is not None and not r.provider.alive()):
            if backend == "terraform":
                r = SchemaTerraform(schema, binary=binary, reattach=reattach)
            else:
                r = RealTerraform(mirror=mirror, binary=binary)
            if not _RUNNERS:
                import atexit
                atexit.register(close_runners)
            _RUNNERS[key] = r
        return r


def close_runners() -> None:
    """Remove the runners' temporary homes (CLI config, launchers)."""
    with _RUNNERS_LOCK:
        for r in _RUNNERS.values():
            r.close()
        _RUNNERS.clear()


class TerraformVerifier:
    """`verify(item, candidate_hcl)`; the policy comes from item.gold["rego_policy"] or `policy`.
    A candidate carrying its first draft (`.draft`, a repair loop's RepairedConfig) that passes
    is also checked for a deceptive repair (option check_deception)."""

    name = "terraform"
    stages = T.STAGES  # funnel order, recorded in reports so their stage tables follow it

    def __init__(self, backend: str = "auto", schema: str | os.PathLike | None = None,
                 policy: str | os.PathLike | None = None, policy_mode: str = "auto",
                 binary: str | None = None, mirror: str | None = None, validate_first: bool = False,
                 reattach: bool = True, policy_dir: str | os.PathLike | None = None,
                 gates: Sequence[str] | None = None, checkov: str | None = None,
                 checkov_checks: Sequence[str] | None = None, checkov_skip_checks: Sequence[str] | None = None,
                 checkov_timeout_s: float = 120.0, check_deception: bool = True):
        """Args (besides the backend's): gates: which gates run, from GATES (default validate, plan,
        opa; "checkov" adds the scanner after the policy); checkov: the checkov executable
        (default: VERIFIRST_CHECKOV, PATH, then .tools/checkov); checkov_checks /
        checkov_skip_checks: check ids to run only / to leave out; checkov_timeout_s: per scan;
        check_deception: a passing candidate that carries its first draft (a repair loop's
        RepairedConfig) is compared with the draft and the item's reference, DECEPTIVE_FIX when
        the repair dropped what the task needs.

        Raises:
            InputError: an option of the wrong type or out of range, naming the option."""
        _check_choice(backend, BACKENDS, "backend")
        _check_choice(policy_mode, MODES, "policy_mode")
        for name, flag in (("validate_first", validate_first), ("reattach", reattach),
                           ("check_deception", check_deception)):
            _check_bool(flag, name)
        for name, value in (("schema", schema), ("policy_dir", policy_dir), ("binary", binary),
                            ("mirror", mirror), ("checkov", checkov)):
            _check_path_option(value, name)
        _check_policy_option(policy)
        _check_timeout(checkov_timeout_s, "checkov_timeout_s")
        self.gates = _gates(gates)
        self.check_deception = check_deception
        self._reference_summaries: dict[tuple, Any] = {}  # (item id, reference) -> its summary
        # A run without the scanner declares the funnel without its stage, so its tables stay as they were.
        self.stages = T.STAGES if "checkov" in self.gates else tuple(s for s in T.STAGES if s != T.SCANNER_FAIL)
        self.checkov_option = str(checkov) if checkov else None
        self.checkov_checks = _check_ids(checkov_checks, "checkov_checks")
        self.checkov_skip_checks = _check_ids(checkov_skip_checks, "checkov_skip_checks")
        self.checkov_timeout_s = float(checkov_timeout_s)
        # Without a schema option each configuration gets the shipped version its
        # required_providers asks for; self.schema is the newest (preflight, hints, programs).
        self.schema_given = bool(schema)
        self.schema = str(schema) if schema else (None if backend == "real" else default_schema())
        if self.schema and not Path(self.schema).is_file():
            raise InputError(f"schema file not found. {SCHEMA_FIX}", path=self.schema, field="schema",
                             expected="a `terraform providers schema -json` file (.json or .json.gz)")
        if backend == "auto":
            backend = "terraform" if find_terraform(binary) else "python"
        self.backend = backend
        self.binary, self.mirror = binary, mirror
        self.policy_mode = policy_mode
        self.validate_first = validate_first
        self.reattach = reattach  # False: terraform starts the provider per use (slow, for comparison)
        self._policies: dict[tuple, Any] = {}
        self.policy = self._load_policy(policy, strict=True) if policy else None
        self.policy_set = None
        if policy_dir:  # an organisation's Rego modules, applied to every item; compiled now
            from verifirst.verifiers.terraform.policy_set import PolicySet
            self.policy_set = PolicySet(policy_dir)

    # ------------------------------------------------------------------ policy
    def _load_policy(self, policy, name: str = "policy.rego", mode: str | None = None, strict: bool = False):
        """A compiled policy; strict: a user's own (`policy` option, --policy), which must have
        conftest or `default` rules (IaC-Eval's reading only for items' intents)."""
        from verifirst.verifiers.terraform.opa import Policy
        if isinstance(policy, Policy):
            return policy
        if _is_policy_path(policy):
            return Policy.from_file(policy, mode=mode or self.policy_mode, strict=strict)
        key = (str(policy), mode, strict)
        if key not in self._policies:  # compiled once per distinct policy text
            self._policies[key] = Policy(str(policy), path=name, mode=mode or self.policy_mode, strict=strict)
        return self._policies[key]

    # ------------------------------------------------------------------ preflight
    def preflight(self, items=None) -> None:
        """Before any LM call: the backend's binary runs, the schema loads, every policy compiles.

        Args:
            items: the suite's items; each item's gold `rego_policy` is compiled (and kept for
                verify), so a policy that does not compile stops the run before it starts.

        Raises:
            VerifirstError: the first thing that cannot run, naming the cause and the fix.
        """
        if self.backend in ("terraform", "real"):
            check_terraform_runs(find_terraform(self.binary), self.backend)
        if self.backend == "real" and not (self.mirror or find_real_provider()):
            from verifirst.loop.preflight import VerifierUnavailable
            raise VerifierUnavailable(
                "backend 'real' needs the hashicorp/aws provider in a plugin cache or filesystem mirror; none "
                f"found (looked in: {', '.join(mirror_candidates()) or 'no plugin directories exist'}). Fix: set "
                "TF_PLUGIN_CACHE_DIR or VERIFIRST_TF_MIRROR, pass verifier.options.mirror, or use backend = "
                "\"terraform\" (schema provider, offline).")
        if self.schema:
            if not Path(self.schema).is_file():
                raise InputError(f"schema file not found. {SCHEMA_FIX}", path=self.schema, field="schema",
                                 expected="a `terraform providers schema -json` file (.json or .json.gz)")
            from verifirst.verifiers.terraform.tf_schema import load_schema
            load_schema(self.schema)  # InputError naming the file (and line) when it does not load
        for it in items or ():
            self._item_policies(it)  # compiled and kept; bad Rego raises naming the file and line
        if "checkov" in self.gates:
            from verifirst.verifiers.terraform.checkov import CheckovError
            try:
                self._scanner().start()  # imports checkov once: seconds, paid here, not by the first item
            except CheckovError as e:
                from verifirst.verifiers.terraform.checkov import CHECKOV_FIX
                from verifirst.loop.preflight import VerifierUnavailable
                raise VerifierUnavailable(f"the checkov gate cannot run: {e}. {CHECKOV_FIX}") from None

    def _scanner(self):
        """The shared checkov scanner; VerifierUnavailable (exit 2) when checkov is not installed."""
        from verifirst.verifiers.terraform.checkov import CHECKOV_FIX, checkov_candidates, find_checkov, scanner_for
        binary = find_checkov(self.checkov_option)
        if binary is None:
            from verifirst.loop.preflight import VerifierUnavailable
            looked = self.checkov_option or ", ".join(["VERIFIRST_CHECKOV", "PATH", *checkov_candidates()[-2:]])
            raise VerifierUnavailable(f"gate 'checkov' asked for, but no checkov executable found (looked: "
                                      f"{looked}). {CHECKOV_FIX}")
        return scanner_for(binary, self.checkov_timeout_s)

    # ------------------------------------------------------------------ entry points
    def _item_policies(self, item) -> list:
        """An item's compiled policies: gold `rego_policies` ([{path, text}], a user's task folder)
        or gold `rego_policy` (one text)."""
        gold = getattr(item, "gold", None) or {}
        mode = gold.get("policy_mode")
        if gold.get("rego_policies"):
            return [self._load_policy(p["text"], p.get("path") or f"{item.id}.rego", mode)
                    for p in gold["rego_policies"]]
        if gold.get("rego_policy"):
            return [self._load_policy(gold["rego_policy"], f"{item.id}.rego", mode)]
        return []

    def verify(self, item: Item, candidate: Any) -> Verdict:
        gold = item.gold or {}
        pols = self._item_policies(item)
        config = extract_config(candidate)
        if config is None:  # nothing produced: an empty configuration, a VALIDATE_FAIL
            config = ""
        v = self.verify_config(config, policy=pols or self.policy, extra_files=gold.get("files"))
        v.details["item_id"] = item.id
        draft = getattr(candidate, "draft", None)
        if v.passed and draft is not None and self.check_deception:
            v = self._judge_repair(item, config, v, draft)
        return v

    def _judge_repair(self, item: Item, config: str, verdict: Verdict, draft: str) -> Verdict:
        """A passing repair judged against its first draft (verified here) and the item's reference."""
        from verifirst.verifiers.terraform.repaired import judge_repair

        t0 = time.perf_counter()
        out = judge_repair(self, item, config, verdict, draft, self.verify(item, str(draft)),
                           self._reference_summaries)
        out.timings["deception_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        return out

    def verify_config(self, config: Any, policy=None, extra_files: dict | None = None) -> Verdict:
        """One configuration through validate -> plan -> policies.

        Args:
            config: HCL text, a .tf file, a directory or {name: text}.
            policy: a Policy, Rego text or .rego path, or a list of them (default: the verifier's).
            extra_files: files the task supplies next to the candidate (variables.tfvars,
                fixtures read by file()); a candidate's own file of the same name wins.
        """
        t0 = time.perf_counter()
        if isinstance(policy, (list, tuple)):
            pols = [self._load_policy(p) for p in policy]
        else:
            pols = [self._load_policy(policy)] if policy is not None else ([self.policy] if self.policy else [])
        files = read_config(config)
        if extra_files and any(t.strip() for t in files.values()):
            files = {**extra_files, **files}
        # terraform would read a file or module named outside the configuration from the host
        check_references({n: t for n, t in files.items() if n.endswith((".tf", ".tf.json", ".tfvars"))})
        if not any(_has_code(t) for n, t in files.items() if not n.endswith(".tfvars")):  # comments only too
            err = VerifierError(T.SYNTAX, "empty configuration: no Terraform code found", None)
            return self._verdict(T.VALIDATE_FAIL, [err], [], {}, t0, {})
        base_dir = config_dir(config)  # its local modules: staged for terraform, expanded by python
        schema = self.schema_for(files, base_dir)
        if not (self.schema_given or self.backend == "real" or os.environ.get("VERIFIRST_TF_SCHEMA")):
            from verifirst.verifiers.terraform.tf_schema import unmet_constraints
            unmet = unmet_constraints(files)
            if unmet:  # checked against another version's schema would be no observation
                return self._verdict(T.INCONCLUSIVE, [VerifierError(T.NOT_CHECKED, u, None) for u in unmet], [],
                                     {}, t0, {"schema": schema})
        check_evaluated_paths(files, schema, tfvars_values(files))  # a path only an evaluation learns
        if self.backend == "python":
            stage, errors, warnings, plan, timings, details = self._python(files, schema, base_dir)
        else:
            stage, errors = _precheck(files, base_dir)  # a count bomb never reaches terraform
            if errors:
                return self._verdict(stage, errors, [], {}, t0, {"backend_label": "verifier ceilings (limits.py)"})
            stage, errors, warnings, plan, timings, details = self._terraform(files, schema, base_dir)
        if schema:
            details["schema"] = schema
        if stage == T.PASS and "opa" in self.gates and (pols or self.policy_set is not None):
            policy_errors = []
            for pol in pols:
                res = pol.evaluate(plan or {})
                timings.update(res.timings)
                warnings = list(warnings) + res.warnings
                details["policy"] = {"engine": res.engine, "mode": res.mode, "decided": res.decided,
                                     "false_rules": res.false_rules, "package": pol.package}
                policy_errors += res.errors
                if not res.decided:
                    details["undecided"] = T.POLICY_ENGINE_GAP
            if self.policy_set is not None:
                org = self.policy_set.evaluate(plan or {})
                timings.update(org.timings)
                warnings = list(warnings) + org.warnings
                details["org_policy"] = {"directory": str(self.policy_set.directory),
                                         "failed_rules": org.failed_rules}
                policy_errors += org.errors
                if any(e.cls == T.POLICY_ENGINE_GAP for e in org.errors):
                    details["undecided"] = T.POLICY_ENGINE_GAP
            if policy_errors:
                stage, errors = T.OPA_FAIL, policy_errors
        if stage == T.PASS and "checkov" in self.gates:
            stage, errors = self._scan({**files, **_module_files(files, base_dir)}, details, timings, errors)
        details["plan"] = plan
        return self._verdict(stage, errors, warnings, timings, t0, details)

    def _scan(self, files: dict, details: dict, timings: dict, errors: list):
        """The scanner gate: SCANNER_FAIL with one error per failed check and resource.
        A checkov crash or timeout raises CheckovError: a verifier error, not a verdict."""
        res = self._scanner().scan(files, self.checkov_checks, self.checkov_skip_checks)
        timings["checkov_ms"] = res.ms
        details["checkov"] = {"failed": [vars(f) for f in res.failed], "passed": res.passed,
                              "checks": self.checkov_checks, "skip_checks": self.checkov_skip_checks}
        if not res.failed:
            return T.PASS, errors
        return T.SCANNER_FAIL, [VerifierError(T.SCANNER, f.message(), f.resource or None) for f in res.failed]

    def schema_for(self, files: dict, base_dir: str | None = None) -> str | None:
        """The schema file a configuration is checked against: the one given, else the newest
        shipped one its `required_providers` aws version constraint allows.

        Args:
            files: {file name: HCL text} of the configuration.
            base_dir: its directory: the providers of the modules it calls there count too.
        """
        if self.schema_given or self.backend == "real" or os.environ.get("VERIFIRST_TF_SCHEMA"):
            return self.schema
        from verifirst.verifiers.terraform.tf_schema import schemas_for_config

        paths = schemas_for_config({**files, **_module_files(files, base_dir)})  # one per shipped provider it uses (aws, google, azurerm, kubernetes)
        if len(paths) > 1 and self.backend != "python":  # the schema provider serves each provider of one file
            from verifirst.verifiers.terraform.tf_schema import merged_file
            return merged_file(paths)
        return (paths[0] if len(paths) == 1 else tuple(paths)) if paths else self.schema

    # ------------------------------------------------------------------ backends
    def _terraform(self, files, schema, base_dir=None):
        runner = _runner(self.backend, schema, self.binary, self.mirror, self.reattach)
        kw = {"base_dir": base_dir} if base_dir and isinstance(runner, SchemaTerraform) else {}
        res = runner.check(files, validate_first=self.validate_first, **kw)
        details = {"backend_label": runner.label,
                   "missing_files": [d.detail for d in res.errors if d.missing_file],
                   "deprecations": [_warn(d) for d in res.warnings if "deprecat" in d.summary.lower()]}
        errors = [d.as_error() for d in res.errors]
        warnings = [_warn(d) for d in res.warnings]
        stage = res.stage
        if errors and all(e.cls == T.NOT_CHECKED for e in errors):  # terraform checked nothing
            stage = T.INCONCLUSIVE
        return stage, errors, warnings, res.plan, dict(res.timings), details

    def _python(self, files, schema_path, base_dir=None):
        try:
            from verifirst.verifiers.terraform import hcl_check, plan_synth
            from verifirst.verifiers.terraform.tf_schema import load_schema
        except ImportError as exc:
            raise RuntimeError(f"python backend unavailable: {exc}") from None
        schema = load_schema(schema_path)
        t0 = time.perf_counter()
        variables = tfvars_values(files)
        analysis = hcl_check.analyze(files, schema, variables, base_dir)  # parsed once, for the check and the plan
        stage, errors, warnings = hcl_check.check_analysis(analysis)
        timings = {"check_ms": round((time.perf_counter() - t0) * 1000, 2)}
        plan = None
        if stage == T.PASS:
            t0 = time.perf_counter()
            plan = plan_synth.synthesize_plan(files, schema, variables, analysis=analysis)
            timings["synth_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        warns = [w if isinstance(w, str) else getattr(w, "message", str(w)) for w in (warnings or [])]
        from verifirst.verifiers.terraform.tf_schema import schema_label
        details = {"backend_label": f"python-hcl2 + schema ({schema_label(schema_path)})",
                   "deprecations": [w for w in warns if "deprecat" in w.lower()]}
        return stage, list(errors), warns, plan, timings, details

    def _verdict(self, stage, errors, warnings, timings, t0, details) -> Verdict:
        timings = dict(timings)
        timings["total_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        details = dict(details)
        details["warnings"] = warnings
        passed = stage == T.PASS
        feedback = feedback_text(stage, self.backend, errors, warnings)
        hints = schema_hints(errors, details.get("schema", self.schema)) if stage == T.VALIDATE_FAIL else []
        if hints:
            details["hints"] = hints
            feedback += "\nSchema hints:\n" + "\n".join(f"- {h}" for h in hints)
        if stage == T.INCONCLUSIVE:
            return Verdict.undecided("; ".join(e.message for e in errors), feedback=feedback, errors=errors,
                                     backend=self.backend, details=details, timings=timings)
        return Verdict(score=1.0 if passed else 0.0, passed=passed, stage=stage, errors=errors,
                       feedback=feedback,
                       backend=self.backend, details=details, timings=timings)


def _module_files(files: dict, base_dir: str | None) -> dict:
    """The files of the local and vendored modules a configuration calls ({} without python-hcl2)."""
    try:
        from verifirst.verifiers.terraform._hcl_modules import module_files
    except ImportError:
        return {}
    return module_files(files, base_dir)


def _has_code(text: str) -> bool:
    """Whether configuration text holds anything but white space and comments."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace() or c == "\ufeff":
            i += 1
        elif c == "#" or text.startswith("//", i):
            i = n if text.find("\n", i) < 0 else text.find("\n", i) + 1
        elif text.startswith("/*", i):
            i = n if text.find("*/", i + 2) < 0 else text.find("*/", i + 2) + 2
        else:
            return True
    return False


def _precheck(files: dict, base_dir: str | None = None) -> tuple[str, list]:
    """The python evaluator's ceiling check (limits.py) before terraform runs; (PASS, []) without
    python-hcl2 (terraform's own memory, CPU and wall ceilings still hold)."""
    try:
        from verifirst.verifiers.terraform.hcl_check import ceiling_errors
    except ImportError:
        return T.PASS, []
    return ceiling_errors(files, tfvars_values(files), base_dir)


def tfvars_values(files: dict) -> dict:
    """Variable values from the files terraform loads by itself (terraform.tfvars, *.auto.tfvars):
    constant expressions only, which is what a tfvars file may hold."""
    from verifirst.verifiers.terraform._hcl_ast import HclSyntaxError, parse_body
    from verifirst.verifiers.terraform._hcl_eval import EvalError, Scope, evaluate

    def no_refs(name, node=None):
        raise EvalError("Variables not allowed", "a tfvars file holds constants only")

    values = {}
    for name in sorted(files):
        if name == "terraform.tfvars" or name.endswith(".auto.tfvars"):
            try:
                body = parse_body(files[name], name)
            except HclSyntaxError:
                continue  # the terraform backend reports it; the python one sees no values
            for attr in body.attributes.values():
                try:
                    values[attr.name] = evaluate(attr.expr, Scope(no_refs))
                except EvalError:
                    pass
    return values


def _warn(d: Diagnostic) -> str:
    at = f"{d.address}: " if d.address else ""
    return f"{at}{d.summary}" + (f": {d.detail}" if d.detail else "")


_DEFAULT_VERIFIERS: dict[tuple, TerraformVerifier] = {}


def verify_config(hcl_text_or_dir: Any, policy=None, backend: str = "auto",
                  schema: str | os.PathLike | None = None, gates: Sequence[str] | None = None) -> Verdict:
    """One config (HCL text, a .tf file, a directory or {name: text}) through the gates.

    Args:
        hcl_text_or_dir: the configuration.
        policy: Rego text or a .rego path.
        backend: see BACKENDS.
        schema: a providers schema file (default: the shipped one required_providers picks).
        gates: see GATES (default: validate, plan, opa).
    """
    key = (backend, str(schema) if schema else None, tuple(gates or ()))
    v = _DEFAULT_VERIFIERS.get(key)
    if v is None:
        v = TerraformVerifier(backend=backend, schema=schema, gates=gates)
        if "checkov" in v.gates:
            v.preflight()  # a missing checkov is an input error (exit 2) before anything runs
        _DEFAULT_VERIFIERS[key] = v
    return v.verify_config(hcl_text_or_dir, policy=policy)


def verdict_json(v: Verdict) -> dict:
    return {"stage": v.stage, "backend": v.backend, "passed": v.passed,
            "errors": [e.as_dict() for e in v.errors], "feedback": v.feedback,
            "warnings": v.details.get("warnings", []), "timings": v.timings}


def cli_verify_terraform(path: str, policy: str | None = None, backend: str = "auto",
                         schema: str | None = None, as_json: bool = False,
                         gates: Sequence[str] | None = None) -> int:
    """`verifirst verify terraform PATH [--policy F.rego] [--backend B] [--schema F] [--gates G] [--json]`.
    Exit 0 on PASS, 1 on a failing gate, 3 INCONCLUSIVE (a provider with no schema, a module not
    read: no verdict); bad input raises InputError (exit 2 in the CLI)."""
    if not os.path.exists(path):
        raise InputError("config path not found", path=path, expected="a .tf file or a directory of .tf files")
    from verifirst.core.textfile import read_text

    for f in ([Path(path)] if os.path.isfile(path) else sorted(Path(path).glob("*.tf"))):
        if not f.is_symlink():  # a link is the confinement check's to judge, unread
            read_text(f, "Terraform file")  # binary or not UTF-8: exit 2 naming the file
    if gates is not None:
        gates = [g.strip() for g in gates if g.strip()]
    if policy:  # a user's own policy: conftest or default rules, never IaC-Eval's reading by surprise
        from verifirst.verifiers.terraform.opa import Policy
        policy = Policy.from_file(policy, strict=True)
    try:
        v = verify_config(path, policy=policy, backend=backend, schema=schema, gates=gates)
    except FileNotFoundError as exc:  # no terraform binary / no real provider for this backend
        raise InputError(str(exc), field="--backend",
                         expected="auto, or python when terraform or real providers are missing") from None
    if as_json:
        print(json.dumps(verdict_json(v), indent=2))
    else:
        print(v.feedback)
        label = v.details.get("backend_label", v.backend)
        print(f"[{label}] " + ", ".join(f"{k}={val}" for k, val in v.timings.items()))
    syntax = [e for e in v.errors if e.cls == "SYNTAX"]
    if syntax:  # terraform reports more beside a syntax error than the Python backend: exit 2 on both
        # For a generated candidate this is a verdict (above); for the file a user hands us it is
        # also bad input: say where, exit 2.
        raise InputError(f"does not parse as HCL: {syntax[0].message}", path=path,
                         expected="Terraform configuration syntax (HCL)")
    return 0 if v.passed else 3 if v.passed is None else 1
