"""Reading a command line: ``;``-separated pipelines, pipes, words and GNU-style short options,
and refusing every other shell construct. Nothing here touches the tree."""

from __future__ import annotations

import re
import shlex

from .limits import MAX_COMMANDS, MAX_LINE_CHARS, MAX_STAGES, SandboxError

SUPPORTED = "cat, find, grep, head, ls, pwd, sort, tail, uniq, wc"

# Unquoted shell constructs we refuse, longest first so '&&' is named before '&'.
_CONSTRUCTS = (
    ("&&", "command chaining '&&'"),
    ("||", "command chaining '||'"),
    ("$(", "command substitution '$(...)'"),
    ("${", "variable expansion '${...}'"),
    (">>", "redirection '>>'"),
    (">", "redirection '>'"),
    ("<", "redirection '<'"),
    ("&", "background job '&'"),
    ("`", "command substitution with backticks"),
    ("(", "subshell '('"),
    (")", "subshell ')'"),
    ("\n", "a newline (run one command line at a time)"),
)
_VARIABLE = re.compile(r"\$(?:\w+|[?#@*!$-])")
_SURROGATE = re.compile("[\ud800-\udfff]")
_COUNT = re.compile(r"\+?[0-9]+", re.ASCII)  # ASCII digits only: int('²') fails, '²'.isdigit() holds


def parse_line(line: str, commands: set[str]) -> list[list[list[str]]]:
    """The pipelines of ``line`` (separated by ``;``, run in order), each as the argv of its
    stages; every one is checked before any runs."""
    if "\0" in line:
        raise SandboxError("refused: NUL byte in command line")
    if _SURROGATE.search(line):  # undecodable bytes (a terminal's argv, escaped JSON) never name a file
        raise SandboxError("refused: the command line holds bytes that are not UTF-8 text")
    if len(line) > MAX_LINE_CHARS:
        raise SandboxError(f"refused: command line is {len(line):,} characters; "
                           f"the limit is {MAX_LINE_CHARS:,}")
    pipelines = [p for p in split_line(line) if p]
    if not pipelines:
        raise SandboxError("syntax error: empty command")
    if len(pipelines) > MAX_COMMANDS:
        raise SandboxError(f"refused: {len(pipelines)} commands joined with ';'; the limit is {MAX_COMMANDS}")
    parsed = []
    for stages in pipelines:
        if len(stages) > MAX_STAGES:
            raise SandboxError(f"refused: pipeline has {len(stages)} stages; the limit is {MAX_STAGES}")
        argvs = [_argv(stage) for stage in stages]
        for name, *_ in argvs:
            if name not in commands:
                raise SandboxError(f"{name}: command not found; supported: {SUPPORTED}, "
                                   "joined with | and ; (paths are relative to the tree root, /)")
        parsed.append(argvs)
    return parsed


def split_line(line: str) -> list[list[str]]:
    """Split on unquoted ';' (pipelines) and '|' (stages), and refuse every other unquoted shell
    construct. A pipeline of nothing but blanks (``ls;`` or ``;;``) is left out."""
    pipelines: list[list[str]] = []
    stages, start, quote, i = [], 0, "", 0
    while i < len(line):
        c = line[i]
        if quote:  # inside quotes everything is literal (no expansion happens here at all)
            if c == quote:
                quote = ""
            elif c == "\\" and quote == '"':
                i += 1
        elif c in "'\"":
            quote = c
        elif c == "\\":
            i += 1
        elif c == "|" and not line.startswith("||", i):
            stages.append(line[start:i])
            start = i + 1
        elif c == ";":
            stages.append(line[start:i])
            pipelines.append(stages)
            stages, start = [], i + 1
        else:
            what = next((w for tok, w in _CONSTRUCTS if line.startswith(tok, i)), None)
            if what is None and (var := _VARIABLE.match(line, i)):
                what = f"variable expansion {var.group()!r}"
            if what:
                raise SandboxError(f"refused: {what} is not supported; only '|' pipes and ';' lists are "
                                   "(quote special characters to use them literally)")
        i += 1
    pipelines.append(stages + [line[start:]])
    return [p for p in pipelines if not (len(p) == 1 and not p[0].strip())]


def _argv(stage: str) -> list[str]:
    try:
        argv = shlex.split(stage)
    except ValueError as e:
        raise SandboxError(f"syntax error: {e}") from None
    if not argv:
        raise SandboxError("syntax error: empty command in pipeline")
    return argv


def options(cmd: str, args: list[str], flags: str, valued: str = "",
            repeated: str = "") -> tuple[dict, list[str]]:
    """GNU-style short options anywhere on the line: '-ril', '-n 5', '-n5', '--'. A valued
    option in ``repeated`` collects every value in a list (grep -e A -e B)."""
    opts: dict[str, str | bool | list[str]] = {}
    operands: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            operands += args[i:]
            break
        if not arg.startswith("-") or arg == "-":
            operands.append(arg)
            continue
        if arg.startswith("--"):
            raise SandboxError(f"{cmd}: unsupported option {arg!r}; only short options work")
        for j, c in enumerate(arg[1:], start=1):
            if c in valued:
                value = arg[j + 1:]
                if not value:
                    if i == len(args):
                        raise SandboxError(f"{cmd}: option '-{c}' needs a value")
                    value, i = args[i], i + 1
                if c in repeated:
                    opts.setdefault(c, []).append(value)  # type: ignore[union-attr]
                else:
                    opts[c] = value
                break
            if c not in flags:
                supported = " ".join(f"-{f}" for f in flags + valued)
                raise SandboxError(f"{cmd}: unsupported option '-{c}'; supported: {supported}")
            opts[c] = True
    return opts, operands


def count(cmd: str, value: str, what: str, *, plus: bool = False) -> tuple[int, bool]:
    """A count given on the line (head -n 5, tail -n +5, find -maxdepth 2): (number, had '+').
    Only ASCII digits, with one leading '+' where ``plus``; anything else is refused by name."""
    if not _COUNT.fullmatch(value) or (value.startswith("+") and not plus):
        raise SandboxError(f"{cmd}: invalid {what}: {value!r}")
    return int(value), value.startswith("+")
