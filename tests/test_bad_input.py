"""Bad input through the command line: each case gets exit code 2, one message naming the file
and line or field and what is expected, and leaves nothing behind (no report, no run state)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifirst import api
from verifirst.cli import app

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def cli(args: list[str]) -> tuple[int, str]:
    res = CliRunner().invoke(app, [str(a) for a in args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception  # a traceback instead of a message is a bug
    return res.exit_code, res.output


def refused(args: list[str], root: Path, *must_contain: str) -> str:
    """Run a command that must be refused; returns its message."""
    before = files(root)
    code, out = cli(args)
    assert code == 2, out
    assert out.startswith("error: ") and "Traceback" not in out, out
    for text in must_contain:
        assert text in out, f"{text!r} not in {out!r}"
    assert files(root) == before, f"bad input wrote {sorted(files(root) - before)}"
    return out


def rec(i: int, label: str = "PASS", **kw) -> str:
    return json.dumps({"id": f"r{i}", "label": label, "code": f"x = {i}", **kw})


def outcomes(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


# -- outcome records (verifirst calibrate) -------------------------------------------------
def test_malformed_jsonl_names_the_line(here):
    p = outcomes(here / "bad.jsonl", [rec(1), rec(2, "FAIL"), '{"id": "r3", "label": '])
    refused(["calibrate", "--outcomes", p.name, "--workdir", "wd"], here,
            "bad.jsonl:3", "malformed JSON", "expected: one JSON object per line")


def test_jsonl_line_that_is_not_an_object(here):
    p = outcomes(here / "list.jsonl", [rec(1), '["r2", "PASS"]'])
    refused(["calibrate", "--outcomes", p.name, "--workdir", "wd"], here, "list.jsonl:2", "not an object")


def test_csv_with_missing_columns(here):
    (here / "bad.csv").write_text("id,code\nr1,x = 1\n")
    refused(["calibrate", "--outcomes", "bad.csv", "--workdir", "wd"], here,
            "bad.csv:1", "missing column(s) ['label']", "expected: columns id, label")


def test_label_other_than_pass_or_fail(here):
    p = outcomes(here / "labels.jsonl", [rec(1), rec(2, "MAYBE")])
    refused(["calibrate", "--outcomes", p.name, "--workdir", "wd"], here,
            "labels.jsonl:2", "[label]", "'MAYBE'", "PASS or FAIL")


def test_duplicate_ids(here):
    p = outcomes(here / "dup.jsonl", [rec(1), rec(2, "FAIL"), rec(1, "FAIL")])
    refused(["calibrate", "--outcomes", p.name, "--workdir", "wd"], here,
            "dup.jsonl:3", "duplicate id 'r1'", "first on line 1")


def test_too_few_records_for_the_split_ratios(here):
    p = outcomes(here / "few.jsonl", [rec(1), rec(2, "FAIL"), rec(3)])
    refused(["calibrate", "--outcomes", p.name, "--workdir", "wd"], here,
            "few.jsonl", "is empty", "too few for ratios", "expected:")


def test_split_flag_of_the_wrong_shape(here):
    p = outcomes(here / "ok.jsonl", [rec(i, "PASS" if i % 2 else "FAIL") for i in range(12)])
    refused(["calibrate", "--outcomes", p.name, "--workdir", "wd", "--splits", "0.5,0.5"], here,
            "--splits", "not three numbers")


def test_calibrate_with_a_model_litellm_cannot_route(here):
    p = outcomes(here / "ok.jsonl", [rec(i, "PASS" if i % 2 else "FAIL") for i in range(12)])
    out = refused(["calibrate", "--outcomes", p.name, "--workdir", "wd", "--model", "nosuch/model-x"], here)
    assert "nosuch/model-x" in out and "LiteLLM" in out and "expected:" in out
    assert not (here / "wd").exists()  # the model specs are checked before the cache is made


# -- experiment files (verifirst run) ------------------------------------------------------
BASE = """[experiment]
name = "bad"
workdir = "wd"

[suite]
name = "bash-builtin"
{suite}

[program]
name = "bash-generator"

[verifier]
name = "exact"

[splits]
ratios = {ratios}

[models]
task = {task}
"""


def toml(here: Path, name: str, suite: str = "", ratios: str = "[0.5, 0.25, 0.25]", task: str = '"local"',
         extra: str = "") -> Path:
    p = here / name
    p.write_text(BASE.format(suite=suite, ratios=ratios, task=task) + extra)
    return p


@pytest.mark.parametrize("name,kw,expect", [
    ("unknown_key.toml", {"suite": "limt = 3"}, ["unknown_key.toml:7", "[suite.limt]", "unknown key", "limit"]),
    ("wrong_type.toml", {"suite": 'limit = "three"'}, ["wrong_type.toml:7", "[suite.limit]", "wrong type str",
                                                        "expected: int"]),
    ("section.toml", {"extra": "\n[optimiser]\nname = \"gepa\"\n"}, ["section.toml:21", "unknown section [optimiser]",
                                                                      "[optimizer]"]),
    ("ratios.toml", {"ratios": "[0.5, 0.6, 0.25]"}, ["ratios.toml:16", "[splits.ratios]", "summing to 1"]),
    ("unroutable.toml", {"task": '"nosuchprovider/model-x"'}, ["unroutable.toml:19", "[models.task]",
                                                              "LiteLLM cannot route", "nosuchprovider/model-x"]),
    ("no_provider.toml", {"task": '"gpt-4o-mini-typo"'}, ["no_provider.toml:19", "[models.task]", "names no provider"]),
])
def test_experiment_file_errors(here, name, kw, expect):
    p = toml(here, name, **kw)
    refused(["run", p.name], here, *expect)


def test_experiment_file_that_is_not_toml(here):
    (here / "syntax.toml").write_text("[suite\nname = 1\n")
    refused(["run", "syntax.toml"], here, "syntax.toml:1", "not valid TOML")


def test_missing_experiment_file(here):
    refused(["run", "nope.toml"], here, "nope.toml", "not found")


def _run_refused_keeping_no_outputs(here: Path, args: list[str], *expect: str) -> None:
    code, out = cli(args)
    assert code == 2 and out.startswith("error: "), out
    for text in expect:
        assert text in out, out
    made = files(here)
    assert not any(f.endswith(("report.json", "report.md", "run_state.json", "split_manifest.json", "mlflow.db"))
                   for f in made), made


def test_experiment_with_too_few_items_for_the_ratios(here):
    p = toml(here, "few.toml", suite="limit = 2")
    _run_refused_keeping_no_outputs(here, ["run", p.name], "few.toml", "is empty", "too few for ratios")


def test_suite_file_that_does_not_parse(here):
    (here / "pack.json").write_text('{"tasks": [\n  {"id": 1,\n  oops\n]}\n')
    p = toml(here, "pack.toml", suite='path = "pack.json"')
    _run_refused_keeping_no_outputs(here, ["run", p.name], "pack.json:3", "invalid JSON")


def test_refused_experiment_leaves_no_directories(here):
    p = toml(here, "few.toml", suite="limit = 2")
    code, _ = cli(["run", p.name])
    assert code == 2
    assert not (here / "wd").exists()


# -- verifiers -----------------------------------------------------------------------------
S3 = 'resource "aws_s3_bucket" "b" {\n  bucket = "example-bucket"\n}\n'


def test_rego_that_does_not_compile(here):
    (here / "main.tf").write_text(S3)
    (here / "bad.rego").write_text("package t\nimport rego.v1\n\ndeny contains msg if {\n  input.x ==\n}\n")
    refused(["verify", "terraform", "main.tf", "--policy", "bad.rego", "--backend", "python"], here,
            "bad.rego:", "does not compile", "expected:")


def test_schema_file_of_the_wrong_shape(here):
    (here / "main.tf").write_text(S3)
    (here / "schema.json").write_text(json.dumps({"resources": {"aws_s3_bucket": {}}}))
    refused(["verify", "terraform", "main.tf", "--schema", "schema.json", "--backend", "python"], here,
            "schema.json", "provider_schemas", "expected:")


def test_schema_file_that_is_not_json(here):
    (here / "main.tf").write_text(S3)
    (here / "schema.json").write_text('{"format_version": "1.0",\n "provider_schemas": {\n')
    refused(["verify", "terraform", "main.tf", "--schema", "schema.json", "--backend", "python"], here,
            "schema.json")


def test_missing_terraform_config(here):
    refused(["verify", "terraform", "nope.tf", "--backend", "python"], here, "nope.tf", "not found")


def test_hcl_that_does_not_parse_names_file_and_line_and_exits_2(here):
    """The verdict (VALIDATE_FAIL, class SYNTAX, the place) is still printed, since that is what a
    repair loop reads; the CLI also refuses the file: exit 2, nothing written."""
    (here / "bad.tf").write_text('resource "aws_s3_bucket" "b" {\n  bucket = "x"\n\n')
    before = files(here)
    code, out = cli(["verify", "terraform", "bad.tf", "--backend", "python", "--json"])
    assert code == 2, out
    v = json.loads(out[out.index("{"):out.rindex("}") + 1])
    assert v["stage"] == "VALIDATE_FAIL" and [e["class"] for e in v["errors"]] == ["SYNTAX"]
    assert "bad.tf line 4" in json.dumps(v)
    assert "error: bad.tf" in out and "does not parse as HCL" in out and "expected:" in out
    assert files(here) == before


def test_command_with_a_nul_byte(here):
    out = refused(["verify", "bash", "--gold", "echo\x00 hi", "--pred", "echo hi", "--fixture", "empty"], here,
                  "NUL byte", "[--gold]", "expected:")
    assert "command" in out
    refused(["verify", "bash", "--gold", "echo hi", "--pred", "echo\x00 hi"], here, "NUL byte", "[--pred]")


def test_megabytes_of_output_are_capped_and_said_so(here):
    code, out = cli(["verify", "bash", "--fixture", "empty", "--json",
                     "--gold", "head -c 3000000 /dev/zero | tr '\\0' a",
                     "--pred", "yes a | tr -d '\\n' | head -c 3000000"])
    assert code == 0, out[-2000:]
    v = json.loads(out[out.index("{\n"):])
    assert v["equivalent"] and "truncated" in v["feedback"]
    assert len(out) < 200_000, "the verdict must not echo megabytes back"


def test_outputs_differing_after_the_cap_are_not_equivalent(here):
    code, out = cli(["verify", "bash", "--fixture", "empty",
                     "--gold", "head -c 3000000 /dev/zero | tr '\\0' a; echo END",
                     "--pred", "head -c 3000000 /dev/zero | tr '\\0' a; echo OTHER"])
    assert code == 1, out[-500:]
    assert "past the output cap" in out


# -- components `verifirst components` lists must build from an experiment file ------------------
def _judge_experiment(tmp_path: Path, program: str, options: dict | None = None):
    from verifirst import config
    return config.from_dict({
        "experiment": {"name": f"{program}-run", "workdir": str(tmp_path / "wd")},
        "suite": {"name": "outcomes", "path": str(REPO / "examples" / "outcomes.jsonl")},
        "program": {"name": program, "options": options or {}},
        "verifier": {"name": "label"},
        "optimizer": {"name": "none"},
        "tracking": {"enabled": False},
    })


@pytest.mark.parametrize("program", ["passfail-judge", "rubric-judge"])
def test_listed_judge_programs_build_from_an_experiment_file(tmp_path, program):
    from verifirst import experiment
    exp = _judge_experiment(tmp_path, program, {"view": "title,diff"})
    suite = experiment.load_suite(exp)
    judge = experiment.build_program(exp, items=suite.items)
    assert judge.output_field == "verdict" and judge.view_fields == ["title", "diff"]


def test_passfail_judge_experiment_runs_and_scores_against_the_labels(tmp_path):
    from verifirst import experiment
    from verifirst.lm import Models
    from verifirst.lm.testing import json_answer, scripted_lm

    exp = _judge_experiment(tmp_path, "passfail-judge")
    lm = scripted_lm(lambda messages: json_answer(reasoning="looks fine", verdict="PASS"), name="pf-judge")
    out = api.run(exp, run_dir=tmp_path / "run", progress=False, models=Models(task=lm), echo=lambda m: None)
    test = out.report["splits"]["test"]["before"]
    assert test["scored"] == test["n"] > 0 and 0 < test["pass"] < test["n"]  # PASS on all: right on PASS labels only


@pytest.mark.parametrize("line, key", [("max_metric_calls = 40", "max_metric_calls"), ('auto = "light"', "auto")])
def test_autorefine_refuses_a_gepa_budget_it_would_ignore(here, line, key):
    """AutoRefine counts iterations: a metric-call budget was silently ignored; now refused at its line."""
    p = here / "judge.toml"
    p.write_text(f'[experiment]\nname = "j"\nworkdir = "wd"\n\n[suite]\nname = "outcomes"\n'
                 f'path = "{REPO / "examples" / "outcomes.jsonl"}"\n\n[program]\nname = "passfail-judge"\n\n'
                 f'[verifier]\nname = "label"\n\n[optimizer]\nname = "autorefine"\n{line}\n\n'
                 '[tracking]\nenabled = false\n')
    refused(["run", p.name, "--offline"], here, "judge.toml:17", f"[optimizer.{key}]", "counts iterations",
            "optimizer.max_iters")


def test_judge_program_option_typo_names_the_option(here):
    p = here / "judge.toml"
    p.write_text(f'[experiment]\nname = "j"\nworkdir = "wd"\n\n[suite]\nname = "outcomes"\n'
                 f'path = "{REPO / "examples" / "outcomes.jsonl"}"\n\n[program]\nname = "passfail-judge"\n'
                 'options = { veiw = "title" }\n\n[verifier]\nname = "label"\n')
    refused(["run", p.name], here, "judge.toml:11", "[program.options.veiw]", "did you mean 'view'")
