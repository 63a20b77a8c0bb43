"""Credentials stay in memory: a run with an api_key in the experiment file and one through
vf.optimize(models={...: {"api_key": ...}}) leave no copy of the key in any file under the workdir
(run directory, checkpoints, cache, the MLflow sqlite store and its artifacts) nor in MLflow's
params, tags and traces as the client returns them; the run still resumes."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import mlflow
import pytest

from conftest import experiment_toml
from verifirst import api
from verifirst import config, experiment
from verifirst.lm.local_server import serve_local
from verifirst.core.redaction import (REDACTED, RedactingFilter, install_log_redaction, is_credential_name, redact,
                                 redact_text, register_secret, span_processor)
from verifirst.lm.testing import ScriptedEngine, json_answer

KEY = "sk-verifirst-TEST-9f3a1c"
ROTATED = "sk-verifirst-TEST-rotated-77b2"
HEADER_TOKEN = "hdr-verifirst-TEST-4e1d0b"
RULE = "Always answer with printf."


def _gold() -> dict[str, str]:
    from verifirst.benchmarks.bash_pack import load_bash_pack

    return {it.inputs["task"]: it.gold["command"] for it in load_bash_pack().items}


@pytest.fixture(scope="module")
def endpoint():
    """An OpenAI-compatible endpoint on 127.0.0.1: gold commands for the program, a rule for GEPA."""
    gold = _gold()

    def answer(messages):
        text = "\n".join(m["content"] for m in messages)
        if "new_instruction" in text:
            return json_answer(new_instruction=RULE)
        task = next((t for t in gold if t in messages[-1]["content"]), None)
        return json_answer(command=gold[task] if task else "echo hi")

    url, stop = serve_local(ScriptedEngine(answer))
    yield url
    stop()


def _toml(path: Path, workdir: Path, url: str, key: str, **extra) -> Path:
    model = {"model": "openai/scripted", "api_base": url, "api_key": key, **extra,
             "extra_headers": {"Authorization": f"Bearer {HEADER_TOKEN}"}}
    path.write_text(experiment_toml(workdir, name="secrets", optimizer={"name": "gepa", "max_metric_calls": 12},
                                    models={"task": model, "reflection": model}))
    return path


def _hits_in_files(root: Path, secrets: tuple[str, ...]) -> list[str]:
    hits = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            hits += [f"{p}: {s}" for s in secrets if s.encode() in data]
    return hits


def _mlflow_dump(uri: str) -> str:
    """Every param, tag and trace of every run and experiment in the store, as text."""
    client = mlflow.MlflowClient(tracking_uri=uri)
    mlflow.set_tracking_uri(uri)
    parts = []
    for exp in client.search_experiments():
        parts.append(json.dumps(exp.tags))
        for run in client.search_runs([exp.experiment_id]):
            parts.append(json.dumps({"params": run.data.params, "tags": run.data.tags}))
        for tr in mlflow.search_traces(locations=[exp.experiment_id], return_type="list"):
            parts.append(tr.to_json())
    return "\n".join(parts)


def test_experiment_file_key_is_nowhere_on_disk_nor_in_mlflow_and_the_run_resumes(tmp_path, endpoint):
    wd = tmp_path / "wd"
    path = _toml(tmp_path / "exp.toml", wd, endpoint, KEY)
    exp = config.load(path)
    assert exp.models["task"]["api_key"] == KEY  # the key is used, in memory
    out = api.run(exp, run_dir=wd / "run", progress=False, offline=True, echo=lambda m: None)
    assert out.report["usage_this_run"]["lm_calls"] > 0, "the endpoint was called with the key"
    assert not _hits_in_files(wd, (KEY, HEADER_TOKEN))
    dump = _mlflow_dump(out.tracking_uri)
    assert KEY not in dump and HEADER_TOKEN not in dump
    assert '"spanType": "LLM"' in dump or "LLM" in dump, "LM calls were traced"
    params = mlflow.MlflowClient(tracking_uri=out.tracking_uri).get_run(out.run_id).data.params
    assert params["config.models.task.api_key"] == REDACTED
    assert params["config.models.task.extra_headers.Authorization"] == REDACTED
    assert params["config.models.task.model"] == "openai/scripted"  # only the credentials go
    state = json.loads((wd / "run" / "run_state.json").read_text())
    assert state["config"]["models"]["task"]["api_key"] == REDACTED and state["status"] == "finished"

    # resume: the key comes from the file (here a rotated one), never from disk
    rotated = config.load(_toml(tmp_path / "exp2.toml", wd, endpoint, ROTATED))
    again = api.run(rotated, run_dir=wd / "run", progress=False, offline=True, echo=lambda m: None)
    assert again.report["split_digest"] == out.report["split_digest"]
    assert not _hits_in_files(wd, (KEY, ROTATED, HEADER_TOKEN))


def test_api_models_key_is_nowhere_on_disk_nor_in_mlflow(tmp_path, endpoint):
    import verifirst as vf
    from verifirst.benchmarks.bash_pack import load_bash_pack
    from verifirst.programs.bash import BashGenerator
    from verifirst.verifiers.exact import ExactMatch

    suite = load_bash_pack()
    data = [{"id": it.id, "task": it.inputs["task"], "command": it.gold["command"]} for it in suite.items[:8]]
    spec = {"model": "openai/scripted", "api_base": endpoint, "api_key": KEY, "cache": False,
            "extra_headers": {"Authorization": f"Bearer {HEADER_TOKEN}"}}
    kw = dict(models={"task": spec, "reflection": spec}, splits=(0.5, 0.25, 0.25), workdir=tmp_path / "wd",
              run_dir=tmp_path / "wd" / "runs" / "api", tracking=vf.MLflow(), budget=vf.Budget(max_metric_calls=12))
    wd = tmp_path / "wd"
    res = vf.optimize(BashGenerator(), data, ExactMatch(), "gepa", **kw)
    assert res.report["usage_this_run"]["lm_calls"] > 0
    assert not _hits_in_files(wd, (KEY, HEADER_TOKEN))
    dump = _mlflow_dump(f"sqlite:///{(tmp_path / 'wd' / 'mlflow.db').resolve()}")
    assert "LLM" in dump and KEY not in dump and HEADER_TOKEN not in dump
    again = vf.optimize(BashGenerator(), data, ExactMatch(), "gepa", **kw)  # resumes the same run dir
    assert again.report["split_digest"] == res.report["split_digest"]
    assert not _hits_in_files(wd, (KEY, HEADER_TOKEN))


def test_credential_names_and_not_token_counts():
    for name in ("api_key", "openai_api_key", "aws_secret_access_key", "access_token", "token", "password",
                 "client_secret", "x-api-key", "Authorization", "config.models.task.api_key", "credentials"):
        assert is_credential_name(name), name
    for name in ("max_tokens", "prompt_tokens", "completion_tokens", "input_cost_per_token", "key", "model",
                 "api_base", "tokenizer", "eos_token", "group_key", "sort_key"):
        assert not is_credential_name(name), name
    cfg = {"task": {"model": "openai/m", "api_key": "abc12345678", "max_tokens": 64,
                    "extra_headers": {"Authorization": "Bearer xyz", "X-Trace": "t1"}}, "n": [1, {"token": "t"}]}
    assert redact(cfg) == {"task": {"model": "openai/m", "api_key": REDACTED, "max_tokens": 64,
                                    "extra_headers": {"Authorization": REDACTED, "X-Trace": "t1"}},
                           "n": [1, {"token": REDACTED}]}
    assert cfg["task"]["api_key"] == "abc12345678"  # a copy: the run keeps using the key


def test_registered_secret_is_masked_in_free_text_and_log_lines(caplog):
    secret = "zz-verifirst-TEST-logline-5c"
    register_secret(secret)
    assert redact_text(f"401 Unauthorized: invalid key {secret}.") == f"401 Unauthorized: invalid key {REDACTED}."
    assert redact_text('{"authorization": "Bearer abcdefgh12345678"}') == '{"authorization": "Bearer ***"}'
    assert redact_text("Basic configuration is basic") == "Basic configuration is basic"
    install_log_redaction()
    with caplog.at_level(logging.WARNING, logger="dspy.clients.lm"):
        logging.getLogger("dspy.clients.lm").warning("call failed with key %s", secret)
    assert secret not in caplog.text and REDACTED in caplog.text
    rec = logging.LogRecord("x", logging.ERROR, __file__, 1, "boom %s", (secret,), None)
    RedactingFilter().filter(rec)
    assert rec.getMessage() == f"boom {REDACTED}"


def test_span_processor_masks_attributes_inputs_and_outputs():
    class Span:
        def __init__(self):
            self.attributes = {"model": "openai/m", "api_key": "k-span-verifirst-55",
                               "extra_headers": {"Authorization": "B x"}}
            self.inputs = {"messages": [{"content": "my key is k-span-verifirst-55"}], "password": "a task's data"}
            self.outputs = "fine"

        def set_attribute(self, k, v):
            self.attributes[k] = v

        def set_inputs(self, v):
            self.inputs = v

        def set_outputs(self, v):
            self.outputs = v

    s = Span()
    span_processor(s)
    assert s.attributes == {"model": "openai/m", "api_key": REDACTED, "extra_headers": {"Authorization": REDACTED}}
    # inputs are data: a field named password stays; the key the attributes carried is masked in them
    assert s.inputs == {"messages": [{"content": f"my key is {REDACTED}"}], "password": "a task's data"}
    assert s.outputs == "fine"


# -- verifier inputs never follow a symlink out of the configuration directory -----------------
MARKER = "root:VERIFIRST-SHADOW-MARKER:19000:0:99999:7:::"
MAIN_TF = 'resource "aws_s3_bucket" "b" {\n  bucket = "verifirst-demo"\n}\n'


@pytest.fixture
def outside(tmp_path) -> Path:
    """A file outside every configuration directory of the test, holding a marker line."""
    secret = tmp_path / "elsewhere" / "shadow"
    secret.parent.mkdir()
    secret.write_text(MARKER + "\n")
    return secret


def _backends() -> list[str]:
    from verifirst.verifiers.terraform.terraform_cli import find_terraform

    return ["python"] + (["terraform"] if find_terraform(None) else [])


@pytest.mark.parametrize("backend", _backends())
def test_cli_refuses_a_tf_symlink_out_of_the_directory_without_quoting_it(tmp_path, outside, backend):
    from typer.testing import CliRunner

    from verifirst.cli import app

    d = tmp_path / "cfg"
    d.mkdir()
    (d / "main.tf").write_text(MAIN_TF)
    (d / "shadow_link.tf").symlink_to(outside)
    for target in (d, d / "shadow_link.tf"):
        res = CliRunner().invoke(app, ["verify", "terraform", str(target), "--backend", backend])
        out = res.output + str(res.stderr_bytes or b"")
        assert res.exit_code == 2, out
        assert "shadow_link.tf" in out and "outside the configuration directory" in out
        assert "VERIFIRST-SHADOW-MARKER" not in out and "Traceback" not in out
    (d / "shadow_link.tf").unlink()
    (d / "shared").mkdir()
    (d / "shared" / "more.tf").write_text(MAIN_TF.replace('"b"', '"c"'))
    (d / "more_link.tf").symlink_to(d / "shared" / "more.tf")  # a link that stays inside is read as usual
    res = CliRunner().invoke(app, ["verify", "terraform", str(d), "--backend", "python"])
    assert res.exit_code == 0, res.output


def test_hcl_check_dir_refuses_a_symlink_out(tmp_path, outside):
    from verifirst.verifiers.terraform.confine import OutsideConfiguration
    from verifirst.verifiers.terraform.hcl_check import check_dir

    d = tmp_path / "cfg"
    d.mkdir()
    (d / "main.tf").write_text(MAIN_TF)
    (d / "x.tf").symlink_to(outside)
    with pytest.raises(OutsideConfiguration, match="x.tf") as e:
        check_dir(d)
    assert "MARKER" not in str(e.value)


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("call", ['file("{abs}")', 'templatefile("{abs}", {{}})', 'filebase64("{abs}")',
                                  'file("${{path.module}}/../../../../../../../../..{abs}")'])
def test_a_candidate_reading_a_host_file_is_a_verifier_error_naming_it(outside, backend, call):
    """What an LM writes is refused before terraform runs: the metric's verdict is an error
    naming the file and line, never the file's content."""
    import dspy

    from verifirst.core.metric import VERIFIER_ERROR, Metric, OptimizerMetric
    from verifirst.core.task import Item
    from verifirst.verifiers.terraform.confine import OutsideConfiguration
    from verifirst.verifiers.terraform.verifier import TerraformVerifier

    hcl = MAIN_TF + f'output "o" {{\n  value = {call.format(abs=outside)}\n}}\n'
    verifier, item = TerraformVerifier(backend=backend), Item(id="t1", inputs={"prompt": "p"}, gold={})
    with pytest.raises(OutsideConfiguration, match="main.tf:5") as e:
        verifier.verify(item, hcl)
    assert "VERIFIRST-SHADOW-MARKER" not in str(e.value)
    metric = OptimizerMetric(Metric(verifier, "config"), [item])
    j = metric._judge(item, None, dspy.Prediction(config=hcl))
    assert j.stage == VERIFIER_ERROR and metric.verifier_errors == 1  # counted apart, never a FAIL
    assert "outside the configuration directory" in j.feedback and "VERIFIRST-SHADOW-MARKER" not in j.feedback


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("path", ["{abs}", "../../../../../../../../..{abs}"])
def test_a_path_only_an_evaluation_learns_is_refused_on_both_backends(outside, backend, path):
    """file(var.p) passes the literal pre-check; terraform would read var.p from the host."""
    from verifirst.verifiers.terraform.confine import OutsideConfiguration
    from verifirst.verifiers.terraform.verifier import TerraformVerifier

    hcl = (f'variable "p" {{\n  default = "{path.format(abs=outside)}"\n}}\n'
           'output "o" {\n  value = file(var.p)\n}\n')
    with pytest.raises(OutsideConfiguration, match="main.tf:5") as e:
        TerraformVerifier(backend=backend).verify_config({"main.tf": hcl})
    assert "VERIFIRST-SHADOW-MARKER" not in str(e.value)
    ok = 'variable "p" {\n  default = "policy.json"\n}\noutput "o" {\n  value = fileexists(var.p)\n}\n'
    TerraformVerifier(backend=backend).verify_config({"main.tf": ok})  # a path inside: no refusal


def test_python_evaluator_refuses_a_path_it_only_learns_at_evaluation(tmp_path, outside):
    """A variable holding the path passes the literal pre-check; the evaluator refuses the read."""
    from verifirst.verifiers.terraform.hcl_check import check, feedback

    hcl = (f'variable "p" {{\n  default = "{outside}"\n}}\n'
           'resource "aws_s3_object" "o" {\n  bucket = "b"\n  key = "k"\n  content = file(var.p)\n}\n')
    d = tmp_path / "cfg"
    d.mkdir()
    for base in (None, str(d)):
        stage, errors, warnings = check({"main.tf": hcl}, base_dir=base)
        text = feedback(stage, errors, warnings)
        assert stage != "PASS" and "outside the configuration directory" in text
        assert "VERIFIRST-SHADOW-MARKER" not in text
    (d / "data.txt").write_text("inside\n")  # a file inside the directory is read as before
    hcl_in = hcl.replace(str(outside), "data.txt")
    assert check({"main.tf": hcl_in}, base_dir=str(d))[0] == "PASS"


def test_a_task_folder_file_linked_out_of_the_folder_is_refused(tmp_path, outside):
    from verifirst.benchmarks.iac_tasks import load_task_folder
    from verifirst.verifiers.terraform.confine import OutsideConfiguration

    task = tmp_path / "tasks" / "t1"
    task.mkdir(parents=True)
    (task / "prompt.md").write_text("Create a bucket.\n")
    (task / "data.txt").symlink_to(outside)
    with pytest.raises(OutsideConfiguration, match="data.txt") as e:
        load_task_folder(task)
    assert "VERIFIRST-SHADOW-MARKER" not in str(e.value)


def test_a_provider_error_that_echoes_the_key_leaves_no_copy(tmp_path):
    """An endpoint whose every error message quotes the key (as some providers do): the run stops,
    and neither its output, its checkpoints, its report nor its traces hold the key."""
    from typer.testing import CliRunner

    from verifirst.cli import app

    def fail(messages):
        raise RuntimeError(f"401 invalid api key {KEY} for this project")

    url, stop = serve_local(ScriptedEngine(fail))
    try:
        wd = tmp_path / "wd"
        path = _toml(tmp_path / "exp.toml", wd, url, KEY, num_retries=0)
        res = CliRunner().invoke(app, ["run", str(path), "--offline", "--run-dir", str(wd / "run")])
    finally:
        stop()
    out = res.output + (res.stderr if res.stderr_bytes else "")
    assert res.exit_code != 0 and KEY not in out and "invalid api key" in out, out
    assert list((wd / "run").rglob("*.jsonl")), "the run kept its checkpoints"
    assert not _hits_in_files(wd, (KEY, HEADER_TOKEN))
    assert KEY not in _mlflow_dump(f"sqlite:///{(wd / 'mlflow.db').resolve()}")


def test_a_key_from_the_environment_is_masked_once_models_are_built(monkeypatch):
    from verifirst.lm import make_lm

    env_key = "env-verifirst-TEST-7d20aa"
    monkeypatch.setenv("OPENAI_API_KEY", env_key)
    make_lm("openai/gpt-4o-mini", cache=False)  # the provider will read the key from the environment
    assert redact_text(f"Incorrect API key provided: {env_key}.") == f"Incorrect API key provided: {REDACTED}."


def test_an_artifact_file_holding_a_key_is_logged_masked(tmp_path):
    """Files other libraries write (a saved DSPy program) skip verifirst's writers: logged masked."""
    from verifirst.tracking import Tracker

    secret = "sk-verifirst-TEST-artifact-31"
    register_secret(secret)
    prog = tmp_path / "program.json"
    prog.write_text(json.dumps({"lm": {"extra_headers": {"X-Key-Echo": secret}}}))
    png = tmp_path / "plot.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    tr = Tracker(tmp_path / "wd", offline=True, experiment="artifacts", autolog=False)
    tr.start("a")
    tr.log_artifact(prog, "program")
    tr.log_artifact(png, "plots")
    tr.finish()
    assert not _hits_in_files(tmp_path / "wd", (secret,))
    logged = list((tmp_path / "wd").rglob("program.json"))
    assert logged and REDACTED in logged[0].read_text() and prog.read_text().count(secret) == 1
    assert list((tmp_path / "wd").rglob("plot.png"))[0].read_bytes() == png.read_bytes()
