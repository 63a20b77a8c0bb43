"""What terraform's validate walk reports: a node whose dependencies failed is not validated.

terraform validates a configuration by walking its dependency graph; a resource (or local,
output, module call) downstream of one that failed is skipped, so its own errors are not
reported until the upstream ones are fixed. The python backend finds every error first and
then keeps only those terraform would show (found by the provider agreement study: an
unsupported argument in a DNS zone hid a bad reference in the record set that uses it).
"""
from __future__ import annotations


def reported_by_walk(findings: list, graph: dict, stage: str, node_of=lambda a: a) -> list:
    """The findings terraform's walk reports: those of `stage` on a graph node with a failed
    node upstream (transitively) are dropped; everything else is kept as it was.

    Args:
        findings: objects with .stage and .address, in report order.
        graph: node -> the nodes it references (hcl_check.dependency_graph).
        stage: the stage the walk decides (validate).
        node_of: a finding's address -> its graph node (a module instance's to its module's).
    """
    failed = {node_of(f.address) for f in findings if f.stage == stage and node_of(f.address) in graph}
    if not failed:
        return findings
    blocked: dict[str, bool] = {}

    def upstream_failed(node: str) -> bool:
        if node in blocked:
            return blocked[node]
        seen, stack = {node}, list(graph.get(node, ()))
        hit = False
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            if n in failed:
                hit = True
                break
            stack.extend(graph.get(n, ()))
        blocked[node] = hit
        return hit

    return [f for f in findings
            if not (f.stage == stage and node_of(f.address) in graph and upstream_failed(node_of(f.address)))]
