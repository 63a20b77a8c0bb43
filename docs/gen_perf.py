"""The performance page, rendered from the committed results in benchmarks/perf/results/*.json
(the same renderer as the README's table, plus the install sizes).

    python docs/gen_perf.py    # print the page (the docs build runs it through docs/hooks.py)
"""
from __future__ import annotations

from pathlib import Path

INTRO = """# Performance

Every number here is read from a results file in `benchmarks/perf/results/`, written by the
benchmark named beside it (`make bench` reruns them all). Each file records the date, the cores
and the 1-minute load average when the benchmark started (→ when it ended): the machine is
shared, and wall-clock figures move with its load. Goals in brackets.
"""

# Hand-written from the probe's runs before and after a fix (two runs, two code versions).
FEH_FALSE_EQUIVALENCES = """FEH false equivalences (`python benchmarks/studies/feh_false_equiv.py --label after`, the same probe
on the code before the issue-24 fixes as `before`; not-equivalent pairs judged equivalent,
INCONCLUSIVE counted apart; `results/feh_false_equiv.json`, 2026-12-04, 2 cores):

| pairs (not equivalent) | before | after |
|---|---|---|
| NL2SH-ALFA, 300 rotated (accuracy on conclusive pairs, 5-fold CV) [≥ 0.92] | 13 (acc 0.924, 20 INCONCLUSIVE) | 13 (acc 0.924, 19 INCONCLUSIVE) |
| InterCode-Bash, 224 golds against another task's, own fixtures | 8 (2 INCONCLUSIVE) | 8 (1 INCONCLUSIVE) |
| synthetic: empty prerequisites (4) | 4 | 0 |
| synthetic: files the setup creates (5) | 3 | 0 |
| synthetic: usage lines of argument scripts run without arguments (3) | 1 | 0 (3 INCONCLUSIVE) |
| synthetic: argument scripts given their arguments (2) | 0 | 0 |
| synthetic: user/group administration (6; before in the empty fixture, after in `sysadmin`) | 4 | 0 (none INCONCLUSIVE; each gold equivalent to itself, 6 of 6) |
| all, 544 [≤ 5%] | 33 (6.1%) | 21 (3.9%) |

On the 13 EAbench-layout tasks of `tests/data/eabench_tiny` (each gold and the next task's script,
26 pairs), FEH agrees with the tasks' own checks (`bash-tests`) on 25; the miss is a wrong script
whose output shares the driver's `#++` variable line with the gold's, which the output cosine passes.
"""


def _measured(machine: dict) -> str:
    end = f" → {machine['loadavg_end'][0]:.1f}" if machine.get("loadavg_end") else ""
    return f"{machine['date'][:10]}, {machine['nproc']} cores, load {machine['loadavg_start'][0]:.1f}{end}"


def benchmarks_table(results: Path | None = None) -> str:
    """The README's rows: what, command, result, results file, conditions. A results file that
    does not render shows its error in its row (the docs test fails on it; the page still builds)."""
    from verifirst.benchmarks.perf import readme_table as rt
    from verifirst.benchmarks.perf.record import load_result

    lines = ["| what | command | result | measured |", "|---|---|---|---|"]
    notes = []
    for row in rt.ROWS:
        path = rt.results_path(row.name, results or rt.RESULTS)
        try:
            f = rt.Field(path, load_result(path))
            what, result = row.render(f)
            measured = _measured(f("machine"))
            if row.name == "lm_overhead":
                notes += ["", rt.overhead_note(f)]
        except (ValueError, KeyError, TypeError, IndexError) as e:
            what, result, measured = row.name, f"NOT RENDERED: {e}", ""
        lines.append(f"| {what} | `{row.command}` | {result} (`results/{row.name}.json`) | {measured} |")
    return "\n".join(lines + notes)


def install_table(results: Path | None = None) -> str:
    """Install time and venv size per install kind, from results/install.json (if measured)."""
    from verifirst.benchmarks.perf import readme_table as rt
    from verifirst.benchmarks.perf.record import load_result

    path = (results or rt.RESULTS) / "install.json"
    if not path.exists():
        return "No install measurement yet: run `python benchmarks/perf/install.py --out " \
               "benchmarks/perf/results/install.json`."
    data = load_result(path)
    lines = ["| install | time | venv size | distributions | built from source | wheels built here before, reused |",
             "|---|---|---|---|---|---|"]
    for name, run in data["runs"].items():
        built = ", ".join(run["built_from_source"]) or "nothing"
        reused = ", ".join(run.get("locally_built_wheels_reused", [])) or "none"
        lines.append(f"| `{name}` | {run['install_s']:.0f} s | {run['venv_mb']:,} MB | {run['distributions']} "
                     f"| {built} | {reused} |")
    note = data.get("pip_cache", "")
    return "\n".join(lines) + f"\n\nMeasured {_measured(data['machine'])}; pip cache: {note}."


def page(results: Path | None = None) -> str:
    """The whole page, Markdown.

    Args:
        results: the results directory (default: benchmarks/perf/results).
    """
    return "\n".join([INTRO, "## Benchmarks", "", benchmarks_table(results), "",
                      "## FEH false equivalences", "", FEH_FALSE_EQUIVALENCES,
                      "## Install size", "",
                      "A fresh venv per install, from a copy of the checkout (`python benchmarks/perf/install.py`). "
                      "The base install needs no compiler; `local` adds llama-cpp-python, which builds from "
                      "source where pip has no cached wheel of it.", "",
                      install_table(results), ""])


if __name__ == "__main__":
    print(page())
