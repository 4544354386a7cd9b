"""Reading a command line: ``;``-separated pipelines, pipes, ``for NAME in WORDS; do ...; done``
loops (unrolled here, so every pipeline is checked before any runs), words and GNU-style short
options, and refusing every other shell construct. Nothing here touches the tree."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .limits import MAX_COMMANDS, MAX_LINE_CHARS, MAX_RUNS, MAX_STAGES, SandboxError

SUPPORTED = "cat, echo, find, grep, head, ls, pwd, sort, tail, uniq, wc"

# Unquoted shell constructs we refuse, longest first so '&&' is named before '&'.
_CONSTRUCTS = (
    ("&&", "command chaining '&&'"),
    ("||", "command chaining '||'"),
    ("$(", "command substitution '$(...)'"),
    (">>", "redirection '>>'"),
    (">", "redirection '>'"),
    ("<", "redirection '<'"),
    ("&", "background job '&'"),
    ("`", "command substitution with backticks"),
    ("(", "subshell '('"),
    (")", "subshell ')'"),
    ("\n", "a newline (run one command line at a time)"),
)
_NAMED = re.compile(r"\$(?:([A-Za-z_]\w*)|\{([A-Za-z_]\w*)\})")  # $NAME, ${NAME}: a loop's variable
_VARIABLE = re.compile(r"\$(?:\w+|[?#@*!$-]|\{[^}]*\}?)")  # every other expansion is refused
_LOOP = re.compile(r"\s*for\s+([A-Za-z_]\w*)\s+in(?:\s+(.*?))?\s*", re.DOTALL)
_REFUSAL = ("is not supported; only '|' pipes, ';' lists and 'for NAME in WORDS; do ...; done' loops are "
            "(quote special characters to use them literally)")
_SURROGATE = re.compile("[\ud800-\udfff]")
_COUNT = re.compile(r"\+?[0-9]+", re.ASCII)  # ASCII digits only: int('²') fails, '²'.isdigit() holds


def parse_line(line: str, commands: set[str], glob: Callable[[list[str]], list[str]] = list
               ) -> list[list[list[str]]]:
    """The pipelines of ``line`` (separated by ``;``, run in order, loops unrolled over their
    words, ``glob`` expanding them), each as the argv of its stages; every one is checked before
    any runs."""
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
    parsed: list[list[list[str]]] = []
    for stages in _unroll(_items(pipelines, inside=False), {}, [], glob):
        if len(stages) > MAX_STAGES:
            raise SandboxError(f"refused: pipeline has {len(stages)} stages; the limit is {MAX_STAGES}")
        argvs = [_argv(stage) for stage in stages]
        for name, *_ in argvs:
            if name not in commands:
                raise SandboxError(f"{name}: command not found; supported: {SUPPORTED}, "
                                   "joined with |, ; and for loops (paths are relative to the tree root, /)")
        parsed.append(argvs)
    return parsed


@dataclass
class _Loop:
    """``for NAME in WORDS; do BODY; done``: ``words`` as written (expanded when the loop unrolls)."""

    name: str
    words: str
    body: list


def _items(pipelines: list[list[str]], inside: bool) -> list:
    """Pipelines and loops, taken from the front of ``pipelines`` up to (and with) the ``done``
    that closes the loop we are ``inside``."""
    items: list = []
    while pipelines:
        stages = pipelines.pop(0)
        head = stages[0].split(None, 1)
        word = head[0] if head else ""
        if word == "done":
            if not inside:
                raise SandboxError("syntax error: 'done' without 'for'")
            if len(head) > 1 or len(stages) > 1:
                raise SandboxError("syntax error near 'done': a loop ends with '; done', and its output "
                                   "cannot be piped")
            return items
        if word in ("do", "if", "then", "else", "fi", "while", "until", "case", "esac", "function"):
            raise SandboxError(f"syntax error near {word!r}: the only compound command is "
                               "'for NAME in WORDS; do COMMANDS; done'")
        if word != "for":
            items.append(stages)
            continue
        loop = _LOOP.fullmatch(stages[0])
        opening = pipelines[0][0].split(None, 1) if pipelines else []
        if loop is None or len(stages) > 1 or len(opening) < 2 or opening[0] != "do":
            raise SandboxError("syntax error: a loop is 'for NAME in WORDS; do COMMANDS; done'")
        pipelines[0] = [opening[1], *pipelines[0][1:]]
        items.append(_Loop(loop.group(1), loop.group(2) or "", _items(pipelines, inside=True)))
    if inside:
        raise SandboxError("syntax error: 'for' without 'done'")
    return items


def _unroll(items: list, env: dict[str, str], out: list[list[str]], glob: Callable[[list[str]], list[str]]
            ) -> list[list[str]]:
    """The pipelines ``items`` run, loops unrolled with their variables' values in ``env``."""
    for item in items:
        if isinstance(item, _Loop):
            for value in glob(_words(_expand(item.words, env))):
                _unroll(item.body, {**env, item.name: value}, out, glob)
        else:
            if len(out) == MAX_RUNS:
                raise SandboxError(f"refused: this command line runs over {MAX_RUNS:,} pipelines "
                                   "(loops unrolled); split it")
            out.append([_expand(stage, env) for stage in item])
    return out


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as e:
        raise SandboxError(f"syntax error: {e}") from None


def _syntax(text: str) -> Iterator[tuple[int, str]]:
    """``(position, quote)`` of each character of ``text`` the shell could read as syntax, where
    ``quote`` is ``'"'`` inside double quotes and ``""`` outside any. Left out: whatever lies in
    single quotes (all literal), the quote characters that open and close a quote, and a
    backslash with the character it escapes (in or out of double quotes)."""
    quote, i = "", 0
    while i < len(text):
        c = text[i]
        if quote == "'":
            if c == "'":
                quote = ""
        elif c == "\\":
            i += 1
        elif c == '"' and quote:
            quote = ""
        elif c in "'\"" and not quote:
            quote = c
        else:
            yield i, quote
        i += 1


def _expand(text: str, env: dict[str, str]) -> str:
    """``$NAME`` / ``${NAME}`` of a loop variable replaced by its value, as one word (quoted
    again for the shell words that follow); single quotes keep it literal. An unknown name is
    refused outside quotes and kept as written inside double quotes."""
    out: list[str] = []
    start = 0
    for i, quote in _syntax(text):
        named = _NAMED.match(text, i) if text[i] == "$" and i >= start else None
        if named is None:
            continue
        name = named.group(1) or named.group(2)
        if name in env:
            value = env[name]
            out += [text[start:i], value.replace("\\", "\\\\").replace('"', '\\"') if quote else shlex.quote(value)]
            start = named.end()
        elif not quote:
            raise SandboxError(f"refused: variable expansion {named.group()!r} {_REFUSAL}")
    return "".join(out) + text[start:]


def split_line(line: str) -> list[list[str]]:
    """Split on unquoted ';' (pipelines) and '|' (stages), and refuse every other unquoted shell
    construct (``$NAME`` is left for the loops to expand). A pipeline of nothing but blanks (``ls;`` or ``;;``) is left out."""
    pipelines: list[list[str]] = []
    stages, start, past = [], 0, 0
    for i, quote in _syntax(line):
        c = line[i]
        if quote or i < past:  # inside double quotes everything is literal (nothing expands here)
            continue
        if c == "|" and not line.startswith("||", i):
            stages.append(line[start:i])
            start = i + 1
        elif c == ";":
            stages.append(line[start:i])
            pipelines.append(stages)
            stages, start = [], i + 1
        elif named := _NAMED.match(line, i):  # a loop's variable: checked when the loop unrolls
            past = named.end()
        else:
            what = next((w for tok, w in _CONSTRUCTS if line.startswith(tok, i)), None)
            if what is None and (var := _VARIABLE.match(line, i)):
                what = f"variable expansion {var.group()!r}"
            if what:
                raise SandboxError(f"refused: {what} {_REFUSAL}")
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
