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
