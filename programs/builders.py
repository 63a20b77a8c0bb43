"""Factories an experiment file can name that need more than options: the IaC strategies
(retrieval stores, MCP tools, the verifier for repair)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence


def iac_program(strategy: str = "cot", k: int = 4, show_policy: bool = False, max_iters: int = 6,
                schema: str | None = None, verifier: Any = None, items: Sequence | None = None,
                workdir: str | Path | None = None):
    """An NL->Terraform program for one of S3's strategies, with what the strategy needs built.

    Args:
        strategy: cot | react-rag | react-mcp | repair | repair-rag.
        k: retrieved schema chunks per query (the RAG strategies).
        show_policy: show the task's OPA policy to the program.
        max_iters: tool/repair iterations (react and repair strategies).
        schema: provider schema path (default: the verifier's, else the bundled one).
        verifier: the experiment's verifier (repair strategies call it).
        items: the suite's items (few-shot or retrieval context for some strategies).
        workdir: where the retrieval store is kept.
    """
    from verifirst.programs.iac import build_strategy

    schema = schema or getattr(verifier, "schema", None)
    if schema is None:
        from verifirst.verifiers.terraform.verifier import default_schema

        schema = default_schema()
    store = toolbox = None
    if strategy in ("react-rag", "repair-rag", "react-mcp"):
        from verifirst.retrieval.store import open_store

        store = open_store(Path(workdir or ".verifirst") / "chroma" / Path(str(schema)).name.split(".")[0], schema)
    if strategy == "react-mcp":
        from verifirst.retrieval.mcp_server import MCPToolbox, make_server

        toolbox = MCPToolbox(make_server(schema, store))
    return build_strategy(strategy, verifier=verifier, schema=schema, store=store, toolbox=toolbox,
                          items=items, k=k, show_policy=show_policy, max_iters=max_iters)


def judge_program(kind: str = "passfail", items: Sequence | None = None, view: str | None = None,
                  prompt: str | None = None, prompt_file: str | None = None, threshold: float | None = None):
    """A PASS/FAIL or rubric judge over the suite's record fields, as `verifirst calibrate` builds
    it; its `verdict` is what the label verifier checks.

    Args:
        kind: passfail | rubric.
        items: the suite's items (their input fields are what the judge may read).
        view: the fields the judge reads, "title,diff" (default: every input field), or
            FIELD=VARIABLE pairs for a prompt with {{ variables }}.
        prompt: the starting prompt's text (default: the kind's default prompt).
        prompt_file: a file holding the starting prompt (instead of `prompt`).
        threshold: the rubric's PASS threshold (rubric only).
    """
    from verifirst.core.errors import ConfigError
    from verifirst.judge.programs import make_judge

    if kind not in ("passfail", "rubric"):
        raise ConfigError(f"unknown judge kind {kind!r}", field="program.options.kind", expected="passfail | rubric")
    if prompt and prompt_file:
        raise ConfigError("both prompt and prompt_file given", field="program.options",
                          expected="one of prompt, prompt_file")
    if prompt_file:
        from verifirst.core.textfile import read_text

        prompt = read_text(prompt_file, "prompt file").strip()
    if not items:
        raise ConfigError("a judge needs the suite's records to know their fields", field="program.name",
                          expected="a suite of outcome records (e.g. suite.name = \"outcomes\")")
    fields = sorted(items[0].inputs)
    kw = {} if threshold is None or kind != "rubric" else {"threshold": threshold}
    judge = make_judge(kind, fields, prompt, view=view, **kw) if view else make_judge(kind, fields, prompt, **kw)
    judge.output_field = "verdict"
    return judge


def passfail_judge(items: Sequence | None = None, view: str | None = None, prompt: str | None = None,
                   prompt_file: str | None = None):
    """`passfail-judge` in an experiment file: see judge_program (kind passfail)."""
    return judge_program("passfail", items, view, prompt, prompt_file)


def rubric_judge(items: Sequence | None = None, view: str | None = None, prompt: str | None = None,
                 prompt_file: str | None = None, threshold: float | None = None):
    """`rubric-judge` in an experiment file: see judge_program (kind rubric)."""
    return judge_program("rubric", items, view, prompt, prompt_file, threshold)
