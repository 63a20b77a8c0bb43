"""NL -> Terraform generators: S3's strategies as DSPy modules.

- IaCGenerator: single pass (CoT or plain Predict), prompt -> config.
- IaCReActGenerator: ReAct with active retrieval; tools from an MCP server (MCPToolbox) or a
  ChromaDB doc store (make_rag_tools).
- RepairLoop: any generator, then up to k verifier-checked attempts with the verifier's feedback;
  every attempt's stage is recorded.
- Policy injection (show_policy=True): the Rego policy text is part of the model's input, the
  diagnostic of S3's RQ4 (information gap vs capability gap).
Every module returns dspy.Prediction(config=<extracted HCL>, raw=<model text>, ...).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import dspy

from verifirst.programs._iac_extract import extract_hcl
from verifirst.core.task import Item
from verifirst.verifiers.terraform.repaired import RepairedConfig, judge_repair

BASE_INSTRUCTIONS = (
    "Write a complete Terraform configuration (HCL) for the infrastructure the request "
    "describes. Use only resource types, arguments and nested blocks that its provider (AWS, "
    "Google Cloud, Azure, Kubernetes, ...) supports; never set read-only (computed) attributes. "
    "Output only HCL.")


class NLToTerraform(dspy.Signature):
    __doc__ = BASE_INSTRUCTIONS

    prompt: str = dspy.InputField(desc="the infrastructure request, in natural language")
    config: str = dspy.OutputField(desc="Terraform HCL configuration, no prose")


class NLToTerraformWithPolicy(dspy.Signature):
    __doc__ = BASE_INSTRUCTIONS + " The configuration must satisfy the given Rego policy, " \
                                  "which is evaluated on the `terraform show -json` plan."

    prompt: str = dspy.InputField(desc="the infrastructure request, in natural language")
    policy: str = dspy.InputField(desc="Rego policy the plan must satisfy")
    config: str = dspy.OutputField(desc="Terraform HCL configuration, no prose")


class RepairTerraform(dspy.Signature):
    """Fix the Terraform configuration so that it passes the verifier. Keep what already works,
    change what the verifier reports. Output the whole corrected configuration, only HCL."""

    prompt: str = dspy.InputField(desc="the infrastructure request")
    previous_config: str = dspy.InputField(desc="the configuration that failed")
    verifier_feedback: str = dspy.InputField(desc="failing stage and errors from terraform / OPA")
    config: str = dspy.OutputField(desc="corrected Terraform HCL configuration")


class RepairTerraformWithPolicy(RepairTerraform):
    """Fix the Terraform configuration so that it passes the verifier and satisfies the Rego
    policy. Keep what already works, change what the verifier reports. Output only HCL."""

    policy: str = dspy.InputField(desc="Rego policy the plan must satisfy")


def _policy_of(item: Item | None) -> str:
    return (item.gold.get("rego_policy") or "") if item is not None else ""


def _sig(base, instructions: str | None):
    return base if instructions is None else base.with_instructions(instructions)


class _ItemLookup:
    """Finds the item of a bare `prompt` call (evaluate() passes only the inputs)."""

    def _index(self, items: Sequence[Item] | None) -> None:
        self._by_prompt = {it.inputs.get("prompt"): it for it in (items or [])}

    def _item(self, prompt: str, item: Item | None) -> Item:
        if item is not None:
            return item
        return self._by_prompt.get(prompt) or Item(id="adhoc", inputs={"prompt": prompt})

    def _policy(self, prompt: str, policy: str | None, item: Item | None) -> str:
        return policy if policy is not None else _policy_of(self._item(prompt, item))


class IaCGenerator(_ItemLookup, dspy.Module):
    """Single pass. variant "cot" (S3's CoT baseline) or "predict"."""

    output_field = "config"

    def __init__(self, variant: str = "cot", show_policy: bool = False, instructions: str | None = None,
                 items: Sequence[Item] | None = None):
        super().__init__()
        self._index(items)
        if variant not in ("cot", "predict"):
            raise ValueError(f"variant must be 'cot' or 'predict', got {variant!r}")
        self.variant, self.show_policy = variant, show_policy
        sig = _sig(NLToTerraformWithPolicy if show_policy else NLToTerraform, instructions)
        self.generate = dspy.ChainOfThought(sig) if variant == "cot" else dspy.Predict(sig)

    def forward(self, prompt: str, policy: str | None = None, item: Item | None = None):
        kw = {"prompt": prompt}
        if self.show_policy:
            kw["policy"] = self._policy(prompt, policy, item)
        pred = self.generate(**kw)
        raw = pred.config or ""
        return dspy.Prediction(config=extract_hcl(raw), raw=raw, reasoning=getattr(pred, "reasoning", None))


class IaCReActGenerator(_ItemLookup, dspy.Module):
    """ReAct with retrieval tools (plain callables with docstrings, e.g. MCPToolbox methods)."""

    output_field = "config"

    def __init__(self, tools: Sequence[Callable], max_iters: int = 6, show_policy: bool = False,
                 instructions: str | None = None, items: Sequence[Item] | None = None):
        super().__init__()
        self._index(items)
        if not tools:
            raise ValueError("ReAct needs at least one retrieval tool")
        self.show_policy = show_policy
        sig = _sig(NLToTerraformWithPolicy if show_policy else NLToTerraform, instructions)
        self.agent = dspy.ReAct(sig, tools=list(tools), max_iters=max_iters)

    def forward(self, prompt: str, policy: str | None = None, item: Item | None = None):
        kw = {"prompt": prompt}
        if self.show_policy:
            kw["policy"] = self._policy(prompt, policy, item)
        pred = self.agent(**kw)
        traj = getattr(pred, "trajectory", {}) or {}
        calls = [traj[k] for k in sorted(traj) if k.startswith("tool_name_") and traj[k] != "finish"]
        raw = pred.config or ""
        return dspy.Prediction(config=extract_hcl(raw), raw=raw, tool_calls=calls, trajectory=traj)


def make_rag_tools(store, schema=None) -> list[Callable]:
    """ChromaDB-backed tools (no MCP): dense search, plus exact lookup when a schema is given."""
    from verifirst.retrieval import docs as _docs
    from verifirst.retrieval.mcp_server import format_hits

    def search_docs(query: str, k: int = 3) -> str:
        """Search the AWS provider documentation for resources or blocks matching a description."""
        return format_hits([h.as_dict() for h in store.search(query, max(1, min(int(k), 10)))])

    tools: list[Callable] = [search_docs]
    if schema is not None:
        sch = _docs.load(schema)

        def lookup_resource_schema(resource_type: str) -> str:
            """Arguments (required/optional), read-only attributes and nested blocks of one
            Terraform resource type such as aws_s3_bucket."""
            return _docs.lookup_text(sch, resource_type)

        tools.append(lookup_resource_schema)
    return tools


class VerifierFailure(RuntimeError):
    """The verifier raised inside a repair loop: the item is a verifier error, never PASS or FAIL."""


class RepairLoop(_ItemLookup, dspy.Module):
    """Generate, verify, repair with the verifier's feedback; at most `k` attempts in all.

    The loop needs the item (the policy is gold): pass `item=`, or give `items=` so a call
    with only `prompt` (as evaluate() makes) finds its item. `attempts` in the prediction:
    one dict per attempt {attempt, stage, passed, error_classes, feedback, config}, plus
    `deceptive` (the findings) on a DECEPTIVE_FIX attempt.

    A repair that passes every gate is compared with the first draft and the item's reference
    (gold `reference`, verified once for its plan): one that dropped, emptied or renamed what the
    task needs (verifiers/terraform/deceptive.py) is DECEPTIVE_FIX, not PASS, and the loop goes on
    with that feedback. `check_deception=False` turns the comparison off here. The prediction's
    `config` is a RepairedConfig carrying the first draft (after a repair), so the verifier that
    scores the run compares them itself (verifiers/terraform/repaired.py).
    """

    output_field = "config"

    def __init__(self, generator: dspy.Module, verifier: Any, k: int = 4, show_policy: bool = False,
                 items: Sequence[Item] | None = None, instructions: str | None = None,
                 check_deception: bool = True):
        super().__init__()
        if k < 1:
            raise ValueError(f"repair budget k must be >= 1, got {k}")
        self.generator, self.verifier, self.k = generator, verifier, k
        self.show_policy = show_policy
        self.check_deception = check_deception
        sig = _sig(RepairTerraformWithPolicy if show_policy else RepairTerraform, instructions)
        self.repair = dspy.Predict(sig)
        self._index(items)
        self._references: dict[tuple, Any] = {}  # (item id, reference) -> its summary

    def forward(self, prompt: str, item: Item | None = None):
        item = self._item(prompt, item)
        policy = _policy_of(item)
        gen_kw = {"item": item} if getattr(self.generator, "show_policy", False) else {}
        first = self.generator(prompt=prompt, **gen_kw)
        config, raw = first.config, getattr(first, "raw", first.config)
        attempts: list[dict] = []
        draft = None
        for n in range(1, self.k + 1):
            try:
                verdict = self.verifier.verify(item, config)
            except Exception as e:  # e.g. checkov crashed: nothing observed, so no verdict for the item
                raise VerifierFailure(f"verifier {getattr(self.verifier, 'name', '?')!r} failed on attempt {n}: "
                                      f"{type(e).__name__}: {e}") from e
            if n == 1:
                draft = (config, verdict)
            elif verdict.passed and self.check_deception:
                verdict = judge_repair(self.verifier, item, config, verdict, *draft, self._references)
            attempts.append({"attempt": n, "stage": verdict.stage, "passed": verdict.passed,
                             "error_classes": list(verdict.error_classes),
                             "feedback": verdict.feedback or "", "config": config})
            if verdict.details.get("deceptive"):
                attempts[-1]["deceptive"] = verdict.details["deceptive"]
            if verdict.passed or n == self.k:
                break
            kw = {"prompt": prompt, "previous_config": config,
                  "verifier_feedback": feedback_text(verdict)}
            if self.show_policy:
                kw["policy"] = policy
            fixed = self.repair(**kw)
            raw = fixed.config or ""
            config = extract_hcl(raw) or config  # no code in the answer: keep the last config
        converged = next((a["attempt"] for a in attempts if a["passed"]), None)
        # the draft travels with the final config, so the run's verifier judges the repair itself
        final = RepairedConfig(config or "", draft[0] if len(attempts) > 1 else None)
        return dspy.Prediction(config=final, raw=raw, attempts=attempts, converged_at=converged,
                               stages=[a["stage"] for a in attempts])


def feedback_text(verdict) -> str:
    """Stage + errors + the verifier's own feedback, as the repair prompt shows them."""
    lines = [f"stage: {verdict.stage}"]
    for e in verdict.errors[:20]:
        where = f" at {e.address}" if getattr(e, "address", None) else ""
        lines.append(f"- {e.cls}{where}: {e.message}")
    if verdict.feedback:
        lines.append(verdict.feedback)
    return "\n".join(lines)


STRATEGIES = ("cot", "react-mcp", "react-rag", "repair", "repair-rag")


def build_strategy(name: str, *, verifier: Any = None, schema=None, store=None, toolbox=None,
                   items: Sequence[Item] | None = None, k: int = 4, show_policy: bool = False,
                   max_iters: int = 6) -> dspy.Module:
    """One of STRATEGIES. react-mcp needs `toolbox` (retrieval.mcp_server.MCPToolbox);
    react-rag needs `store` (retrieval.store.DocStore); repair* need `verifier`."""
    if name == "cot":
        return IaCGenerator("cot", show_policy=show_policy, items=items)
    if name == "react-mcp":
        if toolbox is None:
            raise ValueError("react-mcp needs an MCPToolbox")
        return IaCReActGenerator([toolbox.lookup_resource_schema, toolbox.search_docs],
                                 max_iters=max_iters, show_policy=show_policy, items=items)
    if name == "react-rag":
        if store is None:
            raise ValueError("react-rag needs a DocStore")
        return IaCReActGenerator(make_rag_tools(store), max_iters=max_iters, show_policy=show_policy,
                                 items=items)
    if name in ("repair", "repair-rag"):
        if verifier is None:
            raise ValueError(f"{name} needs a verifier")
        base = build_strategy("cot" if name == "repair" else "react-rag", store=store,
                              show_policy=show_policy, max_iters=max_iters)
        return RepairLoop(base, verifier, k=k, show_policy=show_policy, items=items)
    raise ValueError(f"unknown strategy {name!r}; expected one of {', '.join(STRATEGIES)}")
