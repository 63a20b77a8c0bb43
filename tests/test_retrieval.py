"""Schema docs, the ChromaDB store (real chromadb, real MiniLM, temp dir) and the MCP tools
called through fastmcp's client."""
from __future__ import annotations

import copy
import json
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pytest

from verifirst.benchmarks.iac_pack import SCHEMA_PATH
from verifirst.retrieval import docs

pytest.importorskip("chromadb")
pytest.importorskip("fastmcp")


def test_lookup_lists_required_optional_readonly_and_blocks():
    text = docs.lookup_text(SCHEMA_PATH, "aws_s3_bucket_versioning")
    assert "Required arguments: bucket (string)" in text
    assert "block versioning_configuration { }: exactly one block, required" in text
    assert "required: status (string)" in text
    assert "expected_bucket_owner (string) [deprecated]" in text
    bucket = docs.lookup_text(SCHEMA_PATH, "aws_s3_bucket")
    ro = next(ln for ln in bucket.splitlines() if ln.startswith("Read-only"))
    assert "arn" in ro and "bucket_domain_name" in ro and "force_destroy" not in ro
    assert "block versioning { }: at most one block [deprecated]" in bucket


def test_lookup_unknown_type_suggests_close_names_and_handles_data_sources():
    text = docs.lookup_text(SCHEMA_PATH, "aws_s3_bucket_versionin")
    assert text.startswith("Unknown resource type") and "aws_s3_bucket_versioning" in text
    assert docs.lookup_text(SCHEMA_PATH, "data.aws_iam_policy_document").startswith(
        "Data source aws_iam_policy_document")
    assert "block statement" in docs.lookup_text(SCHEMA_PATH, "aws_iam_policy_document")


def test_skeleton_has_only_required_parts():
    from verifirst.verifiers.terraform.tf_schema import load_schema

    sk = docs.skeleton("aws_lambda_function", load_schema(SCHEMA_PATH).resource("aws_lambda_function"))
    assert "function_name = <string>" in sk and "role = <string>" in sk
    assert "runtime" not in sk and "environment" not in sk


def test_docs_cover_every_type_and_block():
    from verifirst.verifiers.terraform.tf_schema import load_schema

    sch = load_schema(SCHEMA_PATH)
    built = docs.build_docs(SCHEMA_PATH)
    ids = {d.id for d in built}
    assert {f"r:{t}" for t in sch.resource_types()} <= ids
    assert {f"d:{t}" for t in sch.data_source_types()} <= ids
    assert "r:aws_dynamodb_table#point_in_time_recovery" in ids
    assert not any(i.endswith("#timeouts") for i in ids)
    assert len(ids) == len(built)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from verifirst.retrieval.store import open_store

    return open_store(tmp_path_factory.mktemp("docs-store"), SCHEMA_PATH)


def test_store_builds_once_and_finds_the_right_resource(store):
    assert store.count() == len(docs.build_docs(SCHEMA_PATH))
    top = store.search("turn on object versioning for a bucket", k=3)
    assert top[0].type == "aws_s3_bucket_versioning"
    assert top[0].score > top[-1].score
    assert any(h.type == "aws_sqs_queue" for h in store.search("FIFO message queue retention", k=3))
    assert store.search("lambda environment variables", k=1)[0].id == "r:aws_lambda_function#environment"
    assert store.search("", k=3) == []


def test_store_persists_and_separates_schemas(store, tmp_path):
    from verifirst.retrieval.store import DocStore
    from verifirst.verifiers.terraform.tf_schema import from_dict, load_schema

    again = DocStore(store.directory, SCHEMA_PATH)
    assert again.count() == store.count() and again.ensure() == 0  # no re-embedding
    assert [h.id for h in again.search("encrypted log group", 2)] == \
        [h.id for h in store.search("encrypted log group", 2)]
    raw = copy.deepcopy(load_schema(SCHEMA_PATH).raw)
    prov = raw["provider_schemas"]["registry.terraform.io/hashicorp/aws"]
    prov["resource_schemas"] = {"aws_sns_topic": prov["resource_schemas"]["aws_sns_topic"]}
    prov["data_source_schemas"] = {}
    other = DocStore(store.directory, from_dict(raw))
    assert other.collection_name != store.collection_name
    assert other.ensure() == 1 and other.count() == 1
    assert store.count() == len(docs.build_docs(SCHEMA_PATH))  # untouched


@pytest.fixture(scope="module")
def toolbox(store):
    from verifirst.retrieval.mcp_server import MCPToolbox, make_server

    tb = MCPToolbox(make_server(SCHEMA_PATH, store))
    yield tb
    tb.close()


def test_mcp_server_exposes_the_two_tools(toolbox):
    assert sorted(toolbox.tool_names) == ["lookup_resource_schema", "search_docs"]


def test_mcp_lookup_and_search_go_through_the_protocol(toolbox):
    text = toolbox.lookup_resource_schema("aws_sqs_queue")
    assert text.startswith("Resource aws_sqs_queue") and "redrive_policy" in text
    found = toolbox.search_docs("block all public access to a bucket", k=2)
    assert found.startswith("[1] aws_s3_bucket_public_access_block")
    assert "[3]" not in found
    many = toolbox.search_docs("bucket", k=50)  # clipped to the server's max_k
    assert "[10]" in many and "[11]" not in many
    assert toolbox.calls[-1] == {"tool": "search_docs", "arguments": {"query": "bucket", "k": 50},
                                 "is_error": False}


def test_mcp_bad_arguments_come_back_as_tool_errors(toolbox):
    out = toolbox.call("lookup_resource_schema")  # required argument missing
    assert out.startswith("tool error") and toolbox.calls[-1]["is_error"] is True


def test_rag_tools_search_the_store_directly(store):
    from verifirst.programs.iac import make_rag_tools

    search, lookup = make_rag_tools(store, SCHEMA_PATH)
    assert search("sns topic subscription to a queue", 1).startswith("[1] aws_sns_topic_subscription")
    assert lookup("aws_kms_key").startswith("Resource aws_kms_key")


def test_mcp_output_is_clipped_for_small_contexts():
    from verifirst.retrieval.mcp_server import MCPToolbox, make_server

    with MCPToolbox(make_server(SCHEMA_PATH, max_chars=120)) as tb:
        text = tb.lookup_resource_schema("aws_instance")
        assert text.endswith("... (truncated)") and len(text) < 160
        assert tb.search_docs("instance root volume", 2).startswith("[1] ")  # lexical, no store
