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


def _measured(machine: dict) -> str:
    end = f" → {machine['loadavg_end'][0]:.1f}" if machine.get("loadavg_end") else ""
    return f"{machine['date'][:10]}, {machine['nproc']} cores, load {machine['loadavg_start'][0]:.1f}{end}"


def benchmarks_table(results: Path | None = None) -> str:
    """The README's rows: what, command, result, results file, conditions. A results file that
    does not render shows its error in its row (the docs test fails on it; the page still builds)."""
    from verifirst.benchmarks.perf import readme_table as rt
    from verifirst.benchmarks.perf.record import load_result

    lines = ["| what | command | result | measured |", "|---|---|---|---|"]
    for row in rt.ROWS:
        path = rt.results_path(row.name, results or rt.RESULTS)
        try:
            f = rt.Field(path, load_result(path))
            what, result = row.render(f)
            measured = _measured(f("machine"))
        except (ValueError, KeyError, TypeError, IndexError) as e:
            what, result, measured = row.name, f"NOT RENDERED: {e}", ""
        lines.append(f"| {what} | `{row.command}` | {result} (`results/{row.name}.json`) | {measured} |")
    return "\n".join(lines)


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
                      "## Install size", "",
                      "A fresh venv per install, from a copy of the checkout (`python benchmarks/perf/install.py`). "
                      "The base install needs no compiler; `local` adds llama-cpp-python, which builds from "
                      "source where pip has no cached wheel of it.", "",
                      install_table(results), ""])


if __name__ == "__main__":
    print(page())
