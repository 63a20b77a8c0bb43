"""Factories an experiment file can name that need more than options: the IaC strategies
(retrieval stores, MCP tools, the verifier for repair)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence


def iac_program(strategy: str = "cot", k: int = 4, show_policy: bool = False, max_iters: int = 6,
                schema: str | None = None, verifier: Any = None, items: Sequence | None = None,
                workdir: str | Path | None = None):
    """S3's strategies: cot | react-rag | react-mcp | repair | repair-rag."""
    from verifirst.programs.iac import build_strategy

    schema = schema or getattr(verifier, "schema", None)
    if schema is None:
        from verifirst.verifiers.terraform import default_schema

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
