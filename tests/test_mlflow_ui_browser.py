"""The MLflow UI in headless Debian chromium: run page, metric charts (parent and optimizer
run), traces with verifier assessments, artifacts. Screenshots go to test-artifacts/ (kept
by CI) and the test's tmp folder."""
import os
import shutil
from pathlib import Path

import pytest

from _mlflow_server import shared_tracked_run

pytestmark = [pytest.mark.integration, pytest.mark.browser]

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--no-first-run",
        "--disable-gpu", "--disable-sync"]
REPO = Path(__file__).resolve().parents[1]
SHOTS = Path(os.environ.get("VERIFIRST_TEST_ARTIFACTS", REPO / "test-artifacts"))
WAIT_MS = 45_000


@pytest.fixture(scope="module")
def tracked(request, tmp_path_factory):
    return shared_tracked_run(request, tmp_path_factory)


@pytest.fixture(scope="module")
def page(tracked):
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="python playwright not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        pg.set_default_timeout(WAIT_MS)
        yield pg
        browser.close()


POPUP_CLOSERS = ('[data-component-id="mlflow.detect_issues.guidance.got_it"]',  # "Detect Issues" tip
                 '[data-component-id="mlflow.assistant.chat_panel.close"]')  # the Assistant panel


def _dismiss_popups(pg, quiet_ms: int = 1000, max_ms: int = 6000) -> None:
    """First-visit popups cover the views and appear late: close them until none shows for
    quiet_ms."""
    quiet = waited = 0
    while quiet < quiet_ms and waited < max_ms:
        clicked = False
        for sel in POPUP_CLOSERS:
            loc = pg.locator(sel)
            if loc.count() and loc.first.is_visible():
                loc.first.click(timeout=5000)
                clicked = True
        quiet = 0 if clicked else quiet + 250
        pg.wait_for_timeout(250)
        waited += 250


def _shot(pg, name: str, tmp_path: Path) -> Path:
    _dismiss_popups(pg, quiet_ms=500)
    SHOTS.mkdir(parents=True, exist_ok=True)
    out = SHOTS / f"mlflow_ui_{name}.png"
    pg.screenshot(path=str(out))
    shutil.copy(out, tmp_path / out.name)
    assert out.stat().st_size > 10_000
    return out


def _open(pg, url: str, *texts: str) -> None:
    pg.goto(url)
    for t in texts:
        pg.get_by_text(t, exact=True).first.wait_for(state="visible")
    _dismiss_popups(pg)


def _chart(pg, metric: str):
    """The drawn plot inside the chart card titled `metric`."""
    card = pg.locator('[data-testid="experiment-view-compare-runs-card"]').filter(
        has=pg.get_by_text(metric, exact=True))
    plot = card.locator(".js-plotly-plot")
    plot.first.wait_for(state="visible")
    return plot


def _run_url(t, run_id=None, tab=""):
    return f"{t.url}/#/experiments/{t.experiment_id}/runs/{run_id or t.run_id}{tab}"


def test_run_page_shows_params_and_metrics(tracked, page, tmp_path):
    rep = tracked.out.report
    _open(page, _run_url(tracked), "before_test_pass_rate", "split_digest")
    assert page.get_by_text(rep["split_digest"], exact=True).count() >= 1
    assert page.get_by_text("after_test_pass_rate", exact=True).count() >= 1
    _shot(page, "run_overview", tmp_path)


def _charts(pg, url: str, *metrics: str, tmp_path: Path, shot: str) -> None:
    """Open a run's metric charts and find each metric's drawn chart through the view's search
    (the view shows the first charts of a section only: a run has more metrics than fit)."""
    pg.goto(url)
    search = pg.get_by_placeholder("Search metric charts")
    search.wait_for(state="visible")
    _dismiss_popups(pg)
    for name in metrics:
        search.fill(name)
        assert _chart(pg, name).count() == 1
    _shot(pg, shot, tmp_path)


def test_model_metrics_view_draws_charts(tracked, page, tmp_path):
    _charts(page, _run_url(tracked, tab="/model-metrics"), "after_test_pass_rate", "before_test_pass_rate",
            tmp_path=tmp_path, shot="run_metrics")
    runs = tracked.post("/api/2.0/mlflow/runs/search", {"experiment_ids": [tracked.experiment_id]})["runs"]
    opt = next(r["info"]["run_id"] for r in runs if r["info"]["run_name"] == "optimize/gepa")
    _charts(page, _run_url(tracked, opt, "/model-metrics"), "val_score", "best_val_score", "train_minibatch_score",
            tmp_path=tmp_path, shot="optimizer_metrics")  # per-iteration curves, drawn


def test_traces_view_lists_traces_with_verdicts(tracked, page, tmp_path):
    traces = [t for t in tracked.search_traces() if "verifirst.split" in t.get("tags", {})]
    _open(page, f"{tracked.url}/#/experiments/{tracked.experiment_id}/traces", "verifier_pass", "verifier_score")
    shown = traces[0]["request_preview"][:40]
    page.get_by_text(shown).first.wait_for(state="visible")
    _shot(page, "traces", tmp_path)
    _open(page, _run_url(tracked, tab="/traces"), "verifier_pass")
    _shot(page, "run_traces", tmp_path)


def test_trace_detail_shows_verifier_feedback(tracked, page, tmp_path):
    fail = next(t for t in tracked.search_traces()
                if any(a["assessment_name"] == "verifier_pass" and a["feedback"]["value"] is False
                       for a in t.get("assessments", [])))
    _open(page, f"{tracked.url}/#/experiments/{tracked.experiment_id}/traces?traceId={fail['trace_id']}",
          "BashGenerator.forward")
    page.get_by_role("button", name="Assess").first.click()
    page.get_by_text("verifier_score", exact=True).last.wait_for(state="visible")
    toggles = page.locator('[data-component-id="shared.model-trace-explorer.toggle-assessment-expanded"]')
    for i in range(toggles.count()):
        toggles.nth(i).click()
    page.get_by_text("Expected exactly").first.wait_for(state="visible")
    _shot(page, "trace_feedback", tmp_path)


def test_artifacts_view_lists_report_and_plots(tracked, page, tmp_path):
    _open(page, _run_url(tracked, tab="/artifacts"), "report")
    page.get_by_text("report", exact=True).first.click()
    page.get_by_text("report.html", exact=True).first.click()
    # MLflow previews HTML in an iframe: our page with its inlined plots, inside the UI
    frame = page.frame_locator("iframe").first
    frame.get_by_text("Before / after per split").wait_for(state="visible")
    assert frame.locator("img[data-plot]").count() >= 4
    _shot(page, "artifacts", tmp_path)
