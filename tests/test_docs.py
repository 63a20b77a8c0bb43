"""The documentation site: `mkdocs build --strict` succeeds; the generated pages (API, experiment
file, CLI, performance) say what the code says; every code block marked runnable runs; two built
pages render with content in headless Chromium."""
from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
from html import unescape
from pathlib import Path

import pytest

pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
RUNNABLE = re.compile(r"<!-- runnable -->\n```python\n(.*?)\n```", re.S)
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--no-first-run",
        "--disable-gpu", "--disable-sync"]
SHOTS = Path(os.environ.get("VERIFIRST_TEST_ARTIFACTS", REPO / "test-artifacts"))


def _docs_module(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_{name}", DOCS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _text(html: str) -> str:
    body = html.split("<article", 1)[-1]
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", body)).split())


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)], cwd=REPO,
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    return out


def test_strict_build_has_every_page(site):
    for page in ("index.html", "getting-started/index.html", "journeys/calibrate/index.html",
                 "journeys/iac/index.html", "journeys/inspect/index.html", "python-api/index.html",
                 "integrations/index.html", "reference/api/index.html", "reference/experiment-file/index.html",
                 "reference/cli/index.html", "architecture/index.html", "performance/index.html"):
        assert (site / page).is_file(), page
    assert not list(site.rglob("*.py")) and not list(site.rglob("*.pyc")), "generator scripts are not pages"


def test_api_reference_documents_every_public_name(site):
    import verifirst

    html = (site / "reference/api/index.html").read_text(encoding="utf-8")
    names = [n for n in verifirst.__all__ if n not in ("stats", "__version__")]
    missing = [n for n in names if f"vf.{n}" not in html]
    assert not missing, missing
    text = _text(html)
    assert "split guard" in text  # vf.optimize's docstring, rendered
    assert "Parameters" in text and "program" in text


def test_experiment_file_reference_follows_the_schema(site):
    from verifirst import config
    text = _text((site / "reference/experiment-file/index.html").read_text(encoding="utf-8"))
    for section, keys in config.SCHEMA.items():
        assert f"[{section}]" in text, section
        for key, (_, _, help_text) in keys.items():
            assert key in text and " ".join(help_text.split()[:3]) in text, f"{section}.{key}"


def test_config_reference_is_generated_not_copied(monkeypatch):
    """A key added to the schema appears on the page, with its range."""
    from verifirst import config
    gen = _docs_module("gen_config_ref")
    schema = {**config.SCHEMA, "experiment": {**config.SCHEMA["experiment"],
                                              "patience": ((int,), 3, "iterations without gain before stopping")}}
    monkeypatch.setattr(config, "SCHEMA", schema)
    monkeypatch.setattr(config, "RANGES", {**getattr(config, "RANGES", {}), ("experiment", "patience"): (1, 50)},
                        raising=False)
    page = gen.page()
    assert "| `patience` | integer | `3` | 1 to 50 | iterations without gain before stopping |" in page


def test_cli_reference_lists_every_verb_and_option(site):
    import typer

    from verifirst.cli import app

    text = _text((site / "reference/cli/index.html").read_text(encoding="utf-8"))
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="verifirst")
    for name in root.list_commands(ctx):
        cmd = root.get_command(ctx, name)
        assert f"verifirst {name}" in text, name
        for p in cmd.get_params(ctx):
            for opt in p.opts:
                if opt.startswith("--"):
                    assert opt in text, f"{name} {opt}"
    assert "verifirst verify terraform" in text and "--gates" in text


def test_performance_page_renders_every_results_row(site):
    from verifirst.benchmarks.perf import readme_table as rt

    text = _text((site / "performance/index.html").read_text(encoding="utf-8"))
    assert "NOT RENDERED" not in text, text[text.index("NOT RENDERED"):][:300]
    for row, what, result, _ in rt.rendered_rows():
        assert f"results/{row.name}.json" in text, row.name
        assert " ".join(what.replace("`", "").split()[:3]) in text, row.name
    if (rt.RESULTS / "install.json").exists():
        assert "Install size" in text and "full [local,iac,retrieval]" in text


def _runnable_pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if RUNNABLE.search(p.read_text(encoding="utf-8")))


def test_pages_carry_runnable_examples():
    pages = {p.relative_to(DOCS).as_posix() for p in _runnable_pages()}
    assert {"python-api.md", "getting-started.md", "integrations.md"} <= pages, pages


@pytest.mark.parametrize("page", _runnable_pages(), ids=lambda p: p.relative_to(DOCS).as_posix())
def test_runnable_blocks_run(page, tmp_path):
    """A page's runnable blocks run in order in one fresh interpreter (later blocks may use earlier
    names), in an empty directory where `examples/` is this checkout's."""
    code = "\n\n".join(RUNNABLE.findall(page.read_text(encoding="utf-8")))
    (tmp_path / "examples").symlink_to(REPO / "examples")
    script = tmp_path / "snippet.py"
    script.write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=env)
    assert r.returncode == 0, f"{page.name}:\n{code}\n--- stderr:\n{r.stderr[-4000:]}"


def _non_blank(png: Path) -> float:
    """The share of pixels that are not the page background (white)."""
    from PIL import Image

    img = Image.open(png).convert("L")
    hist = img.histogram()
    return 1 - sum(hist[250:]) / (img.width * img.height)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # no access log in the test output
        pass


@pytest.mark.browser
def test_two_pages_render_in_chromium(site, tmp_path):
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="python playwright not installed")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
            pg = browser.new_page(viewport={"width": 1280, "height": 900})
            pg.set_default_timeout(30_000)
            for path, heading, text in (("/getting-started/", "Getting started", "make demo"),
                                        ("/reference/api/", "API reference", "vf.optimize")):
                pg.goto(base + path)
                h1 = pg.locator("article h1").first
                h1.wait_for(state="visible")
                assert h1.inner_text().startswith(heading), h1.inner_text()
                pg.locator("article").get_by_text(text).first.wait_for(state="visible")
                assert pg.locator("nav.md-nav").first.is_visible()  # the theme loaded (CSS and layout)
                shot = SHOTS / f"docs_{path.strip('/').replace('/', '_')}.png"
                pg.screenshot(path=str(shot))
                shutil.copy(shot, tmp_path / shot.name)
                assert _non_blank(shot) > 0.03, f"{shot} is nearly blank"
            browser.close()
    finally:
        server.shutdown()


README = REPO / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's and MkDocs' anchor for a heading (the subset of rules these headings need)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(md: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", md.read_text(encoding="utf-8"), flags=re.S)  # a `# comment` is no heading
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+?)(?: \{#[\w-]+\})?$", text, re.M)} | \
        set(re.findall(r"\{#([\w-]+)\}", text))


def test_readme_is_what_a_newcomer_reads_first():
    """The README stays short and points into the site: the two commands, each journey's page, the
    install extras, how to build the docs."""
    import tomllib

    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200, f"README.md has {len(text.splitlines())} lines: move detail to docs/"
    for needle in ("make demo", "make test", "mkdocs serve", "mkdocs build", "vf.optimize(",
                   "docs/journeys/calibrate.md", "docs/journeys/iac.md", "docs/journeys/inspect.md",
                   "docs/python-api.md", "docs/integrations.md", "<!-- perf-table:begin -->", "## Layout",
                   "## Architecture"):
        assert needle in text, needle
    layout = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    folders = [p.name for p in REPO.iterdir() if p.is_dir() and (p / "__init__.py").exists() or p.name == "tests"]
    kernel = [p.name for p in (REPO / "verifirst").iterdir() if (p / "__init__.py").exists()]
    missing = [f"{f}/" for f in folders + kernel if f"`{f}/`" not in layout]
    assert not missing, f"the Layout section does not name {missing}"
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    missing = [e for e in extras if e not in ("test", "data") and f"verifirst[{e}]" not in text]
    assert not missing, f"install extras the README does not name: {missing}"


def test_readme_links_resolve():
    """Every relative link of the README names a file of this checkout, and an anchor one of its headings."""
    broken = []
    for target in LINK.findall(README.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        file = REPO / path if path else README
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(target)
    assert not broken, broken
