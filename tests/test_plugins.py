"""Plugins: a separately installed package adds components through the `verifirst.components`
entry-point group, usable by name from experiment files and listed by `verifirst components`."""
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifirst.core import registry
from verifirst.cli import app
from verifirst.core.errors import ConfigError
from verifirst.lm import Models
from verifirst.lm.testing import json_answer, scripted_lm

runner = CliRunner()
PLUGIN_DIR = Path(__file__).resolve().parent / "plugins" / "verifirst_demo_plugin"


def _installed() -> bool:
    from importlib.metadata import entry_points

    return any(ep.name == "demo" for ep in entry_points(group=registry.ENTRY_POINT_GROUP))


@pytest.fixture(scope="module", autouse=True)
def demo_plugin():
    """The demo plugin as `make install-test` installs it; installed here if this venv lacks it."""
    if not _installed():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-e", str(PLUGIN_DIR)],
                       check=True, capture_output=True, timeout=300)
        importlib.invalidate_caches()
    try:
        importlib.import_module("verifirst_demo_plugin")
    except ImportError:  # the editable install's path hook is read at startup; this process started before
        sys.path.insert(0, str(PLUGIN_DIR))
    registry.load_plugins(refresh=True)
    yield
    registry.load_plugins(refresh=True)


def _dist(root: Path, name: str, entry: str, files: dict[str, str] | None = None) -> None:
    """A minimal installed distribution in `root` (a sys.path entry) declaring one entry point."""
    info = root / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{registry.ENTRY_POINT_GROUP}]\n{entry}\n")
    for rel, text in (files or {}).items():
        (root / rel).write_text(text)


@pytest.fixture
def extra_plugins(tmp_path, monkeypatch):
    """Install throwaway plugins on sys.path for one test; the registry forgets them after."""
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))

    def add(name, entry, files=None):
        _dist(root, name, entry, files)
        importlib.invalidate_caches()
        return registry.load_plugins(refresh=True)

    yield add
    monkeypatch.undo()
    importlib.invalidate_caches()
    registry.load_plugins(refresh=True)


def test_components_lists_the_plugin_verifier_and_its_origin():
    r = runner.invoke(app, ["components"])
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.output.splitlines() if "demo-contains" in ln)
    assert "plugin demo (verifirst-demo-plugin 0.1.0)" in line
    bash_exec = next(ln for ln in r.output.splitlines() if ln.strip().startswith("bash-exec"))
    assert "plugin" not in bash_exec  # built-ins carry no origin tag


PACK = None


def _gold_by_task() -> dict[str, str]:
    global PACK
    if PACK is None:
        from verifirst.benchmarks.bash_pack import load_bash_pack

        PACK = {it.inputs["task"]: it.gold["command"] for it in load_bash_pack().items}
    return PACK


def _task(messages):
    """Answers the gold command wrapped in extra text for tasks whose text has an even length,
    and a wrong command otherwise: demo-contains passes exactly the first kind."""
    text = messages[-1]["content"]
    task = next(t for t in _gold_by_task() if t in text)
    cmd = f"{_gold_by_task()[task]} # done" if len(task) % 2 == 0 else "true"
    return json_answer(reasoning="r", command=cmd)


def test_experiment_file_names_the_plugin_verifier_and_runs_end_to_end(tmp_path, monkeypatch):
    models = Models(task=scripted_lm(_task, name="plugin-task"),
                    reflection=scripted_lm(lambda m: json_answer(new_instruction="Answer with the command."),
                                           role="reflection", name="plugin-refl"))
    for name in ("verifirst.lm",):  # where the CLI's run builds its models
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, "make_models"):
            monkeypatch.setattr(mod, "make_models", lambda *a, **k: models)
    registry.unload_plugins()  # the run itself must find the plugin, lazily
    assert "demo-contains" not in registry.VERIFIERS
    exp = tmp_path / "exp.toml"
    exp.write_text(f'[experiment]\nname = "plugin-run"\nworkdir = "{tmp_path / "wd"}"\n'
                   '[suite]\nname = "bash-builtin"\nlimit = 12\n[program]\nname = "bash-generator"\n'
                   '[verifier]\nname = "demo-contains"\noptions = { gold_field = "command" }\n'
                   '[splits]\nratios = [0.5, 0.25, 0.25]\n[optimizer]\nname = "none"\n'
                   '[models]\ntask = "local"\n[tracking]\nenabled = false\n')
    r = runner.invoke(app, ["run", str(exp), "--run-dir", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    manifest = json.loads((tmp_path / "run" / "split_manifest.json").read_text())
    from verifirst.benchmarks.bash_pack import load_bash_pack

    tasks = {it.id: it.inputs["task"] for it in load_bash_pack().items}
    wants = [sum(len(tasks[i]) % 2 == 0 for i in manifest[s]) for s in ("train", "val", "test")]
    assert 0 < sum(wants) < 12  # both verdicts occur
    for split in ("train", "val", "test"):
        ids = manifest[split]
        want = sum(len(tasks[i]) % 2 == 0 for i in ids)
        before = report["splits"][split]["before"]
        assert before["pass"] == want and before["scored"] == len(ids), (split, before)
    rows = [json.loads(x) for x in (tmp_path / "run" / "eval" / "before_test.jsonl").read_text().splitlines()]
    assert rows and all("contain" in (r.get("feedback") or "") for r in rows)
    assert {r["stage"] for r in rows} <= {"PASS", "MISSING"}
    assert report["stage_order"] == ["MISSING", "PASS"]  # the plugin verifier's own funnel


def test_a_broken_plugin_is_named_only_when_its_names_are_used(extra_plugins, tmp_path):
    errors = extra_plugins("broken-plugin", "broken = verifirst_no_such_module:register")
    assert "broken" in errors and "verifirst_no_such_module" in errors["broken"]
    # built-in and working-plugin names resolve as before
    assert registry.resolve("verifier", registry.VERIFIERS, "exact", "verifier.name", None).__name__ == "ExactMatch"
    assert registry.resolve("verifier", registry.VERIFIERS, "demo-contains", "verifier.name", None)
    r = runner.invoke(app, ["components"])
    assert r.exit_code == 0 and "demo-contains" in r.output
    assert "plugin 'broken' failed to load" in r.output and "verifirst_no_such_module" in r.output
    with pytest.raises(ConfigError) as e:
        registry.resolve("verifier", registry.VERIFIERS, "broken-thing", "verifier.name", "exp.toml")
    assert "'broken'" in str(e.value) and "No module named 'verifirst_no_such_module'" in str(e.value)
    exp = tmp_path / "exp.toml"
    exp.write_text('[experiment]\nname = "b"\nworkdir = "wd"\n[suite]\nname = "bash-builtin"\n'
                   '[program]\nname = "bash-generator"\n[verifier]\nname = "broken-thing"\n')
    r = runner.invoke(app, ["run", str(exp)])
    assert r.exit_code == 2 and "broken-thing" in r.output and "'broken'" in r.output


def test_a_plugin_component_that_cannot_import_names_its_plugin(extra_plugins):
    mod = "COMPONENTS = {'verifier': {'ghost-check': 'vf_ghost_missing:Check'}}\n"
    assert extra_plugins("ghost-plugin", "ghosts = vf_ghost_plugin:COMPONENTS", {"vf_ghost_plugin.py": mod}) == {}
    with pytest.raises(ConfigError) as e:
        registry.resolve("verifier", registry.VERIFIERS, "ghost-check", "verifier.name", "exp.toml")
    msg = str(e.value)
    assert "ghost-check" in msg and "plugin ghosts (ghost-plugin 0.1)" in msg and "vf_ghost_missing" in msg


def test_dict_plugin_and_a_plugin_failing_midway(extra_plugins):
    mod = ("from verifirst_demo_plugin import ContainsVerifier\n"
           "COMPONENTS = {'verifier': {'dict-contains': ('verifirst_demo_plugin:ContainsVerifier', 'by dict')}}\n"
           "def half(registry):\n"
           "    registry.add('verifier', 'half-added', ContainsVerifier, 'first')\n"
           "    registry.add('verifier', 'exact', ContainsVerifier, 'steals a built-in name')\n")
    extra_plugins("dict-plugin", "bydict = vf_extra_plugin:COMPONENTS", {"vf_extra_plugin.py": mod})
    errors = extra_plugins("half-plugin", "half = vf_extra_plugin:half")
    assert registry.VERIFIERS["dict-contains"].origin == "plugin bydict (dict-plugin 0.1)"
    assert registry.resolve("verifier", registry.VERIFIERS, "dict-contains", "f", None).name == "demo-contains"
    assert "half-added" not in registry.VERIFIERS  # a plugin that fails adds nothing
    assert registry.VERIFIERS["exact"].origin == "verifirst"
    assert "already registered by verifirst" in errors["half"]


def test_plugin_stage_funnel_orders_report_tables(extra_plugins):
    from verifirst.report import stage_order

    assert stage_order(["PASS", "BUILD_FAIL", "ZLINK_FAIL", "ALINT_FAIL"]) == [
        "ALINT_FAIL", "BUILD_FAIL", "ZLINK_FAIL", "PASS"]  # no funnel names these: sorted
    mod = "def register(registry):\n    registry.add('stages', 'c-build', ('ZLINK_FAIL', 'BUILD_FAIL', 'PASS'))\n"
    errors = extra_plugins("stage-plugin", "cbuild = vf_stage_plugin:register", {"vf_stage_plugin.py": mod})
    assert errors == {}
    registry.unload_plugins()  # rendering a report finds the plugin's funnel by itself
    assert stage_order(["PASS", "BUILD_FAIL", "ZLINK_FAIL", "ALINT_FAIL"]) == [
        "ZLINK_FAIL", "BUILD_FAIL", "ALINT_FAIL", "PASS"]


def test_plugin_engine_is_listed_as_an_optimizer(extra_plugins):
    mod = "class Eng:\n    def compile(self, *a, **k):\n        raise NotImplementedError\n"
    extra_plugins("engine-plugin", "eng = vf_engine_plugin:COMPONENTS",
                  {"vf_engine_plugin.py": mod + "COMPONENTS = {'engine': {'my-engine': ('vf_engine_plugin:Eng', 'mine')}}\n"})
    from verifirst.core.engine import resolve_engine

    assert type(resolve_engine("my-engine")).__name__ == "Eng"  # the name an experiment's [optimizer] gives
    r = runner.invoke(app, ["components"])
    assert "my-engine" in r.output.split("optimizers:")[1] and "plugin eng (engine-plugin 0.1)" in r.output
