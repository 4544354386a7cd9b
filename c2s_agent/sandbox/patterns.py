"""grep's patterns: GNU syntax translated to Python's, costed before compiling (counted repeats
unrolled, nesting, recursion, fuzzy matching), and matched within a time budget."""

from __future__ import annotations

import itertools
import re
import signal
import threading
import time
from collections.abc import Iterable, Iterator

from .limits import MAX_PATTERN_CHARS, MAX_PATTERN_EXPANSION, MAX_PATTERN_NESTING, Budget, SandboxError, Stopped

try:  # the third-party `regex` module can time-bound a search; stdlib `re` cannot
    import regex as _regex
except ImportError:  # pragma: no cover - exercised by monkeypatching in the tests
    _regex = None

_REGEX_MAGIC = re.compile(r"[\\.^$*+?()\[\]{}|]")
# What a case-insensitive match of an ASCII letter may also match: both engines pair these four
# with ASCII letters (Kelvin sign, long s, dotted and dotless i); a folded text maps them so.
_ASCII_FOLDS = str.maketrans("\u212a\u017f\u0130\u0131", "ksii")
_FOLDED_LETTERS = re.compile("[\u212a\u017f\u0130\u0131]")
BLOCK_LINES = 256  # lines looked over at once for a pattern's required text
_COUNTED_REPEAT = re.compile(r"\{(\d*)(?:(,)(\d*))?\}")
# (?R) (?0) (?1) (?+1) (?-1) (?&name) (?P>name): a group called again, which GNU grep has not and
# whose backtracking state grows with every level (a bounded time does not bound its memory).
_RECURSION = re.compile(r"\?(?:R|[+-]?\d|&|P>)")
# {e<=1} {i,d} {1<=e<=2}: the `regex` module's fuzzy matching, which GNU grep has not either.
_FUZZY = re.compile(r"\{[^{}]*(?<![A-Za-z])[eisd](?![A-Za-z])[^{}]*\}")


class Matcher:
    """A line predicate for grep patterns (any may match), with :meth:`parts` for ``grep -o``."""

    def __init__(self, patterns: list[str], opts: dict, budget: Budget, regex_timeout_s: float) -> None:
        for pattern in patterns:
            if len(pattern) > MAX_PATTERN_CHARS:
                raise SandboxError(f"refused: pattern is {len(pattern):,} characters; "
                                   f"the limit is {MAX_PATTERN_CHARS}")
        shown = ", ".join(repr(p) for p in patterns)
        sources = [re.escape(p) if "F" in opts else gnu_to_python(p, "E" in opts) for p in patterns]
        if "w" in opts:
            sources = [rf"(?<!\w)(?:{source})(?!\w)" for source in sources]
        check_cost(sources, shown)  # before compiling: compiling is where an unrolled pattern takes its memory
        engine = _regex or re
        flags = engine.IGNORECASE if "i" in opts else 0
        self.compiled = []
        for pattern, source in zip(patterns, sources):
            try:
                self.compiled.append(engine.compile(source, flags))
            except engine.error as e:
                raise SandboxError(f"grep: invalid pattern {pattern!r}: {e}") from None
            except (OverflowError, RecursionError, ValueError):
                raise SandboxError(f"grep: invalid pattern {pattern!r}") from None
        # Stdlib `re` has no timeout: it is bounded with SIGALRM, which only the main thread gets;
        # elsewhere only literal text, which cannot backtrack catastrophically, is allowed.
        self.use_alarm = _regex is None and threading.current_thread() is threading.main_thread()
        if _regex is None and not self.use_alarm and not is_literal(patterns, opts):
            raise SandboxError("grep: regular expressions need the 'regex' package here; "
                               "use -F for a fixed string")
        self.budget, self.left = budget, regex_timeout_s
        # Plain text matched case-sensitively needs no regex engine: a substring test per line
        # (cannot backtrack, so it spends none of the matching time).
        self.needles = patterns if is_literal(patterns, opts) and not ({"i", "w"} & set(opts)) else None
        # The text each pattern's every match contains (None: one has none), folded for -i: a block
        # of lines holding none of them is passed over without a regex search per line.
        self.folded = "i" in opts
        self.required = required_texts(sources, self.folded)
        self.timeout = Stopped(
            f"grep: stopped: pattern {shown} took over {regex_timeout_s:g} s of matching; "
            "simplify it (avoid nested quantifiers like (a+)+) or use -F for a fixed string")

    def __call__(self, line: str) -> bool:
        if self.needles is not None:
            return any(needle in line for needle in self.needles)
        return self.first(line) is not None

    def candidates(self, numbered: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str]]:
        """The (number, line) pairs that may match, in order: lines come in blocks, and a block
        none of whose lines holds a pattern's required text is left out whole (its lines could
        not match). A line a pattern matches is never left out."""
        if self.required is None:
            yield from numbered
            return
        numbered = iter(numbered)
        fold = self.fold
        while block := list(itertools.islice(numbered, BLOCK_LINES)):
            text = fold("\n".join(line for _, line in block))
            if any(needle in text for needle in self.required):
                yield from block

    def fold(self, text: str) -> str:
        if not self.folded:
            return text
        if _FOLDED_LETTERS.search(text):  # rare; translating every block costs more than the search
            text = text.translate(_ASCII_FOLDS)
        return text.lower()

    def first(self, line: str, pos: int = 0, *, earliest: bool = False):
        """The first pattern's match at or after ``pos`` (``earliest``: the match that starts
        first among all patterns, as ``grep -o`` prints them), within the time budget."""
        start = time.monotonic()
        found = None
        for rx in self.compiled:
            left = self.left - (time.monotonic() - start)
            if left <= 0:
                raise self.timeout
            # Never past the command's own deadline either.
            seconds = min(left, max(self.budget.deadline - time.monotonic(), 1e-3))
            try:
                if _regex is not None:
                    m = rx.search(line, pos, timeout=seconds)
                else:
                    m = _search_with_alarm(rx, line, seconds, pos) if self.use_alarm else rx.search(line, pos)
            except TimeoutError:
                self.budget.check()  # the command's deadline, if that is what ran out
                raise self.timeout from None
            if m and (found is None or m.start() < found.start()):
                found = m
                if not earliest:
                    break
        self.left -= time.monotonic() - start
        return found

    def parts(self, line: str) -> list[str]:
        found, pos = [], 0
        while pos <= len(line) and (m := self.first(line, pos, earliest=True)):
            if m.end() > m.start():
                found.append(m.group(0))
            pos = m.end() if m.end() > pos else pos + 1
        return found


def check_cost(sources: list[str], shown: str) -> None:
    """Refuse patterns whose compiled form or matching state could blow up."""
    for source in sources:
        if _calls_groups(source):
            raise SandboxError(f"grep: refused: pattern {shown} calls a group recursively "
                               "((?R), (?1), (?&name)); grep patterns cannot recurse")
        if _FUZZY.search(source):
            raise SandboxError(f"grep: refused: pattern {shown} asks for fuzzy matching "
                               "({e<=1}); grep patterns match exactly")
    costs = [pattern_cost(source) for source in sources]
    nesting = max(depth for _, depth in costs)
    if nesting > MAX_PATTERN_NESTING:
        raise SandboxError(f"grep: refused: pattern {shown} nests groups {nesting} deep; "
                           f"the limit is {MAX_PATTERN_NESTING}")
    atoms = sum(size for size, _ in costs)
    if atoms > MAX_PATTERN_EXPANSION:
        raise SandboxError(
            f"grep: refused: pattern {shown} unrolls to {atoms:,} atoms once its counted "
            f"repeats {{n}} are multiplied out; the limit is {MAX_PATTERN_EXPANSION:,} "
            "(use + or * instead of large counts)")


def required_texts(sources: list[str], folded: bool) -> list[str] | None:
    """For each Python-syntax pattern, the text every match of it contains: the pattern itself
    when it is plain characters and escaped punctuation between optional word boundaries
    (``\\bfoo\\-bar``, as ``grep '\\<foo-bar'`` or ``-F`` gives), lower-cased when ``folded``
    (ASCII only, where the folds are known); None when any pattern is not so."""
    found = []
    for source in sources:
        text = _plain_text(source)
        if not text or (folded and not text.isascii()):
            return None
        found.append(text.lower() if folded else text)
    return found


def _plain_text(source: str) -> str | None:
    body = source
    while body.startswith("\\b"):
        body = body[2:]
    while body.endswith("\\b") and not body.endswith("\\\\b"):
        body = body[:-2]
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            if i + 1 >= len(body) or body[i + 1].isalnum() or body[i + 1] == "_":
                return None  # \d, \w, \b inside, \1 ...: not plain text
            out.append(body[i + 1])
            i += 2
        elif _REGEX_MAGIC.match(c):
            return None
        else:
            out.append(c)
            i += 1
    return "".join(out)


def is_literal(patterns: list[str], opts: dict) -> bool:
    return "F" in opts or not any(_REGEX_MAGIC.search(p) for p in patterns)


def _calls_groups(source: str) -> bool:
    """Does ``source`` hold a group call like (?R) outside character classes and escapes?"""
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c == "\\":
            i += 2
        elif c == "[":
            i = _class_end(source, i)
        elif c == "(" and _RECURSION.match(source, i + 1):
            return True
        else:
            i += 1
    return False


def _class_end(source: str, i: int) -> int:
    """The index after the character class that opens at ``source[i]``."""
    j = i + 1
    j += source.startswith("^", j)
    j += source.startswith("]", j)
    while j < len(source) and source[j] != "]":
        j += 2 if source[j] == "\\" else 1
    return j + 1


def pattern_cost(source: str) -> tuple[int, int]:
    """(atoms, deepest group nesting) of a Python-syntax regex with its counted repeats unrolled,
    as the engines compile them: x{100} is 100 atoms, (x{100}){100} is 10,000. Overcounts a
    little (group prefixes like ?P<name> count as atoms), never under."""
    frames = [[0, 0]]  # per open group: [atoms so far, atoms of its last item]
    deepest, i, n = 0, 0, len(source)
    while i < n:
        c, frame = source[i], frames[-1]
        if c == "(":
            frames.append([0, 0])
            deepest = max(deepest, len(frames) - 1)
            i += 2 if source.startswith("?", i + 1) else 1  # (?:  (?P<  (?i): no quantifier
            continue
        if c == ")" and len(frames) > 1:
            inner = frames.pop()[0]
            frames[-1][0] += inner
            frames[-1][1] = inner
            i += 1
            continue
        if c == "|":
            frame[1] = 0
            i += 1
            continue
        if c in "*+?":  # loops, not unrolled
            i += 1
            continue
        if c == "{" and (m := _COUNTED_REPEAT.match(source, i)) and (m[1] or m[3]):
            count = max(int(m[1] or 0), int(m[3] or 0), 1)
            frame[0] += frame[1] * (count - 1)
            frame[1] *= count
            i = m.end()
            continue
        if c == "\\":  # an escape is one atom
            i += 2
        elif c == "[":  # so is a character class
            i = _class_end(source, i)
        else:
            i += 1
        frame[0] += 1
        frame[1] = 1
    return sum(f[0] for f in frames), deepest


def gnu_to_python(pattern: str, extended: bool) -> str:
    r"""Translate grep syntax to Python's: in basic regexes (no -E) \| \+ \? \( \) \{ \}
    are the operators and the bare characters are literal; \< and \> are word boundaries."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            n = pattern[i + 1]
            out.append(r"\b" if n in "<>" else n if not extended and n in "|+?(){}" else c + n)
            i += 2
            continue
        out.append("\\" + c if not extended and c in "|+?(){}" else c)
        i += 1
    return "".join(out)


def _search_with_alarm(rx: re.Pattern[str], line: str, seconds: float, pos: int = 0) -> re.Match[str] | None:
    """Fallback bound for stdlib `re`, which checks for signals while it backtracks. The worker
    runs commands on its main thread, the only one SIGALRM reaches."""
    def expire(signum: int, frame: object) -> None:
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return rx.search(line, pos)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

