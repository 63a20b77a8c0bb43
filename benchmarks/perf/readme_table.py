"""The README's Performance table, rendered from the committed results in benchmarks/perf/results/.

    python benchmarks/perf/readme_table.py                   # print the table
    python benchmarks/perf/readme_table.py --write README.md  # replace it between the markers
    python benchmarks/perf/readme_table.py --check README.md  # exit 1 when the README is stale
    python benchmarks/perf/readme_table.py --summary          # one line per benchmark

Every number in the table comes from one results file, named in its row; `make bench` reruns the
benchmarks, rewrites those files and then this table.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE / "results"
BEGIN, END = "<!-- perf-table:begin -->", "<!-- perf-table:end -->"


class Field:
    """Dotted-path reads of one results file; a missing field is an error naming file and field."""

    def __init__(self, path: Path, data: dict):
        self.path, self.data = path, data

    def __call__(self, dotted: str, default: Any = ...) -> Any:
        cur: Any = self.data
        for part in dotted.split("."):
            if isinstance(cur, dict) and part in cur:
                cur = cur[part]
            elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
                cur = cur[int(part)]
            elif default is not ...:
                return default
            else:
                raise ValueError(f"{self.path}: field {dotted!r} missing")
        return cur


def _n(x: Any, digits: int = 3) -> str:
    """A number as the table shows it: ints as they are, floats to `digits` decimals, no trailing 0s."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or isinstance(x, int):
        return str(x)
    s = f"{x:.{digits}f}"
    return s.rstrip("0").rstrip(".") if "." in s else s


def _ci(pair: list) -> str:
    return f"[{_n(pair[0])}, {_n(pair[1])}]"


def lm_overhead(f: Field) -> tuple[str, str]:
    runs = {r["threads"]: r["ratio"] for r in f("runs")}
    r0 = f("runs.0")
    parts = [f"{_n(r)} at {t} thread{'s' if t > 1 else ''}" for t, r in sorted(runs.items())]
    res = f"wall/ideal {', '.join(parts)} [≤ {_n(f('goal_ratio'))} at 8]"
    if f("goal_budget_delta", None) is not None:  # the same with a budget set (a spend meter admitting each call)
        with_budget = ", ".join(f"{_n(r['ratio_with_budget'])} at {r['threads']}" for r in f("runs"))
        res += (f"; with a budget set {with_budget} (difference at most {_n(f('budget_delta_max'), 4)}; "
                f"admit + settle {_n(f('admit_settle_us'), 1)} µs a call")
        if f("budget_cpu", None) is not None:  # the budget's own CPU per call bounds what it adds at 8 threads
            res += (f", {_n(f('budget_cpu')['budget_us_per_call'], 1)} µs CPU a call in all, at most "
                    f"{_n(f('budget_delta_bound_at_8_threads'), 4)} at 8 threads")
        res += f") [within {_n(f('goal_budget_delta'))}]"
    return (f"framework overhead: {r0['calls']} calls, {_n(r0['latency_ms'])} ms fake LM", res)


def embedded_lm(f: Field) -> tuple[str, str]:
    return (f"embedded SmolLM2-135M, JSON-constrained, {f('n')} predicts",
            f"{_n(f('predicts_per_min'), 1)} predicts/min, {f('parse_failures')} parse failures, "
            f"{_n(f('peak_rss_mb'), 0)} MB peak RSS [≥ {f('goal_per_min')}/min]")


def sandbox(f: Field) -> tuple[str, str]:
    rounds = f("launchers.rounds", None)
    res = (f"median {_n(f('median_ms_per_task'), 1)} ms/task"
           + (f" (median of {rounds} rounds' medians)" if rounds else "")
           + f", p90 {_n(f('p90_ms_per_task'), 1)} ms, "
           f"{_n(f('cpu_ms_per_task'), 1)} ms CPU; plain `subprocess` "
           f"{_n(f('baseline_plain_subprocess_ms_per_task'), 2)} ms; {f('tasks')} tasks in {_n(f('wall_s'), 1)} s")
    rt = f("trivial_at_realtime_priority", None)
    if f("ratio_vs_plain_same_commands", None) is not None:  # the same gold pair, plain, fresh fixture copies
        res += (f"; the same commands by plain `bash -c`, each on a fresh fixture copy: "
                f"{_n(f('baseline_plain_same_commands_ms_per_task'), 1)} ms/task, sandbox "
                f"{_n(f('ratio_vs_plain_same_commands'), 2)}× that ({_n(f('ratio_vs_plain_same_commands_bash_only'), 2)}× "
                f"the two `bash -c` alone)")
    if f("compared", None) is not None:  # per task: not the same work on both sides (see the JSON)
        res += (f"; per task {_n(f('ratio_vs_plain_subprocess'), 2)}× two `bash -c 'echo hello'`"
                + (f", at real-time priority {_n(rt['ratio_per_task'], 2)}×" if rt and "ratio_per_task" in rt else ""))
    lc = f("launchers", None)
    if lc and "bwrap" in lc and "vf-sandbox" in lc:
        res += (f"; vf-sandbox vs bubblewrap, interleaved: {_n(lc['vf-sandbox']['median_ms_per_task'], 1)} vs "
                f"{_n(lc['bwrap']['median_ms_per_task'], 1)} ms/task ({_n(lc['vf-sandbox']['ratio_per_task'], 2)}× vs "
                f"{_n(lc['bwrap']['ratio_per_task'], 2)}× plain), trivial pair "
                f"{_n(lc['vf-sandbox']['trivial_pair_ms'], 2)} vs {_n(lc['bwrap']['trivial_pair_ms'], 2)} ms "
                f"({_n(lc['vf-sandbox']['ratio_trivial'], 2)}× vs {_n(lc['bwrap']['ratio_trivial'], 2)}×)")
    if f("cpu_ratio_trivial_vs_plain_subprocess", None) is not None:
        b = f("breakdown")
        res += (f"; trivial pair vs two plain `bash -c`: wall {_n(f('ratio_trivial_vs_plain_subprocess'), 1)}×, "
                f"CPU {_n(f('cpu_ratio_trivial_vs_plain_subprocess'), 1)}×"
                + (f", wall at real-time priority (the load kept out) {_n(rt['ratio'], 2)}× "
                   f"({_n(rt['sandbox_pair_ms'], 1)} vs {_n(rt['plain_pair_ms'], 2)} ms)" if rt else "")
                + f" ({b['mode']}; per run: prepare "
                f"{_n(b['phases_ms']['prepare_ms'], 2)}, exec {_n(b['phases_ms']['exec_ms'], 1)}, diff "
                f"{_n(b['phases_ms']['diff_ms'], 2)}, cleanup {_n(b['phases_ms']['cleanup_ms'], 2)} ms"
                + (f"; a fresh copy instead: prepare {_n(b['phases_ms_fresh_copy']['prepare_ms'], 2)}, diff "
                   f"{_n(b['phases_ms_fresh_copy']['diff_ms'], 2)}, cleanup "
                   f"{_n(b['phases_ms_fresh_copy']['cleanup_ms'], 2)} ms" if "phases_ms_fresh_copy" in b else "")
                + "; CPU ms per run: " + ", ".join(f"{k} {_n(v['cpu_ms'], 1)}" for k, v in b["chain"].items())
                + ("; one exec's start, ms: " + ", ".join(f"{k[:-3].replace('_', ' ')} {_n(v, 2)}"
                                                          for k, v in b["exec_start"].items())
                   if b.get("exec_start") else "")
                + (f"; trivial pair started by the launcher's fork server vs the launcher exec'd: "
                   f"{_n(b['fork_server']['on_pair_ms'], 2)} vs {_n(b['fork_server']['off_pair_ms'], 2)} ms, CPU "
                   f"{_n(b['fork_server']['on_pair_cpu_ms'], 1)} vs {_n(b['fork_server']['off_pair_cpu_ms'], 1)} ms"
                   if b.get("fork_server") else "")
                + (f"; the floor, a minimal launcher in C doing the same namespaces and mounts (no bwrap, no "
                   f"Python): trivial pair {_n(b['floor']['floor_pair_ms'], 2)} ms vs two plain fork + exec "
                   f"{_n(b['floor']['harness_plain_pair_ms'], 2)} ms ({_n(b['floor']['floor_pair_ratio_to_harness_plain'], 2)}×); "
                   f"the sandbox's trivial pair {_n(b['floor']['sandbox_pair_ms'], 2)} ms"
                   if b.get("floor") else "")
                + f"); sysadmin "
                f"mode {_n(f('sysadmin.trivial_ms'), 0)} ms trivial, {_n(f('sysadmin.useradd_ms'), 0)} ms useradd")
    return (f"sandbox, {f('tasks')} NL2SH-ALFA tasks (gold + gold2 + FS diffs)",
            res + f" [≤ {f('goal_ms_per_task')} ms; ≤ {_n(f('goal_ratio', 3.0))}× plain]")


def feh_speed(f: Field) -> tuple[str, str]:
    parts = [f"{k.replace('_', ' ')} {_n(v['ms_per_pair'], 0)} ms (compare {_n(v['compare_ms'], 1)} ms, {v['rule']})"
             for k, v in f("feh").items()]
    return ("FEH per pair: sandbox runs + comparison, equal outputs never embedded", "; ".join(parts))


def cold_cli(f: Field) -> tuple[str, str]:
    heavy = ", ".join(f("heavy_modules_imported")) or "none of torch, DSPy, MLflow"
    return ("cold `verifirst verify bash`, one pair with equal outputs, fresh interpreter",
            f"median {_n(f('median_s'), 2)} s over {f('runs')} runs (max {_n(f('max_s'), 2)} s); heavy "
            f"imports: {heavy} [≤ {_n(f('goal_s'), 1)} s]")


def sandbox_gold(f: Field) -> tuple[str, str]:
    n = f("tasks")
    ok = n - f("gold_nonzero")
    why = ", ".join(f"{k} {v}" for k, v in sorted(f("gold_nonzero_by_reason").items(), key=lambda kv: -kv[1]))
    undecided = f("gold_vs_gold_feh_inconclusive", 0)
    return ("gold commands in the sandbox, run twice",
            f"{ok}/{n} exit 0 (the others: {why}); gold vs gold re-run byte-identical "
            f"{f('gold_vs_gold_identical')}/{n}, judged equivalent by FEH {f('gold_vs_gold_feh_equivalent')}/{n}"
            + (f", inconclusive {undecided}" if undecided else "")
            + (f"; each gold under vf-sandbox and under bubblewrap: stdout, stderr, exit code and FS diff "
               f"identical {f('launchers_identical')}/{n}, and of the others "
               f"{len(f('launchers_differ_beyond_reruns'))} differ beyond what re-runs do ("
               + ", ".join(sorted({x['gold'] for x in f('launchers_differ_beyond_reruns')})) + ")"
               if f("launchers_identical", None) is not None else "")
            + f" [≥ {_n(100 * f('goal_rate'), 0)}%]")


def iac_verify(f: Field) -> tuple[str, str]:
    b = {x["backend"]: x for x in f("backends")}
    parts = []
    if "python" in b:
        parts.append(f"pure Python {_n(b['python']['ms_per_config']['median'], 1)} ms/config")
    if "terraform" in b:
        s = f"terraform + schema provider {_n(b['terraform']['ms_per_config']['median'], 0)} ms/config " \
            "with one provider process"
        if "terraform-naive" in b:
            s += f" ({_n(b['terraform-naive']['ms_per_config']['median'] / 1000, 2)} s restarting it per config)"
        parts.append(s)
    for name, why in sorted(f("skipped").items()):
        if name != "real":  # no real AWS provider offline: expected, not a gap in this table
            parts.append(f"{name} skipped: {why}")
    agree = [a for a in f("agreement") if a["pair"] == "terraform vs python"]
    if agree:
        parts.append(f"stage and class agreement {agree[0]['stage_and_class_agreement']:.2f}")
    goals = f("goals")
    goal = "; ".join(f"{k} ≤ {v} ms" for k, v in goals.items() if v is not None)
    return (f"Terraform verifier, {f('configs')} configs ({f('suite')}{' + probes' if f('suite') == 'dev40' else ''})",
            "; ".join(parts) + (f" [{goal}]" if goal else ""))


def cache(f: Field) -> tuple[str, str]:
    return (f"second identical run ({f('items')} items, GEPA {f('gepa_budget')} metric calls, "
            f"{f('model').split(' (')[0]} model)",
            f"{f('second_lm_calls')} LM calls; wall ratio {_n(f('wall_ratio'))} "
            f"({_n(f('wall_ratio_without_html_report'))} without the HTML plots); first run "
            f"{_n(f('first.wall_s'), 1)} s [{f('goal_second_lm_calls')} calls; ≤ {_n(f('goal_wall_ratio'))}]")


def estimate(f: Field) -> tuple[str, str]:
    names = {"gepa": "GEPA", "autorefine": "AutoRefine"}
    full, bound = [], []
    for s in f("scenarios"):
        roles = ", ".join(f"{r} {v['estimate']} vs {v['actual']}" for r, v in s["per_role"].items())
        if s["kind"] == "full":
            full.append(f"{names.get(s['name'], s['name'])}: {roles}")
        else:
            bound.append(f"{s['name']} {'holds' if s['goal_met'] else 'FAILS'}")
    return ("dry-run spend estimate vs the same scripted run: LM calls per role, estimate vs actual",
            "; ".join(full) + f"; worst error {_n(f('worst_rel_error_full_runs'))}; runs that stop early: the "
            f"'up to' counts as bounds ({', '.join(bound)}); the dry runs "
            + ("called no model and wrote nothing" if f("dry_runs_called_no_model") and f("dry_runs_wrote_nothing")
               else "CALLED A MODEL OR WROTE FILES") + f" [≤ {_n(f('tolerance'), 2)} per role]")


def _probe(f: Field) -> str:
    """False equivalences on held-out data before -> after INCONCLUSIVE, per fixture."""
    probe = f("headline.new_user_probe", None)
    if not probe:
        return ""
    where = {"own": "in the tasks' own fixtures", "empty": "in an empty fixture"}
    parts = []
    for k, p in probe.items():
        undecided = f" ({p['inconclusive_after']} INCONCLUSIVE)" if p.get("inconclusive_after") else ""
        parts.append(f"{p['false_equivalent_before']} → {p['false_equivalent_after']}{undecided} {where.get(k, k)}")
    n = next(iter(probe.values()))["pairs"]
    return (f"; new-user probe, {n} held-out {f('new_user_probe.data', 'tasks').split(' (')[0]} golds each "
            f"against another task's: false equivalences {', '.join(parts)}")


def feh_quality(f: Field) -> tuple[str, str]:
    pairs = f("pairs")
    h = f("headline", None)
    if h is None:  # results from before INCONCLUSIVE verdicts: every pair is scored
        s0 = f("cv.seed0")
        res = (f"held-out ({f('cv.folds')}-fold CV) accuracy {_n(s0['accuracy'])} {_ci(s0['wilson95'])}, "
               f"P {_n(s0['precision'])}, R {_n(s0['recall'])}, F1 {_n(s0['f1'])}")
    else:
        rotated = pairs - f("equivalent_pairs")
        res = (f"held-out ({f('cv.folds')}-fold CV): {h['inconclusive']} of {h['pairs']} pairs INCONCLUSIVE "
               f"(counted apart); on the conclusive ones accuracy {_n(h['accuracy_conclusive'])} "
               f"{_ci(h['wilson95_conclusive'])}, P {_n(h['precision'])}, R {_n(h['recall'])}, F1 {_n(h['f1'])} "
               f"(INCONCLUSIVE off: accuracy {_n(h['accuracy_before'])} on all {h['pairs']}); false equivalences "
               f"on the {rotated} rotated pairs {_n(h['false_equivalence_rotated_before'])} → "
               f"{_n(h['false_equivalence_rotated_after'])}" + _probe(f))
    llm = f("llm", None)
    if llm:
        res += f"; with the {llm['spec']} LLM check: confirm {_n(llm['confirm']['accuracy'])}, " \
               f"arbiter {_n(llm['arbiter']['accuracy'])}"
    res += (f"; exact stdout {_n(f('exact_stdout.accuracy'))}; a naive exec+MiniLM prototype "
            f"{_n(f('naive_prototype.accuracy'))} [≥ 0.92]")
    return f"FEH quality, {pairs} NL2SH-ALFA pairs", res


def feh_sysinfo_probe(f: Field) -> tuple[str, str]:
    b, a = f("before"), f("after")
    ne_b, ne_a, eq_b, eq_a = b["not_equivalent"], a["not_equivalent"], b["equivalent"], a["equivalent"]
    return (f"FEH on system tasks: {f('tasks')} tasks (users, groups, permissions, dates and zones, host and "
            f"kernel, disk, processes), rules of {f('baseline_rev')} → today's on the same runs",
            f"false equivalences on {ne_a['pairs']} rotated golds {ne_b['passed']} ({_n(ne_b['false_equivalence_rate'])}) "
            f"→ {ne_a['passed']} ({_n(ne_a['false_equivalence_rate'])}); equivalent rewrites passing "
            f"{eq_b['passed']}/{eq_b['pairs']} → {eq_a['passed']}/{eq_a['pairs']}; {f('params')} [≤ 0.05]")


def demo(f: Field) -> tuple[str, str]:
    t = f("splits.test", None)
    tail = ""
    if t:
        b, a = t["before"], t["after"]
        tail = f"; test split pass {b['pass']}/{b['scored']} → {a['pass']}/{a['scored']} scored of {t['n']}"
    return ("`verifirst demo` end to end, fresh workdir",
            f"{_n(f('wall_s'), 0)} s, {_n(f('run_wall_s'), 0)} s of it in the run ({f('lm_calls')} LM calls, "
            f"{f('lm_errors')} errors{tail})")


def scale(f: Field) -> tuple[str, str]:
    parts = []
    for v, what in (("bash", "bash (FEH)"), ("terraform", "terraform")):
        threads = ", ".join(f"{_n(r['items_per_s'], 1)} at {r['threads']}" for r in f(f"{v}.threads"))
        ray = ", ".join(f"{_n(r['items_per_s'], 1)} at {r['workers']} ({_n(r['efficiency'], 2)})" for r in f(f"{v}.ray"))
        parts.append(f"{what} items/s: threads {threads}; Ray workers {ray}")
    ov = f("overhead")
    parts.append(f"Ray per-task overhead {_n(ov['ray_per_task_overhead_ms'], 2)} ms against a thread "
                 f"({_n(ov['ray_ms_per_item'], 2)} vs {_n(ov['thread_ms_per_item'], 2)} ms per exact-match item); "
                 f"local cluster start {_n(f('local_cluster_start_s'), 1)} s")
    return (f"scale-out, no LM: {f('bash.items')} bash-pack golds, {f('terraform.items')} IaC references "
            "(pure Python); Ray efficiency per worker in parentheses", "; ".join(parts))


def cost_objective(f: Field) -> tuple[str, str]:
    c, q = f("cheapest_not_worse"), f("quality")
    return (f"cost objective, scripted models priced like {f('priced_like.local/cheap')} and "
            f"{f('priced_like.local/dear')}, {f('items')} items, margin {_n(f('margin'))}",
            f"cheapest-not-worse chose {c['chosen']} at {_n(c['cost_ratio'], 3)}× the reference's USD per item "
            f"on test (Δ pass rate {_n(c['test_delta_pass_rate'])} {_ci(c['test_delta_ci95'])}, McNemar p "
            f"{_n(c['test_mcnemar_p'])}); objective=\"quality\": {q['model']} at {_n(q['test_pass_rate'])} pass "
            f"rate; saves {_n(f('saving_vs_quality_per_item') * 1e6, 1)} µUSD per item, gives up "
            f"{_n(f('pass_rate_given_up_vs_quality'))} pass rate; no prompt fixes the cheap model: "
            f"{f('unfixable.chosen')} kept; dry-run estimate within {_n(f('worst_estimate_rel_error'))} of calls made "
            f"[≤ {_n(f('tolerance'))}]")


def reward_hacks(f: Field) -> tuple[str, str]:
    def per(part: str, good: str) -> str:
        return ", ".join(f"{name} {v.get(good, 0)}" for name, v in f(f"{part}.attacks").items())

    consts = ", ".join(f"{name} {v.get('equivalent', 0)}" for name, v in f("feh.constants").items())
    return (f"reward hacks: task-blind candidates against FEH ({f('feh.tasks')} NL2SH-ALFA tasks, llm off) and "
            f"bash-tests ({f('bash_tests.tasks')} EAbench-layout tasks), {f('backend')}",
            f"attacks judged equivalent: {f('feh.attacks_judged_equivalent')} ({per('feh', 'equivalent')}); "
            f"attacks passing the task's check: {f('bash_tests.attacks_passed')} ({per('bash_tests', 'pass')}); "
            f"constant outputs judged equivalent (weak tests, not hacks): {consts} [attacks: 0]")


def tf_provider_agreement(f: Field) -> tuple[str, str]:
    parts = []
    for p, r in f("providers").items():
        ms = r["ms_per_config"]
        parts.append(f"{p}: stage agreement {_n(r['stage_agreement'])} (with classes "
                     f"{_n(r['stage_and_class_agreement'])}), right {r['right']['python']} python, "
                     f"{r['right']['terraform']} terraform of {r['cases']}; {_n(ms['python']['median'], 1)} ms "
                     f"pure Python, {_n(ms['terraform']['median'], 0)} ms terraform + schema provider per config")
    g = f("goals_ms")
    return ("Terraform beyond AWS: valid configs and one faulty variant per fault class (6 classes) per provider, "
            "python vs terraform backend", "; ".join(parts) + f" [≥ 0.98; ≤ {g['python']} ms, ≤ {g['terraform']} ms]")


@dataclass(frozen=True)
class Row:
    name: str  # results file stem
    command: str  # how to rerun it by hand (prints the same JSON)
    render: Callable[[Field], tuple[str, str]]


ROWS = (
    Row("lm_overhead", "python benchmarks/perf/lm_overhead.py --json", lm_overhead),
    Row("embedded_lm", "python benchmarks/perf/embedded_lm.py --json", embedded_lm),
    Row("sandbox", "python benchmarks/perf/sandbox.py", sandbox),
    Row("sandbox_gold", "python benchmarks/perf/sandbox.py --gold-report", sandbox_gold),
    Row("sandbox", "python benchmarks/perf/sandbox.py", feh_speed),  # the same run's FEH part
    Row("cold_cli", "python benchmarks/perf/cold_cli.py", cold_cli),
    Row("iac_verify", "python benchmarks/perf/iac_verify.py --json", iac_verify),
    Row("tf_provider_agreement", "python benchmarks/studies/tf_provider_agreement.py --json", tf_provider_agreement),
    Row("cache", "python benchmarks/perf/cache.py --json", cache),
    Row("estimate", "python benchmarks/perf/estimate.py --json", estimate),
    Row("feh_quality", "python benchmarks/studies/feh_quality.py --json", feh_quality),
    Row("feh_sysinfo_probe", "python benchmarks/studies/feh_sysinfo_probe.py --baseline-rev 2dd8c97",
        feh_sysinfo_probe),
    Row("demo", "python benchmarks/perf/demo.py", demo),
    Row("scale", "python benchmarks/perf/scale.py --json", scale),
    Row("cost_objective", "python benchmarks/perf/cost_objective.py", cost_objective),
    Row("reward_hacks", "python benchmarks/perf/reward_hacks.py", reward_hacks),
)


def results_path(name: str, results: Path = RESULTS) -> Path:
    return results / f"{name}.json"


def _rel(p: Path) -> str:
    try:
        return p.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return p.as_posix()


def _measured(f: Field) -> str:
    m = f("machine")
    end = f" → {_n(m['loadavg_end'][0], 1)}" if m.get("loadavg_end") else ""
    return f"{m['date'][:10]}, {m['nproc']} cores, load {_n(m['loadavg_start'][0], 1)}{end}"


def rendered_rows(results: Path = RESULTS) -> list[tuple[Row, str, str, Field]]:
    """(row, what, result, fields) for every benchmark; ValueError names a missing or bad file.

    Args:
        results: the directory holding <name>.json for every row.
    """
    from verifirst.benchmarks.perf.record import load_result

    out = []
    for row in ROWS:
        path = results_path(row.name, results)
        f = Field(path, load_result(path))
        try:
            what, res = row.render(f)
        except (KeyError, TypeError, IndexError) as e:  # a field of the wrong shape
            raise ValueError(f"{path}: unexpected content ({type(e).__name__}: {e})") from None
        out.append((row, what, res, f))
    return out


def render_table(results: Path = RESULTS) -> str:
    """The Markdown that goes between the README's perf-table markers.

    Args:
        results: the directory holding the results files.
    """
    lines = ["Rendered by `make bench` from `benchmarks/perf/results/` (each row links its file); the last",
             "column gives the date, the cores and the 1-minute load average when the benchmark started (→ when",
             "it ended): the machine is shared, and wall-clock figures move with its load. Goals in brackets.", "",
             "| what | command | result | measured |", "|---|---|---|---|"]
    notes = []
    for row, what, res, f in rendered_rows(results):
        link = _rel(results_path(row.name, results))
        lines.append(f"| {what} | `{row.command}` | {res} ([json]({link})) | {_measured(f)} |")
        if row.name == "lm_overhead":
            notes += ["", overhead_note(f)]
    return "\n".join(lines + notes)


def overhead_note(f: Field) -> str:
    per_call = ", ".join(f"{_n(r['overhead_ms_per_call'], 1)} ms at {r['threads']}" for r in f("runs"))
    return ("The framework overhead per call (" + per_call + " threads) is mostly DSPy's own per-call\n"
            "work (Python under the GIL, more when a core wakes from a 50 ms sleep); verifirst's own part per\n"
            "item is scoring, usage accounting and, in a run directory, one checkpoint line.")


def replace_block(text: str, block: str, where: str = "README.md") -> str:
    """`text` with everything between the markers replaced by `block`.

    Args:
        text: the README.
        block: what goes between the markers.
        where: the file name for errors.
    """
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise ValueError(f"{where}: needs exactly one {BEGIN} and one {END} "
                         f"(found {text.count(BEGIN)} and {text.count(END)})")
    head, rest = text.split(BEGIN)
    if END not in rest:
        line = text[:text.index(END)].count("\n") + 1
        raise ValueError(f"{where}:{line}: {END} comes before {BEGIN}")
    _, tail = rest.split(END)
    return f"{head}{BEGIN}\n{block}\n{END}{tail}"


def current_block(text: str, where: str = "README.md") -> str:
    """What the README has between the markers now (without the marker lines' newlines).

    Args:
        text: the README.
        where: the file name for errors.
    """
    replace_block(text, "", where)  # validates the markers
    return text.split(BEGIN)[1].split(END)[0].strip("\n")


def summary(results: Path = RESULTS) -> str:
    return "\n".join(f"{row.name:<13} {res}" for row, _, res, _ in rendered_rows(results))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write", type=Path, metavar="README", help="rewrite the table in this file")
    g.add_argument("--check", type=Path, metavar="README", help="exit 1 when this file's table is stale")
    ap.add_argument("--summary", action="store_true", help="print one line per benchmark")
    ap.add_argument("--results", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    target = a.write or a.check
    try:
        block = render_table(a.results)
        if target is None:
            print(summary(a.results) if a.summary else block)
            return 0
        text = target.read_text(encoding="utf-8")
        new = replace_block(text, block, str(target))
    except (ValueError, OSError) as e:
        print(f"readme_table: {e}", file=sys.stderr)
        return 2
    if a.check:
        stale = new != text
        print(f"{target}: Performance table {'is stale against' if stale else 'matches'} {_rel(a.results)}"
              + (" (run `make bench`, or --write to re-render)" if stale else ""), file=sys.stderr)
        return 1 if stale else 0
    if new != text:
        from verifirst.core.atomic import write_text

        write_text(target, new)
    if a.summary:
        print(summary(a.results))
    print(f"{target}: Performance table rendered from {_rel(a.results)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
