"""The navigation engine's :class:`~c2s_core.navigation.engine.TreeView` over the sandboxed
tools: every read is a ``code_execution`` or ``get_document`` call an LLM agent could make, so
the tools' trace counts the calls and bytes navigation takes. A document read is scored by the
vector the tree ships for it (its search index's, as dense search scores it): what embedding
the page would give, computed once by the compile."""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable

import numpy as np

from c2s_core.layout import SECTION_DOCUMENTS, TERM_INDEX_FILE
from c2s_core.navigation.engine import Child, DocumentPage
from c2s_core.navrows import Card, Group, NavFile, parse_nav_file
from c2s_core.term_index import (TermPostings, leaf_name_pattern, leaf_pattern, parse_leaf_lines, parse_term_lines,
                                 term_pattern)

from .sandbox import MAX_COMMANDS, MAX_LINE_CHARS, TRUNCATED, stop_line
from .sandbox.parsing import split_line
from .tools import TreeTools, parse_document

TERM_LEAVES_PER_GREP = 8  # leaf names (slugs of ≤50 characters) per pattern: the sandbox caps one at 512
DOC_ROW_PATTERN = r"^- `[^`]+` \*\*"  # a leaf's document rows (its @see stubs start '- @see')


class ToolView:
    """Reads a tree as an agent does: ``grep -rih '\\<TERM' <folder> | wc -l`` for counts (in
    loops over folders and terms), ``ls -F NODE`` and a loop over ``NODE/*/`` for a node's children, ``grep -E
    '^(## |- )'`` for a leaf's rows, grep over term_index.txt, ``get_document`` for a document;
    a round's commands joined with ``;`` into as few calls as fit."""

    def __init__(self, tools: TreeTools):
        self.tools = tools
        skills = tools.tree.skills  # the preloaded context: names, descriptions, sizes
        self.documents = sum(s.documents for s in skills)
        self._skills = [(Group(s.name, s.path, s.documents, s.description), s.level) for s in skills]

    def skills(self) -> list[tuple[Group, int]]:
        return list(self._skills)

    def grep_counts(self, asked: list[tuple[str, str]]) -> list[int]:
        # Folders asked the same terms (a node's children, mostly) are counted by one loop, folders
        # outside and terms inside, each printing one number a pair; as many loops as fit are
        # joined with ';' in a call, so a round's counts take a call or two. A call stopped on its
        # budgets (files visited, bytes read) keeps the counts it printed and the next call asks
        # for the rest, as an agent would. A count no call can answer is 0, as a failed grep finds
        # nothing.
        by_folder: dict[str, list[str]] = {}
        for term, nav_file in asked:
            by_folder.setdefault(posixpath.dirname(nav_file), []).append(term)
        by_terms: dict[tuple[str, ...], list[str]] = {}
        for folder, words in by_folder.items():
            by_terms.setdefault(tuple(words), []).append(folder)
        pending = [(word, folder) for words, folders in by_terms.items() for folder in folders for word in words]
        found: dict[tuple[str, str], int] = {}
        while pending:
            loops = _count_loops(pending)
            batch = _batches([loop for loop, _ in loops], 0, "; ")[0]
            pairs = pending[:sum(n for _, n in loops[:len(batch)])]
            answered = 0
            for pair, line in zip(pairs, self.tools.code_execution("; ".join(batch)).split("\n")):
                if not line.strip().isdigit():
                    break
                found[pair] = int(line.strip())
                answered += 1
            if not answered:  # its first count alone cannot be answered
                found[pending[0]] = 0
                answered = 1
            pending = pending[answered:]
        return [found[term, posixpath.dirname(nav_file)] for term, nav_file in asked]

    def count_children(self, asked: list[tuple[str, list[str]]]) -> dict[str, list[Child]]:
        # One listing and loop a node (:func:`children_loop`): its sub-folders named by ``ls -F``
        # (names, not the paths a loop's echo would print: about a fifth of the navigation bytes
        # on a 20,000-document tree), then each counted and its own folders counted (itself and
        # its sub-folders: 1 for a leaf), in the listing's order; as many joined with ';' in a
        # call as fit. A call stopped on its budgets keeps what it printed: the next call counts
        # the sub-folders still uncounted, named (:func:`subfolders_loop`). A node no call can
        # list and count is left out, as a folder that cannot be read.
        tasks: list[tuple[str, list[str], list[str] | None]] = [(nav, terms, None) for nav, terms in asked]
        found: dict[str, list[Child]] = {}
        while tasks:
            planned = [_children_command(nav, terms, names) for nav, terms, names in tasks]
            batch = _batches([command for command, _ in planned], 0, "; ")[0]
            lines = self.tools.code_execution("; ".join(batch)).split("\n")
            left: list[tuple[str, list[str], list[str] | None]] = []
            cut = False
            for (nav, terms, names), (_, reach) in zip(tasks[:len(batch)], planned):
                if cut:  # an earlier node of the call was cut short: this one was not reached
                    left.append((nav, terms, names))
                    continue
                n = len(terms)
                if names is None:
                    listed = []
                    while lines and lines[0] and not lines[0].strip().isdigit() and not stop_line(lines[0]):
                        listed.append(lines.pop(0))
                    if lines and stop_line(lines[0]):  # stopped before its first count (or listing)
                        left.append((nav, terms, None))
                        cut = True
                        continue
                    names = [name[:-1] for name in listed if name.endswith("/")]
                    if not names:  # the loop ran once over its glob as written, counting nothing
                        head, lines = lines[:n + 1], lines[n + 1:]
                        if len(head) == n + 1 and all(x.strip().isdigit() for x in head):
                            if listed:  # (nothing listed, not even its nav file: a missing folder, left out)
                                found[nav] = []
                            continue
                        left.append((nav, terms, None))
                        cut = True
                        continue
                    found[nav] = []
                counted = 0
                for name in names[:reach]:
                    head = [x.strip() for x in lines[:n + 1]]
                    if len(head) < n + 1 or not all(x.isdigit() for x in head):
                        cut = True
                        break
                    lines = lines[n + 1:]
                    found[nav].append(Child(name, [int(x) for x in head[:n]], int(head[n]) > 1))
                    counted += 1
                if counted < len(names):  # cut short, or more named sub-folders than one loop holds
                    left.append((nav, terms, names[counted:]))
            if left and left[0] == tasks[0]:  # no progress: the first node cannot be read
                found.pop(left[0][0], None)
                left = left[1:]
            tasks = left + tasks[len(batch):]
        return found

    def read_rows(self, nav_files: list[str]) -> dict[str, NavFile]:
        # The rows and their section headings of several files in one call, each file's after a
        # line naming it (``ls FILE`` prints the path once, where ``grep -H`` would prefix every
        # row with it): the node's own description was on its parent's row, so the frontmatter
        # and summary prose add bytes, not choices.
        lines: dict[str, list[str]] = {path: [] for path in nav_files}
        pipelines = [f"ls {q}; grep -E '^(## |- )' {q}" for q in map(shlex.quote, nav_files)]
        for _, out in self._calls(pipelines, "", "; "):
            current = None
            for line in out.split("\n"):
                if line in lines:
                    current = line
                elif current and line.startswith(("## ", "- ")):  # (error lines come last)
                    lines[current].append(line)
        return {path: parse_nav_file("\n".join(rows) + "\n", path)
                for path, rows in lines.items() if rows and rows[0].startswith("## ")}

    def read_document_rows(self, asked: list[tuple[str, int]]) -> list[Card | None]:
        pipelines = [f"grep -E {shlex.quote(DOC_ROW_PATTERN)} {shlex.quote(nav_file)} | head -n {row} | tail -n 1"
                     for nav_file, row in asked]
        out = self._one_line_each(pipelines, lambda line: line.startswith("- `"))
        cards = [parse_nav_file(f"{SECTION_DOCUMENTS}\n{line}", nav_file).cards if line else []
                 for (nav_file, _), line in zip(asked, out)]
        return [found[0] if found else None for found in cards]

    def joined(self, pipelines: list[str]) -> str:
        """The replies of ``pipelines`` run in order, joined with ';' into as few calls as fit."""
        return "\n".join(out for _, out in self._calls(pipelines, "", "; ") if out)

    def _calls(self, items: list[str], command: str, sep: str, quoted: bool = False,
               whole: Callable[[list[str], str], bool] = lambda batch, out: TRUNCATED not in out
               ) -> list[tuple[list[str], str]]:
        """``command`` followed by ``items`` (``quoted``: as shell words) joined with ``sep``, in
        as few calls as fit a command line: (the items of each call, its reply). A reply that is
        not ``whole`` (by default: cut to the output cap) is asked again in halves, so no item's
        answer is lost to another's."""
        def run(batch: list[str]) -> list[tuple[list[str], str]]:
            out = self.tools.code_execution(command + sep.join(map(shlex.quote, batch) if quoted else batch))
            if len(batch) == 1 or whole(batch, out):
                return [(batch, out)]
            half = len(batch) // 2
            return run(batch[:half]) + run(batch[half:])

        return [call for batch in _batches(items, len(command), sep, quoted) for call in run(batch)]

    def _one_line_each(self, pipelines: list[str], valid: Callable[[str], bool]) -> list[str]:
        """The one line each pipeline prints, as many pipelines joined with ';' in a call as fit
        (``""`` where a pipeline printed nothing valid)."""
        return [lines[0] if lines else "" for lines in self._lines_each([(p, 1) for p in pipelines], valid)]

    def _lines_each(self, commands: list[tuple[str, int]], valid: Callable[[str], bool]) -> list[list[str]]:
        """For each (command, n): the n lines it prints, as many commands joined with ';' in a
        call as fit (``[]`` where a command's lines are not all there and valid). A call whose
        lines do not add up to its commands' (one printed nothing, or it stopped on its budgets)
        is asked again in halves."""
        lines_of = dict(commands)

        def paired(batch: list[str], out: str) -> bool:
            lines = out.split("\n")
            return len(lines) == sum(lines_of[c] for c in batch) and all(valid(line.strip()) for line in lines)

        found: list[list[str]] = []
        for batch, out in self._calls([c for c, _ in commands], "", "; ", whole=paired):
            lines = [line.strip() for line in out.split("\n")] if paired(batch, out) else None
            for command in batch:
                n = lines_of[command]
                found.append(lines[:n] if lines is not None else [])
                lines = lines[n:] if lines is not None else None
        return found

    def term_lines(self, words: list[str]) -> dict[str, TermPostings]:
        # (a tree compiled without the index answers with an error line: no lines)
        return parse_term_lines(self.tools.code_execution(f"grep -E {shlex.quote(term_pattern(words))} {TERM_INDEX_FILE}"))

    def leaves_numbered(self, numbers: list[int]) -> dict[int, str]:
        return parse_leaf_lines(self.tools.code_execution(f"grep -E {shlex.quote(leaf_pattern(numbers))} {TERM_INDEX_FILE}"))

    def leaves_named(self, names: list[str]) -> dict[int, str]:
        found: dict[int, str] = {}
        for i in range(0, len(names), TERM_LEAVES_PER_GREP):
            found.update(parse_leaf_lines(self.tools.code_execution(
                f"grep -E {shlex.quote(leaf_name_pattern(names[i:i + TERM_LEAVES_PER_GREP]))} {TERM_INDEX_FILE}")))
        return found

    def read_document(self, doc_id: str) -> DocumentPage | None:
        page = parse_document(self.tools.get_document(doc_id))
        return DocumentPage(page.doc_id, page.title, page.text) if page is not None else None

    def document_vectors(self, doc_ids: list[str]) -> np.ndarray | None:
        index = self.tools.search_index
        return index.vectors_of(doc_ids) if index is not None else None


def _batches(items: list[str], prefix: int, sep: str = " ", quoted: bool = False) -> list[list[str]]:
    """``items`` in order, grouped so that each group joined with ``sep`` after ``prefix``
    characters (``quoted``: as shell words) fits one command line, and a line's pipelines
    joined with ';' stay within the sandbox's count."""
    batches: list[list[str]] = []
    batch: list[str] = []
    length, pipelines = prefix, 0
    for item in items:
        size = len(shlex.quote(item) if quoted else item)
        pieces = 1 if quoted else len(split_line(item))  # a loop is several ';' pieces
        if batch and (pipelines + pieces > MAX_COMMANDS or length + len(sep) + size > MAX_LINE_CHARS):
            batches.append(batch)
            batch, length, pipelines = [], prefix, 0
        length += size + (len(sep) if batch else 0)
        pipelines += pieces
        batch.append(item)
    return batches + ([batch] if batch else [])


def count_loop(folders: list[str], terms: list[str]) -> str:
    """A :func:`count_pipeline` for every folder and term, in that order, as one loop: one
    number a line."""
    return f"for d in {' '.join(map(shlex.quote, folders))}; do {_term_counts(terms)}done"


def _count_loops(pending: list[tuple[str, str]]) -> list[tuple[str, int]]:
    """(term, folder) pairs, in order, as :func:`count_loop` loops that each fit a command line:
    (loop, pairs it counts). Consecutive folders asked the same terms share a loop."""
    per_folder: list[tuple[str, list[str]]] = []
    for term, folder in pending:
        if per_folder and per_folder[-1][0] == folder:
            per_folder[-1][1].append(term)
        else:
            per_folder.append((folder, [term]))
    loops: list[tuple[list[str], list[str]]] = []
    for folder, terms in per_folder:
        if loops and loops[-1][1] == terms and len(count_loop([*loops[-1][0], folder], terms)) <= MAX_LINE_CHARS:
            loops[-1][0].append(folder)
        else:
            loops.append(([folder], terms))
    return [(count_loop(folders, terms), len(folders) * len(terms)) for folders, terms in loops]


def _children_command(nav_file: str, terms: list[str], names: list[str] | None) -> tuple[str, int | None]:
    """A node's counting loop and how many of its named sub-folders it reaches: a listed node's
    loop counts all its sub-folders (None), a named one's those that fit one command line."""
    folder = posixpath.dirname(nav_file)
    if names is None:
        return children_loop(folder, terms), None
    reach = _fitting_children(nav_file, names, terms)
    return subfolders_loop([f"{folder}/{name}/" for name in names[:reach]], terms), reach


def _fitting_children(nav_file: str, names: list[str], terms: list[str]) -> int:
    """How many of a node's sub-folders, from the first, one :func:`subfolders_loop` counts
    within a command line (at least one)."""
    folder = posixpath.dirname(nav_file)
    size = len(subfolders_loop([], terms))
    for i, name in enumerate(names):
        size += len(shlex.quote(f"{folder}/{name}/")) + 1
        if i and size > MAX_LINE_CHARS:
            return i
    return len(names)


def children_loop(folder: str, terms: list[str]) -> str:
    """``folder``'s entries listed (``ls -F``: a sub-folder's name ends in ``/``), then each
    sub-folder, in that order, counted: its :func:`count_pipeline` of each term and its folders
    (itself and its sub-folders: 1 means a leaf): ``ls -F FOLDER; for d in FOLDER/*/; do for t
    in ...; do grep ... | wc -l; done; find "$d" -maxdepth 1 -type d | wc -l; done``."""
    quoted = shlex.quote(folder)
    return f"ls -F {quoted}; {_subfolder_counts(f'{quoted}/*/', terms)}"


def subfolders_loop(folders: list[str], terms: list[str]) -> str:
    """The counting loop of :func:`children_loop` over sub-folders named (``NODE/NAME/``): the
    rest of a node's, once a call stopped on its budgets."""
    return _subfolder_counts(" ".join(map(shlex.quote, folders)), terms)


def _subfolder_counts(words: str, terms: list[str]) -> str:
    return f'for d in {words}; do {_term_counts(terms)}find "$d" -maxdepth 1 -type d | wc -l; done'


def _term_counts(terms: list[str]) -> str:
    """The loop body counting each term below folder ``$d`` (:func:`count_pipeline`, one number
    a term), ending in ``; `` ready for the outer ``done``; nothing for no terms."""
    if not terms:
        return ""
    words = " ".join(shlex.quote(re.escape(t)) for t in terms)
    return f'for t in {words}; do grep -rih -e "\\<$t" "$d" | wc -l; done; '


def count_pipeline(term: str, folder: str) -> str:
    """``grep -rih '\\<TERM' FOLDER | wc -l``: lines of the nav files in a folder and below holding a
    word that starts with the term ('fee' finds 'fees' but not 'coffee')."""
    return f"grep -rih -e {shlex.quote(chr(92) + '<' + re.escape(term))} {shlex.quote(folder)} | wc -l"
