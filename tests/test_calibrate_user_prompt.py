"""Calibrate the judge the user already has: a prompt file or a registry version with `{{ variable }}`
slots mapped to record fields, registered as a new version under the same name, an alias moved only
with --promote and only on validation evidence; bad input stops before any LM call."""
from __future__ import annotations

import json
import re
import time

import mlflow
import pytest
from typer.testing import CliRunner

from test_autorefine import RuleFollowingLM, rule_verdict
from test_calibrate import write_outcomes
from verifirst.judge.calibrate import calibrate_outcomes
from verifirst.judge.printing import print_calibration
from verifirst.cli import app
from verifirst.core.errors import InputError
from verifirst.judge.template import bind_view, render, template_variables
from verifirst.judge.programs import TemplatePassFailJudge, make_judge

# A user's judge prompt: MLflow-style slots; the code is fenced so a scripted judge can tell it from rules.
USER_PROMPT = """You review a generated Python function before it is merged.

Task: {{ task }}

<code>
{{ snippet }}
</code>

Answer PASS if the function is safe to merge, FAIL otherwise."""
CODE_RE = re.compile(r"<code>\n(.*?)\n</code>", re.S)


class TemplateRuleLM(RuleFollowingLM):
    """RuleFollowingLM whose judge reads the rendered template: rules outside the code fence, code inside."""

    def __init__(self, drop_variables: bool = False, **kw):
        super().__init__(**kw)
        self.drop_variables = drop_variables

    def _judge(self, instr: str, f: dict) -> dict:
        if "request" not in f:
            return super()._judge(instr, f)
        req = f["request"]
        m = CODE_RE.search(req)
        code = m.group(1) if m else ""
        return rule_verdict(CODE_RE.sub("", req), code, "no rule in the request applies")

    def _teacher(self, instr: str, f: dict) -> dict:
        # records read from traces carry the code as the trace's outputs
        return super()._teacher(instr, {"code": f.get("outputs", ""), **f})

    def _applier(self, instr: str, f: dict) -> dict:
        out = super()._applier(instr, f)
        if self.drop_variables:  # a careless rewrite: the code slot is gone
            out["new_prompt"] = out["new_prompt"].replace("{{ snippet }}", "(the code)")
        return out


@pytest.fixture(autouse=True)
def _no_plots(monkeypatch):
    """The run's plots are not under test here (and cost seconds per tracked run)."""
    import verifirst.tracking.callback

    monkeypatch.setattr(verifirst.tracking.callback, "log_report_files", lambda *a, **k: None)


def _models(lm):
    return {"judge": lm, "teacher": lm, "reflection": lm}


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    root = tmp_path_factory.mktemp("user-prompt")
    src = root / "outcomes.jsonl"
    write_outcomes(src, n_groups=6)  # 24 records: small and still learnable
    prompt = root / "team_judge.md"
    prompt.write_text(USER_PROMPT + "\n")
    return root, src, prompt


@pytest.fixture(scope="module")
def file_run(records):
    root, src, prompt = records
    lm = TemplateRuleLM()
    with pytest.MonkeyPatch.context() as mp:
        import verifirst.tracking.callback

        mp.setattr(verifirst.tracking.callback, "log_report_files", lambda *a, **k: None)
        rep = calibrate_outcomes(src, workdir=root / "wd", models=_models(lm), max_iters=2, echo=lambda m: None,
                                 prompt_source=str(prompt), view="code=snippet,task=task")
    return rep, lm


def test_template_variables_bind_render_and_name_what_is_missing():
    assert template_variables("{{ a }} {{b}} {{ a }}") == ["a", "b"]
    binding = bind_view("T: {{ title }}\nIO: {{ inputs }}", "title,diff=inputs,plan=inputs", ["title", "diff", "plan"])
    assert binding == {"title": ["title"], "inputs": ["diff", "plan"]}
    text = render("T: {{ title }}\nIO: {{ inputs }}", binding, {"title": "x", "diff": "+a", "plan": "none"})
    assert text == "T: x\nIO: diff:\n+a\n\nplan:\nnone"
    with pytest.raises(InputError, match=r"\{\{ test_plan \}\}.*records have: diff, title"):
        bind_view("{{ title }} {{ test_plan }}", None, ["title", "diff"])
    with pytest.raises(InputError, match="field 'patch'.*do not have"):
        bind_view("{{ diff }}", "patch=diff", ["diff"])
    judge = make_judge("passfail", ["task", "code"], USER_PROMPT, view="code=snippet,task=task")
    assert isinstance(judge, TemplatePassFailJudge) and judge.view_fields == ["code", "task"]
    assert "<code>\nprint(1)\n</code>" in judge.render({"task": "t", "code": "print(1)"})
    with pytest.raises(ValueError, match="lost template variable"):
        judge.prompt = "no slots left"
    edited = judge.copy_with_prompt(USER_PROMPT + "\n- FAIL if the code contains `eval(`")
    # the template is the predictor's instructions: saving, the test ledger's hash and diffs see edits
    from verifirst.loop.ledger import program_hash

    assert edited.predict.signature.instructions == edited.prompt != judge.prompt
    assert program_hash(edited) != program_hash(judge)
    again = make_judge("passfail", ["task", "code"], USER_PROMPT, view="code=snippet,task=task")
    again.load_state(edited.dump_state())
    assert again.prompt.endswith("`eval(`") and again.binding == judge.binding


def test_a_prompt_file_is_calibrated_with_its_variables_and_registered_under_its_stem(file_run):
    rep, lm = file_run
    judged = rep["judge"]
    assert judged["initial_prompt"] == USER_PROMPT
    cal = judged["calibrated_prompt"]
    assert cal != USER_PROMPT and "FAIL if the code contains `eval(`" in cal
    assert template_variables(cal) == ["task", "snippet"], "the template variables survive calibration"
    assert judged["view_fields"] == ["code", "task"]
    test = judged["test"]["judges"]
    assert test["calibrated"]["pi"] > test["uncalibrated"]["pi"]
    # the judge saw the rendered template (the record's code inside the fence), never a raw slot
    requests = [f["request"] for role, f in lm.calls if role == "judge"]
    assert requests and not any("{{" in r for r in requests) and all("def f" in r for r in requests)
    assert rep["prompt_uri"] == "prompts:/team_judge/1"
    assert rep["champion"] == {"moved": False, "alias": None, "decided_on": "validation",
                               "reason": "no alias moves without --promote ALIAS"}
    client = mlflow.MlflowClient(tracking_uri=rep["tracking_uri"], registry_uri=rep["tracking_uri"])
    pv = client.get_prompt_version("team_judge", 1)
    assert pv.template == cal and pv.tags["view"] == "code=snippet,task=task"
    assert not getattr(pv, "aliases", None)


def test_an_edit_that_drops_a_variable_is_not_kept(records):
    root, src, prompt = records
    lm = TemplateRuleLM(drop_variables=True)
    rep = calibrate_outcomes(src, workdir=root / "wd-drop", models=_models(lm), max_iters=1, echo=lambda m: None,
                             prompt_source=str(prompt), view="code=snippet,task=task", tracking=False)
    edited = rep["judge"]["loop"]["iterations"][1]["prompt"]
    assert "{{ snippet }}" in edited and "- FAIL if the code contains `" in edited, "the edit landed, the slot stayed"
    assert "{{ snippet }}" in rep["judge"]["calibrated_prompt"]
    rnd = rep["judge"]["loop"]["iterations"][1]["edits"]
    assert rnd["applier"] == "deterministic"
    assert any("{{ snippet }} was lost" in p for p in rnd["applier_problems"])


def test_a_registry_start_gets_a_new_version_and_the_alias_moves_only_on_validation(records, capsys):
    root, src, prompt = records
    wd = root / "wd"  # the module's store (one database to create)
    wd.mkdir(exist_ok=True)
    uri = f"sqlite:///{(wd / 'mlflow.db').resolve()}"
    client = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
    client.register_prompt(name="pr-judge", template=USER_PROMPT)
    client.set_prompt_alias("pr-judge", "production", 1)
    lm = TemplateRuleLM()
    kw = dict(workdir=wd, models=_models(lm), echo=lambda m: None, view="code=snippet,task=task")

    # --promote production: the hand-written v1 (no split) is re-scored on this run's validation items
    rep = calibrate_outcomes(src, max_iters=2, prompt_source="prompts:/pr-judge@production",
                             promote_alias="production", promote_rule="better", **kw)  # the registry path, not the rule
    ch = rep["champion"]
    assert rep["prompt_uri"] == "prompts:/pr-judge/2", "a new version under the same name"
    assert rep["start_prompt"]["version"] == 1 and rep["start_prompt"]["alias"] == "production"
    assert ch["moved"] is True and ch["decided_on"] == "validation" and ch["alias"] == "production"
    assert ch["val_pi"] > ch["champion_val_pi"] and ch["paired_n"] == len(rep["judge"]["validation"]["labels"])
    assert int(client.get_prompt_version_by_alias("pr-judge", "production").version) == 2

    # starting from the uncalibrated v1 again with no edits: validation does not improve, the alias stays
    rep = calibrate_outcomes(src, max_iters=0, prompt_source="prompts:/pr-judge/1", promote_alias="production", **kw)
    assert rep["champion"]["moved"] is False and "does not beat" in rep["champion"]["reason"]
    assert int(client.get_prompt_version_by_alias("pr-judge", "production").version) == 2
    print_calibration(rep)
    assert "production kept (decided on validation)" in capsys.readouterr().out


def _cli(args, wd):
    return CliRunner().invoke(app, ["calibrate", *args, "--workdir", str(wd), "--max-iters", "1"])


def test_bad_input_exits_2_naming_what_is_missing_before_any_lm_call(records, monkeypatch):
    root, src, prompt = records
    import verifirst.judge.calibrate as cal

    def no_models(*a, **k):
        raise AssertionError("an LM was built before the input was checked")

    monkeypatch.setattr(cal, "make_lm", no_models)
    wd = root / "wd"  # the module's store (one database to create)
    uri = f"sqlite:///{(wd / 'mlflow.db').resolve()}"
    client = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)

    def registered():
        return {(p.name, int(v.version)) for p in client.search_prompts() for v in client.search_prompt_versions(p.name)}

    before, runs_before = registered(), len(list((wd / "runs").glob("*"))) if (wd / "runs").exists() else 0
    res = _cli(["--outcomes", str(src), "--prompt", str(prompt)], wd)  # {{ snippet }}: no such field
    assert res.exit_code == 2
    assert "{{ snippet }}" in res.output and "records have: code, task" in res.output
    res = _cli(["--outcomes", str(src), "--prompt", str(prompt), "--view", "code=snipet,task=task"], wd)
    assert res.exit_code == 2 and "{{ snipet }}" in res.output and "snippet" in res.output
    no_slot = root / "no_slot.md"
    no_slot.write_text("Judge this diff: {{ patch }}\n")
    res = _cli(["--outcomes", str(src), "--prompt", str(no_slot)], wd)
    assert res.exit_code == 2 and "{{ patch }}" in res.output
    res = _cli(["--outcomes", str(src), "--prompt", "prompts:/pr-judge@staging"], wd)
    assert res.exit_code == 2 and "no alias 'staging'" in res.output
    assert registered() == before, "nothing was registered"
    assert (len(list((wd / "runs").glob("*"))) if (wd / "runs").exists() else 0) == runs_before


@pytest.mark.integration
def test_cli_calibrates_the_example_prompt_on_the_embedded_model(tmp_path):
    """The journey on the real embedded model, tiny: examples/judge_prompt.md on examples/outcomes.jsonl."""
    t0 = time.perf_counter()
    res = CliRunner().invoke(app, ["calibrate", "--outcomes", "examples/outcomes.jsonl", "--prompt",
                                   "examples/judge_prompt.md", "--view", "title,diff,test_plan", "--limit", "8",
                                   "--max-iters", "1", "--workdir", str(tmp_path / "wd")])
    wall = time.perf_counter() - t0
    print(res.output)
    print(f"wall {wall:.1f} s")
    assert res.exit_code == 0, res.output
    assert "registered as prompts:/judge_prompt/1" in res.output and "review queue" in res.output
    run_dir = next((tmp_path / "wd" / "runs").iterdir())
    report = json.loads((run_dir / "report.json").read_text())
    assert template_variables(report["judge"]["calibrated_prompt"]) == ["title", "diff", "test_plan"]
    assert (run_dir / "review_queue.jsonl").exists()


def test_verifirst_judge_applies_the_registered_template_with_its_view(file_run, records, monkeypatch):
    import verifirst.judge.apply as cal

    root, src, _ = records
    rep, _ = file_run
    lm = TemplateRuleLM()
    monkeypatch.setattr(cal, "make_lm", lambda *a, **k: lm)
    rows = cal.apply_judge(rep["prompt_uri"], src, workdir=root / "wd")  # the view comes from the version's tags
    assert len(rows) == 24 and all(r["verdict"] in ("PASS", "FAIL") for r in rows)
    requests = [f["request"] for role, f in lm.calls if role == "judge"]
    assert len(requests) == 24 and all("FAIL if the code contains" in r and "def f" in r for r in requests)


def test_the_python_api_calibrates_the_users_template_like_the_cli(records, tmp_path):
    """vf.calibrate(prompt=..., view=...) is the CLI's --prompt/--view: the template's variables
    are filled from the mapped fields and survive calibration."""
    import verifirst as vf

    root, src, prompt = records
    lm = TemplateRuleLM()
    res = vf.calibrate(src, models=_models(lm), max_iters=2, workdir=tmp_path / "wd", prompt=str(prompt),
                       view="code=snippet,task=task")
    judged = res.report["judge"]
    assert judged["initial_prompt"] == USER_PROMPT and judged["view_fields"] == ["code", "task"]
    assert template_variables(judged["calibrated_prompt"]) == ["task", "snippet"]
    assert "FAIL if the code contains `eval(`" in judged["calibrated_prompt"]
    requests = [f["request"] for role, f in lm.calls if role == "judge"]
    assert requests and not any("{{" in r for r in requests)
    with pytest.raises(InputError, match="test_plan"):
        vf.calibrate(src, models=_models(TemplateRuleLM()), workdir=tmp_path / "wd2", prompt=str(prompt),
                     view="code=snippet,task=task,code=test_plan")
