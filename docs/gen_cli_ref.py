"""The command-line reference page, generated from the typer app in verifirst/cli.py: every verb's
usage, help text, arguments and options, as `verifirst VERB --help` shows them.

    python docs/gen_cli_ref.py    # print the page (the docs build runs it through docs/hooks.py)
"""
from __future__ import annotations

import inspect
from typing import Any, Iterator

INTRO = """# Command line

`verifirst --help` lists the verbs; each has `--help` with an example. Bad input (a file that
does not parse, an unknown name, a value out of range) exits 2 with a message naming the file and
line or the option, and writes nothing. Each verb's options make one typed request
(`verifirst.requests`), checked whole before the verb reads, writes or starts anything; a refusal
reads `[--option]: got VALUE (expected: WHAT)`, and nan or inf is refused for every number.

This page is generated from the command-line app (`verifirst/cli.py`).
"""


# Typer may carry its own copy of click: commands are read by duck typing, not isinstance.
def _is_group(cmd: Any) -> bool:
    return hasattr(cmd, "list_commands")


def _context(cmd: Any, name: str, parent: Any = None) -> Any:
    return cmd.context_class(cmd, info_name=name, parent=parent)


def _walk(cmd: Any, ctx: Any) -> Iterator[tuple[Any, Any]]:
    yield cmd, ctx
    if _is_group(cmd):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _walk(sub, _context(sub, name, ctx))


def _cell(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def _default(param: Any) -> str:
    value = param.default
    if value is None or value is False or callable(value) or param.name == "help":
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(f"`{v}`" for v in value) if value else ""
    return f"`{value}`"


def _kind(param: Any) -> str:
    """The value type as --help shows it: flag, str, int, path, ..."""
    import typing

    if getattr(param, "is_flag", False) or getattr(param, "is_bool_flag", False):
        return "flag"
    ann = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if ann is None:  # a click parameter
        return getattr(getattr(param, "type", None), "name", "text").lower()
    args = [a for a in typing.get_args(ann) if a is not type(None)]
    if typing.get_origin(ann) in (typing.Union, getattr(__import__("types"), "UnionType", None)) and len(args) == 1:
        ann = args[0]
    if ann is bool:
        return "flag"
    origin = typing.get_origin(ann)
    if origin in (list, typing.List):
        return f"list of {getattr(typing.get_args(ann)[0], '__name__', 'text').lower()}"
    return getattr(ann, "__name__", str(ann)).lower()


def params_table(cmd: Any, ctx: Any) -> str:
    """Arguments and options of one command as a Markdown table."""
    rows = []
    for p in cmd.get_params(ctx):
        if p.param_type_name == "argument":
            name = f"`{(p.metavar or p.name).upper()}`"
        else:
            name = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
        kind = _kind(p)
        req = " (required)" if p.required else ""
        rows.append(f"| {name}{req} | {kind} | {_default(p)} | {_cell(getattr(p, 'help', None))} |")
    if not rows:
        return ""
    return "\n".join(["| argument or option | type | default | meaning |", "|---|---|---|---|", *rows])


def command_section(cmd: Any, ctx: Any) -> str:
    """One verb: heading, usage line, help text, parameters."""
    path = ctx.command_path
    usage = " ".join([path, *cmd.collect_usage_pieces(ctx)])
    text = inspect.cleandoc(cmd.help or "")
    level = "#" * min(2 + path.count(" ") - 1, 4) if " " in path else "##"
    parts = [f"{level} `{path}`", "", "```text", usage, "```", "", text]
    table = params_table(cmd, ctx)
    if table:
        parts += ["", table]
    return "\n".join(parts) + "\n"


def page() -> str:
    """The whole page, Markdown."""
    import typer

    from verifirst.cli import app

    root = typer.main.get_command(app)
    root_ctx = _context(root, "verifirst")
    sections = [INTRO]
    for cmd, ctx in _walk(root, root_ctx):
        if cmd is root:
            sections.append("## `verifirst`\n\n" + inspect.cleandoc(root.help or "") + "\n\n"
                            + params_table(root, ctx) + "\n")
        elif _is_group(cmd):
            sections.append(f"## `{ctx.command_path}`\n\n{inspect.cleandoc(cmd.help or '')}\n")
        else:
            sections.append(command_section(cmd, ctx))
    return "\n".join(sections)


if __name__ == "__main__":
    print(page())
