"""Inspecting an optimization: a scripted GEPA run whose reflection builds a two-step lineage
(seed -> #1 -> #2), one test item passing only before and others only after. The HTML report
shows every item's output and verdict before and after side by side, the seed -> optimized
prompt diff and the lineage with parents and reflections; MLflow gets the same as a table and
files; headless Chromium shows the three views (screenshot kept)."""
import json
import os
import re
import shutil
from html import escape
from pathlib import Path

import mlflow
import pytest

from verifirst import api
from verifirst import config, experiment
from verifirst.report import html as html_report
from verifirst.report import inspect_view
from verifirst.lm import Models
from verifirst.programs.bash import BashGenerator
from verifirst.lm.testing import json_answer, scripted_lm

SEED = BashGenerator().predictors()[0].signature.instructions
R1 = "Use exactly the tools the task names."
R2 = "Answer with the reference command for the task."
C1, C2 = f"{SEED}\n{R1}", f"{SEED}\n{R1}\n{R2}"
WHY1 = "Most failures invent a different tool than the task names."
WHY2 = "The remaining failures need the canonical reference form."


def cfg(workdir: Path):
    return config.from_dict({
        "experiment": {"name": "inspect-exp", "workdir": str(workdir), "seed": 0},
        "suite": {"name": "bash-builtin", "limit": 16},
        "program": {"name": "bash-generator"},
        "verifier": {"name": "exact"},
        "splits": {"ratios": [0.5, 0.25, 0.25]},
        "optimizer": {"name": "gepa", "max_metric_calls": 60},
        "models": {"task": "local"},
        "tracking": {"traces": False},
    })


def scripted(exp) -> tuple[Models, dict]:
    """The seed gets a few items right, R1 all but the hard ones, R1+R2 all but `lost` (a test
    item the seed got right)."""
    suite = experiment.load_suite(exp)
    m = experiment.make_manifest(exp, suite)
    by_id = {it.id: it for it in suite.items}
    task = {it.inputs["task"]: it for it in suite.items}
    seed_right = {m.train[0], m.val[0], m.test[0], m.test[1]}
    hard = {m.train[1], m.train[2], m.val[1]}
    lost = m.test[0]

    def task_fn(messages):
        instr, text = messages[0]["content"], messages[-1]["content"]
        it = next((task[t] for t in task if t in text), None)
        if it is None:
            return json_answer(command="echo hi")
        right = (it.id != lost if R2 in instr else it.id not in hard if R1 in instr else it.id in seed_right)
        return json_answer(command=it.gold["command"] if right else "echo hi")

    def reflect_fn(messages):
        text = "\n".join(x["content"] for x in messages)
        if R1 in text:
            return json_answer(reasoning=WHY2, new_instruction=C2)
        return json_answer(reasoning=WHY1, new_instruction=C1)

    models = Models(task=scripted_lm(task_fn, cache=True, name="insp-task"),
                    reflection=scripted_lm(reflect_fn, role="reflection", cache=True, name="insp-refl"))
    return models, {"lost": lost, "by_id": by_id, "manifest": m}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("inspect")
    exp = cfg(root / "wd")
    models, info = scripted(exp)
    out = api.run(exp, run_dir=root / "run", progress=False, models=models, echo=lambda m: None)
    return out, info


def _rows(html: str, split: str) -> dict[str, str]:
    """The per-item table rows of one split, by item id, in page order."""
    part = html.split(f"data-split='{split}'")[1].split("</table>")[0]
    rows = re.findall(r"<tr class='[^']*'><td>([^<]+)<br>(.*?)</tr>", part, re.S)
    return {iid: body for iid, body in rows}


def test_lineage_is_recorded_with_parents_scores_and_reflections(run):
    out, _ = run
    det = out.report["details"]
    assert det["seed_instructions"] == {"generate": SEED}
    lin = det["lineage"]
    assert [r["parents"] for r in lin] == [[], [0], [1]]
    assert [r["instructions"]["generate"] for r in lin] == [SEED, C1, C2]
    assert lin[0]["reflection"] is None and "seed" in lin[0]["reflection_note"]
    assert WHY1 in lin[1]["reflection"] and WHY2 in lin[2]["reflection"]
    assert [r["val_score"] for r in lin] == det["val_aggregate_scores"] and lin[2]["best"]
    assert lin[1]["components_updated"] == ["generate"] and lin[2]["iteration"] > lin[1]["iteration"]
    on_disk = json.loads((out.run_dir / "gepa" / "gepa_lineage.json").read_text())
    assert on_disk == lin


def test_html_shows_items_side_by_side_changed_first(run, tmp_path):
    out, info = run
    html = html_report.write_html(out.report, tmp_path / "r.html").read_text()
    assert not re.search(r"(src|href)=['\"](https?:|//|/)", html) and "<script" not in html
    for split in ("train", "val", "test"):
        before = {json.loads(l)["id"]: json.loads(l) for l in
                  (out.run_dir / "eval" / f"before_{split}.jsonl").read_text().splitlines()}
        after = {json.loads(l)["id"]: json.loads(l) for l in
                 (out.run_dir / "eval" / f"after_{split}.jsonl").read_text().splitlines()}
        rows = _rows(html, split)
        assert set(rows) == set(before)
        for iid, body in rows.items():
            b, a = before[iid], after[iid]
            cells = re.findall(r"<td>(.*?)</td>", body, re.S)
            assert escape(info["by_id"][iid].inputs["task"]) in cells[0]
            assert escape(b["output"]) in cells[1] and escape(a["output"]) in cells[3]
            assert f"class='v {b['status']}'" in cells[2] and f"class='v {a['status']}'" in cells[4]
            assert escape(b["feedback"]) in cells[2] and escape(a["feedback"]) in cells[4]
        c = out.report["splits"][split]["comparison"]
        marks = [("gained" if "mark gained" in body else "lost" if "mark lost" in body else "")
                 for body in rows.values()]
        assert marks.count("gained") == c["c_after_only"] and marks.count("lost") == c["b_before_only"]
        moved = [m for m in marks if m]
        assert marks[:len(moved)] == moved  # every moved item comes before the unchanged ones
    test_rows = _rows(html, "test")
    assert "mark lost" in test_rows[info["lost"]]
    assert f"<tr class='lost'><td>{info['lost']}<br>" in html
    assert out.report["splits"]["test"]["comparison"]["b_before_only"] == 1


def test_html_shows_prompt_diff_and_lineage(run, tmp_path):
    out, _ = run
    html = html_report.write_html(out.report, tmp_path / "r.html").read_text()
    diff = html.split("id='prompt-diff'")[1].split("id='lineage'")[0]
    assert "seed instructions from the engine" in diff
    for line in SEED.splitlines():
        assert f"<div class='ctx'>  {escape(line)}</div>" in diff
    assert f"<div class='add'>+ {escape(R1)}</div>" in diff and f"<div class='add'>+ {escape(R2)}</div>" in diff
    assert "class='del'" not in diff
    lin = html.split("id='lineage'")[1]
    assert all(f"<g data-candidate='{i}'>" in lin for i in range(3))
    assert lin.count("<line ") == 2  # #0 -> #1 -> #2
    rows = dict(re.findall(r"<tr data-candidate='(\d)'>(.*?)</tr>", lin, re.S))
    assert "<td>#0</td>" in rows["1"] and "<td>#1</td>" in rows["2"] and "★" in rows["2"]
    assert f"<b>reasoning</b>: <span class='fb'>{escape(WHY1)}</span>" in rows["1"]  # readable at once
    assert escape(WHY2) in rows["2"]
    assert "no reflection proposed it" in rows["0"]
    # each candidate as a diff against its parent: #2 adds R2 to #1's text
    assert f"<div class='add'>+ {escape(R2)}</div>" in rows["2"] and f"+ {escape(R1)}" not in rows["2"]


def test_mlflow_gets_the_table_diff_and_lineage_once(run):
    out, _ = run
    client = mlflow.MlflowClient(tracking_uri=out.tracking_uri)
    arts = {a.path for a in client.list_artifacts(out.run_id, "inspection")}
    assert {"inspection/per_item.json", "inspection/prompt_diff.diff", "inspection/gepa_lineage.json"} <= arts
    mlflow.set_tracking_uri(out.tracking_uri)
    table = mlflow.load_table("inspection/per_item.json", run_ids=[out.run_id])
    n = sum(out.report["sizes"].values())
    assert len(table) == n and set(table["split"]) == {"train", "val", "test"}
    assert set(table["change"]) >= {"gained", "lost", "same"}
    diff = Path(client.download_artifacts(out.run_id, "inspection/prompt_diff.diff")).read_text()
    assert f"+{R1}" in diff and f"+{R2}" in diff and "--- seed/generate" in diff
    opt = next(r for r in client.search_runs([client.get_run(out.run_id).info.experiment_id],
                                             filter_string=f"tags.mlflow.parentRunId = '{out.run_id}'")
               if r.info.run_name == "optimize/gepa")
    lin = json.loads(Path(client.download_artifacts(opt.info.run_id, "gepa_lineage.json")).read_text())
    assert [r["parents"] for r in lin] == [[], [0], [1]]
    # logging again (as a second report pass does) leaves one copy of each row
    from verifirst.tracking import Tracker
    from verifirst.tracking.callback import log_report_files

    log_report_files(Tracker(out.run_dir.parent, uri=out.tracking_uri), out.report, out.run_dir)
    assert len(mlflow.load_table("inspection/per_item.json", run_ids=[out.run_id])) == n


def test_absent_seed_and_lineage_are_said(tmp_path):
    rep = {"engine": "simba", "instructions": {"generate": "Be brief."}, "instructions_changed": True}
    html = inspect_view.prompt_diff_html(rep)
    assert "No diff: the simba engine did not record the seed instructions" in html
    assert inspect_view.lineage_html(rep) == ""
    same = {"engine": "none", "instructions": {"generate": "Be brief."}, "instructions_changed": False}
    assert "(unchanged)" in inspect_view.prompt_diff_html(same)
    assert "No lineage in this report" in inspect_view.lineage_html({"engine": "gepa"})
    assert inspect_view.section({}, None) == "" and inspect_view.per_item(tmp_path) == ({}, None)


def test_per_item_without_items_file_says_inputs_are_missing(tmp_path):
    ev = tmp_path / "eval"
    ev.mkdir()
    row = {"id": "a", "status": "FAIL", "output": "x" * 300, "feedback": "long\nfeedback"}
    (ev / "before_test.jsonl").write_text(json.dumps(row) + "\n")
    (ev / "after_test.jsonl").write_text(json.dumps({**row, "status": "ERROR", "error": "boom",
                                                     "error_kind": "lm"}) + "\n{broken\n")
    html = inspect_view.per_item_html(tmp_path)
    assert "inputs not recorded: the run directory has no items.jsonl" in html  # a run from before it
    assert "<details><summary>" + "x" * inspect_view.SHORT + "…</summary>" in html  # long output folds
    assert "lm: boom" in html and "mark changed" in html  # FAIL -> ERROR is a verdict change
    (tmp_path / "items.jsonl").write_text(json.dumps({"id": "a", "split": "test", "inputs": {"q": "in-a"}}) + "\n")
    html = inspect_view.per_item_html(tmp_path)
    assert "inputs not recorded" not in html and "in-a" in html
    (ev / "after_test.jsonl").unlink()  # evaluated once (optimizer none): said, not shown as changes
    html = inspect_view.per_item_html(tmp_path)
    assert "no after evaluation in this run directory" in html and "mark changed" not in html


# -- the page in headless Chromium ------------------------------------------------------
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--no-first-run",
        "--disable-gpu", "--disable-sync"]


@pytest.mark.browser
def test_browser_shows_the_three_views(run, tmp_path):
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="python playwright not installed")
    out, info = run
    page_file = html_report.write_html(out.report, tmp_path / "report.html")
    shot = tmp_path / "inspection.png"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            pg = browser.new_page(viewport={"width": 1280, "height": 900})
            pg.goto(page_file.resolve().as_uri())
            view = pg.locator("#inspection")
            view.wait_for(state="visible")
            pg.locator("details[data-split='train']").evaluate("d => d.open = false")  # keep the shot short
            view.screenshot(path=str(shot))
            text = view.inner_text()
        finally:
            browser.close()
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 20_000
    assert "Per item: before / after" in text and "Per item (test)" in text
    assert info["lost"] in text and "lost" in text and "gained" in text
    assert "Prompt diff: seed → optimized instructions" in text and R2 in text
    assert "GEPA lineage" in text and "#2 ★ selected" in text
    assert WHY2 in text
    if os.environ.get("VERIFIRST_SCREENSHOT_DIR"):
        dest = Path(os.environ["VERIFIRST_SCREENSHOT_DIR"])
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, dest / "inspection.png")


def test_lineage_rows_name_merges_and_missing_proposals():
    from verifirst.optimizers.gepa import lineage

    details = {"candidates": [{"p": "a"}, {"p": "b"}, {"p": "c"}, {"p": "bc"}],
               "parents": [[None], [0], [0], [1, 2]], "val_aggregate_scores": [0.1, 0.5, 0.4, 0.7],
               "discovery_eval_counts": [0, 8, 16, 30], "best_idx": 3}
    proposals = {"1:proposal:0": {"iteration": 1, "components": ["p"], "new_instructions": {"p": "b"},
                                  "reflection": "why b"},
                 "2:proposal:0": {"iteration": 2, "components": ["p"], "new_instructions": {"p": "x"},
                                  "reflection": "rejected"}}
    rows = lineage(details, {1: {"iteration": 1}, 2: {"iteration": 2}, 3: {"iteration": 3, "merge": True}},
                   proposals)
    assert [r["parents"] for r in rows] == [[], [0], [0], [1, 2]]
    assert rows[1]["reflection"] == "why b" and rows[1]["metric_calls_at_discovery"] == 8
    # iteration 2's only proposal carries other text: it is not candidate 2's
    assert rows[2]["reflection"] is None and "no proposal was recorded" in rows[2]["reflection_note"]
    assert rows[3]["reflection"] is None and rows[3]["reflection_note"].startswith("merged from candidates 1, 2")
    assert [r["best"] for r in rows] == [False, False, False, True]
    html = inspect_view.lineage_html({"engine": "gepa", "details": {"lineage": rows}})
    assert html.count("<line ") == 4 and "#3 ★ selected" in html and "merged from candidates 1, 2" in html


def test_reflections_are_given_to_the_proposals_that_asked_for_them(tmp_path):
    from verifirst.optimizers.base import EngineContext
    from verifirst.optimizers.gepa import _Recorder, _ReflectionCapture

    cap = _ReflectionCapture(lm=object())
    rec = _Recorder(EngineContext(run_dir=tmp_path), valset_size=2, path=tmp_path / "h.json", reflections=cap)
    cap.outputs.append("an answer from an earlier iteration")
    rec.on_iteration_start({"iteration": 1})
    rec.on_proposal_start({"iteration": 1})
    cap.outputs += ["first try, unparsable", "second try"]  # one proposal, the adapter asked twice
    rec.on_proposal_end({"iteration": 1, "new_instructions": {"p": "A"}})
    rec.on_iteration_start({"iteration": 2})
    rec.on_proposal_start({"iteration": 2})
    rec.on_proposal_start({"iteration": 2})  # two tasks: both start before either reflects
    cap.outputs += ["why B", "why C"]
    rec.on_proposal_end({"iteration": 2, "new_instructions": {"p": "B"}})
    rec.on_proposal_end({"iteration": 2, "new_instructions": {"p": "C"}})
    got = {p["new_instructions"]["p"]: p["reflection"] for p in rec.proposals_by_key.values()}
    assert got == {"A": "first try, unparsable\n\nsecond try", "B": "why B", "C": "why C"}
    again = _Recorder(EngineContext(run_dir=tmp_path), valset_size=2, path=tmp_path / "h.json")
    assert again.proposals_by_key == rec.proposals_by_key  # kept for a resumed run


# -- what the driver records: items.jsonl, for API runs as for experiment files ----------
import ast  # noqa: E402

import dspy  # noqa: E402

import verifirst as vf  # noqa: E402
from verifirst.loop import run_items  # noqa: E402
from verifirst.core.redaction import REDACTED  # noqa: E402
from verifirst.loop.splits import make_splits  # noqa: E402
from verifirst.core.task import Item  # noqa: E402


class Ask(dspy.Signature):
    """Answer the question; the key says which service it is about."""

    question: str = dspy.InputField()
    api_key: str = dspy.InputField()
    answer: str = dspy.OutputField()


def _api_records(n=10, secret="none"):
    return [{"id": f"q{k}", "question": f"what is item #{k} about? {secret if k == 3 else ''}".strip(),
             "api_key": f"sk-item-{k}-abcdefgh", "answer": "42"} for k in range(n)]


def _api_metric(example, pred, trace=None, pred_name=None, pred_trace=None):
    return float((pred.answer or "").strip() == example.answer)


def _api_run(tmp_path, records):
    lm = scripted_lm(lambda m: json_answer(answer="42" if "#1" in m[-1]["content"] else "41"), name="items-task")
    return vf.optimize(dspy.Predict(Ask), records, _api_metric, "none", models={"task": lm},
                       run_dir=tmp_path / "run", workdir=tmp_path / "wd", tracking=None)


def test_api_run_inspection_shows_each_items_inputs(tmp_path):
    recs = _api_records()
    res = _api_run(tmp_path, recs)
    by_split, note = inspect_view.per_item(res.run_dir)
    assert note is None
    rows = {r["id"]: r for rows in by_split.values() for r in rows}
    assert set(rows) == {r["id"] for r in recs}
    html = inspect_view.section(res.report, res.run_dir)
    assert "inputs not recorded" not in html
    for r in recs:
        assert r["question"] in rows[r["id"]]["input"]  # the question, as a TOML run shows its task
        assert f"<td>{r['id']}<br>" in html and escape(r["question"]) in html
        assert r["api_key"] not in rows[r["id"]]["input"]  # a credential-named input is masked
    recorded = run_items.read_items(res.run_dir)
    assert {i: (d["split"], d["gold"]) for i, d in recorded.items()} == \
        {r["id"]: (res.manifest.split_of(r["id"]), {"answer": "42"}) for r in recs}


def test_items_file_holds_no_credential(tmp_path, monkeypatch):
    secret = "sk-env-0123456789abcdef"
    monkeypatch.setenv("VERIFIRST_ITEMS_TEST_API_KEY", secret)  # exported after redaction first looked
    recs = _api_records(secret=secret)
    res = _api_run(tmp_path, recs)
    text = (res.run_dir / run_items.ITEMS_FILE).read_text()
    assert secret not in text and not any(r["api_key"] in text for r in recs)
    recorded = run_items.read_items(res.run_dir)
    assert all(d["inputs"]["api_key"] == REDACTED for d in recorded.values())  # by name
    assert recorded["q3"]["inputs"]["question"] == f"what is item #3 about? {REDACTED}"  # by value
    assert recorded["q4"]["inputs"]["question"] == "what is item #4 about?"  # the rest stays


def test_items_file_keeps_small_json_meta_and_reads_back(tmp_path):
    items = [Item("a", {"q": "x"}, {"y": 1}, group="g", meta={"source": "s"}),
             Item("b", {"q": object()}, meta={"handle": object()}),  # meta JSON cannot hold is dropped
             Item("c", {"q": "z"}, meta={"blob": "x" * (run_items.META_MAX_CHARS + 1)}),  # too long
             Item("d", {"q": "w"})]
    m = make_splits(items, ratios=(0.5, 0.25, 0.25), seed=0)
    assert run_items.read_items(tmp_path) == {}  # a run directory from before the file existed
    path = run_items.write_items(tmp_path, items, m)
    first = path.read_bytes()
    got = run_items.read_items(tmp_path)
    assert set(got) == {"a", "b", "c", "d"} and got["a"]["group"] == "g" and got["a"]["meta"] == {"source": "s"}
    assert got["a"]["gold"] == {"y": 1} and isinstance(got["b"]["inputs"]["q"], str)
    assert "meta" not in got["b"] and "meta" not in got["c"] and "meta" not in got["d"]
    assert [json.loads(line)["split"] for line in first.decode().splitlines()] == \
        sorted((m.split_of(i) for i in "abcd"), key=("train", "val", "test").index)
    assert run_items.write_items(tmp_path, items, m).read_bytes() == first  # deterministic
    path.write_text(path.read_text() + "{broken\n[1]\n")
    assert run_items.read_items(tmp_path) == got


def test_inspection_and_items_import_no_run_loop_module():
    """The report layer reads the run directory: no import of experiment, config, api or driver."""
    for mod in (inspect_view, run_items):
        names = set()
        for node in ast.walk(ast.parse(Path(mod.__file__).read_text())):
            if isinstance(node, ast.ImportFrom):
                names |= {f"{node.module or ''}.{a.name}".strip(".") for a in node.names} | {node.module or ""}
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
        bad = {n for n in names for m in ("experiment", "config", "api", "driver", "calibrate", "cli")
               if n == m or n.startswith(m + ".") or n.endswith("." + m) or n == f"verifirst.{m}"}
        assert not bad, f"{mod} imports {bad}"
