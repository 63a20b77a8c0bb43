"""MCP tool server over a provider schema: `lookup_resource_schema`, `search_docs`.

In-process use goes through fastmcp's Client (the real MCP protocol, memory transport) via
`MCPToolbox`, which gives plain sync callables to a DSPy ReAct agent. Standalone:
    python -m verifirst.retrieval.mcp_server --schema FILE [--store DIR]   (stdio transport)
"""
from __future__ import annotations

import argparse
import asyncio
import re
import threading
from typing import Any

from verifirst.retrieval import docs as _docs

SERVER_NAME = "verifirst-terraform-docs"


def _lexical_search(all_docs: list, query: str, k: int) -> list[dict]:
    """Token-overlap ranking, used when no vector store is given."""
    q = set(re.findall(r"[a-z0-9]+", query.lower()))
    scored = []
    for d in all_docs:
        toks = set(re.findall(r"[a-z0-9]+", d.text.lower()))
        s = len(q & toks) / (len(q) or 1)
        if s > 0:
            scored.append((s, d))
    scored.sort(key=lambda x: (-x[0], x[1].id))
    return [{"id": d.id, "type": d.type, "score": round(s, 4), "text": d.text} for s, d in scored[:k]]


def format_hits(hits: list[dict]) -> str:
    if not hits:
        return "No matching documentation."
    return "\n\n".join(f"[{i + 1}] {h['type']} (score {h['score']:.2f})\n{h['text']}"
                       for i, h in enumerate(hits))


def _clip(text: str, max_chars: int) -> str:
    # big types (aws_instance in the full AWS schema) would fill a small model's context
    return text if len(text) <= max_chars else text[:max_chars].rstrip() + "\n... (truncated)"


def make_server(schema, store=None, max_k: int = 10, max_chars: int = 6000):
    """A FastMCP server for one schema; `store` is a retrieval.store.DocStore or None."""
    from fastmcp import FastMCP

    sch = _docs.load(schema)
    lexical_docs: list = []
    mcp = FastMCP(SERVER_NAME)

    @mcp.tool
    def lookup_resource_schema(resource_type: str) -> str:
        """Arguments (required/optional), read-only attributes and nested blocks of a Terraform
        resource type such as aws_s3_bucket; prefix `data.` for a data source."""
        return _clip(_docs.lookup_text(sch, resource_type), max_chars)

    @mcp.tool
    def search_docs(query: str, k: int = 3) -> str:
        """Search the provider documentation for resources and blocks matching a description."""
        k = max(1, min(int(k), max_k))
        if store is not None:
            hits = [h.as_dict() for h in store.search(query, k)]
        else:
            if not lexical_docs:
                lexical_docs.extend(_docs.build_docs(sch))
            hits = _lexical_search(lexical_docs, query, k)
        return _clip(format_hits(hits), max_chars)

    return mcp


class MCPToolbox:
    """Sync access to an MCP server's tools through fastmcp's Client on a private event loop.

    `target` is a FastMCP server (in-process) or anything fastmcp.Client accepts (a script path,
    a URL, an MCP config dict). Every call is a real MCP `tools/call`; `calls` logs them.
    """

    def __init__(self, target: Any, timeout_s: float = 30.0):
        from fastmcp import Client

        self.timeout_s = timeout_s
        self.calls: list[dict] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._client = Client(target)
        self._run(self._client.__aenter__())
        self.tool_names = [t.name for t in self._run(self._client.list_tools())]

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(self.timeout_s)

    def call(self, name: str, **arguments) -> str:
        res = self._run(self._client.call_tool(name, arguments, raise_on_error=False))
        text = "\n".join(getattr(c, "text", "") for c in (res.content or []))
        if res.is_error:
            text = f"tool error: {text}"
        self.calls.append({"tool": name, "arguments": arguments, "is_error": bool(res.is_error)})
        return text

    def lookup_resource_schema(self, resource_type: str) -> str:
        """Arguments, required/optional flags and nested blocks of one Terraform resource type."""
        return self.call("lookup_resource_schema", resource_type=resource_type)

    def search_docs(self, query: str, k: int = 3) -> str:
        """Search provider documentation for resources or blocks matching a description."""
        return self.call("search_docs", query=query, k=k)

    def close(self) -> None:
        if self._loop.is_running():
            try:
                self._run(self._client.__aexit__(None, None, None))
            except Exception:
                pass
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="MCP server for Terraform provider schema docs")
    ap.add_argument("--schema", required=True, help="`terraform providers schema -json` file")
    ap.add_argument("--store", help="ChromaDB directory for search_docs (built on first use)")
    args = ap.parse_args(argv)
    store = None
    if args.store:
        from verifirst.retrieval.store import open_store

        store = open_store(args.store, args.schema)
    make_server(args.schema, store).run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
