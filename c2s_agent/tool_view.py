"""The navigation engine's :class:`~c2s_core.navigation.engine.TreeView` over the sandboxed
tools: every read is a ``code_execution`` or ``get_document`` call an LLM agent could make, so
the tools' trace counts the calls and bytes navigation takes."""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable

from c2s_core.layout import SECTION_DOCUMENTS, TERM_INDEX_FILE
from c2s_core.navigation.engine import DocumentPage
from c2s_core.navrows import Card, Group, NavFile, parse_nav_file
from c2s_core.term_index import (TermPostings, leaf_name_pattern, leaf_pattern, parse_leaf_lines, parse_term_lines,
                                 term_pattern)

from .sandbox import MAX_COMMANDS, MAX_LINE_CHARS, TRUNCATED
from .tools import TreeTools, parse_document

TERM_LEAVES_PER_GREP = 8  # leaf names (slugs of ≤50 characters) per pattern: the sandbox caps one at 512
DOC_ROW_PATTERN = r"^- `[^`]+` \*\*"  # a leaf's document rows (its @see stubs start '- @see')


class ToolView:
    """Reads a tree as an agent does: ``grep -rih '\\<TERM' <folder> | wc -l`` for counts, ``ls``
    for a node's children, ``grep -E '^(## |- )'`` for a leaf's rows, grep over
    term_index.txt, ``get_document`` for a document; a round's commands joined with ``;`` into
    as few calls as fit."""

    def __init__(self, tools: TreeTools):
        self.tools = tools
        skills = tools.tree.skills  # the preloaded context: names, descriptions, sizes
        self.documents = sum(s.documents for s in skills)
        self._skills = [(Group(s.name, s.path, s.documents, s.description), s.level) for s in skills]

    def skills(self) -> list[tuple[Group, int]]:
        return list(self._skills)

    def grep_counts(self, asked: list[tuple[str, str]]) -> list[int]:
        # One pipeline per count, as many as fit joined with ';' in each call: a round's counts
        # take a call or a few, not one each. A count that fails is 0, as a failed grep finds nothing.
        out = self._one_line_each([count_pipeline(term, nav_file) for term, nav_file in asked], str.isdigit)
        return [int(n) if n.isdigit() else 0 for n in out]

    def list_folders(self, folders: list[str]) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for batch, out in self._calls(folders, "ls ", " ", quoted=True):
            found.update(ls_children(out, batch))
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
        (``""`` where a pipeline printed nothing valid). A call whose lines do not pair one to one
        with its pipelines (one printed nothing, or it stopped on its budgets) is asked again in halves."""
        def paired(batch: list[str], out: str) -> bool:
            lines = out.split("\n")
            return len(lines) == len(batch) and all(valid(line.strip()) for line in lines)

        return [line.strip() for batch, out in self._calls(pipelines, "", "; ", whole=paired)
                for line in (out.split("\n") if paired(batch, out) else [""])]

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


def _batches(items: list[str], prefix: int, sep: str = " ", quoted: bool = False) -> list[list[str]]:
    """``items`` in order, grouped so that each group joined with ``sep`` after ``prefix``
    characters (``quoted``: as shell words) fits one command line, and a line's pipelines
    joined with ';' stay within the sandbox's count."""
    batches: list[list[str]] = []
    batch: list[str] = []
    length = prefix
    for item in items:
        size = len(shlex.quote(item) if quoted else item)
        if batch and (len(batch) == MAX_COMMANDS or length + len(sep) + size > MAX_LINE_CHARS):
            batches.append(batch)
            batch, length = [], prefix
        length += size + (len(sep) if batch else 0)
        batch.append(item)
    return batches + ([batch] if batch else [])


def count_pipeline(term: str, nav_file: str) -> str:
    """``grep -rih '\\<TERM' FOLDER | wc -l``: lines below a nav file's folder holding a word
    that starts with the term ('fee' finds 'fees' but not 'coffee')."""
    return f"grep -rih -e {shlex.quote(chr(92) + '<' + re.escape(term))} {shlex.quote(posixpath.dirname(nav_file))} | wc -l"


def ls_children(text: str, folders: list[str]) -> dict[str, list[str]]:
    """``ls FOLDER...`` output -> {folder: its sub-folders}; folders ls could not list are left out."""
    out: dict[str, list[str]] = {}
    current = folders[0] if len(folders) == 1 else None  # one folder: ls prints no heading
    if current and text.startswith(("ls:", "error:")):
        return out
    if current:
        out[current] = []
    for line in text.splitlines():
        if line.endswith(":") and line[:-1] in folders:
            current = line[:-1]
            out[current] = []
        elif current and line.endswith("/"):
            out[current].append(line[:-1])
    return out
