"""The navigation engine's :class:`~c2s_core.navigation.engine.TreeView` over the sandboxed
tools: every read is a ``code_execution`` or ``get_document`` call an LLM agent could make, so
the tools' trace counts the calls and bytes navigation takes."""

from __future__ import annotations

import posixpath
import re
import shlex

from c2s_core.layout import SECTION_DOCUMENTS, TERM_INDEX_FILE
from c2s_core.navigation.engine import DocumentPage
from c2s_core.navrows import Card, Group, NavFile, parse_nav_file
from c2s_core.term_index import (TermPostings, leaf_name_pattern, leaf_pattern, parse_leaf_lines, parse_term_lines,
                                 term_pattern)

from .sandbox import MAX_COMMANDS, MAX_LINE_CHARS
from .tools import TreeTools, parse_document

TERM_LEAVES_PER_GREP = 8  # leaf names (slugs of ≤50 characters) per pattern: the sandbox caps one at 512
DOC_ROW_PATTERN = r"^- `[^`]+` \*\*"  # a leaf's document rows (its @see stubs start '- @see')


class ToolView:
    """Reads a tree as an agent does: ``grep -rih '\\<TERM' <folder> | wc -l`` for counts, ``ls``
    for a node's children, ``grep -E '^(## |- )'`` for a leaf's rows, grep over
    term_index.txt, ``get_document`` for a document."""

    def __init__(self, tools: TreeTools):
        self.tools = tools
        skills = tools.tree.skills  # the preloaded context: names, descriptions, sizes
        self.documents = sum(s.documents for s in skills)
        self._skills = [(Group(s.name, s.path, s.documents, s.description), s.level) for s in skills]

    def skills(self) -> list[tuple[Group, int]]:
        return list(self._skills)

    def grep_counts(self, asked: list[tuple[str, str]]) -> list[int]:
        # One pipeline per count, as many as fit joined with ';' in each call: a round's counts
        # take a call or a few, not one each.
        pipelines = [count_pipeline(term, nav_file) for term, nav_file in asked]
        counts: list[int] = []
        batch: list[str] = []
        for pipeline in pipelines:
            if batch and (len(batch) == MAX_COMMANDS or len("; ".join([*batch, pipeline])) > MAX_LINE_CHARS):
                counts += self._counted(batch)
                batch = []
            batch.append(pipeline)
        return counts + (self._counted(batch) if batch else [])

    def _counted(self, pipelines: list[str]) -> list[int]:
        """One call's counts. A call stopped on its budgets (a large tree) is asked again in
        halves; a count that still fails is 0, as a failed grep finds nothing."""
        out = self.tools.code_execution("; ".join(pipelines)).split("\n")
        if len(out) == len(pipelines) and all(n.strip().isdigit() for n in out):
            return [int(n) for n in out]
        if len(pipelines) == 1:
            return [0]
        half = len(pipelines) // 2
        return self._counted(pipelines[:half]) + self._counted(pipelines[half:])

    def list_folders(self, folders: list[str]) -> dict[str, list[str]]:
        return ls_children(self.tools.code_execution("ls " + " ".join(map(shlex.quote, folders))), folders)

    def read_rows(self, nav_file: str) -> NavFile | None:
        # The rows and their section headings: the node's own description was on its parent's
        # row, so the frontmatter and summary prose add bytes, not choices.
        text = self.tools.code_execution(f"grep -E '^(## |- )' {shlex.quote(nav_file)}")
        return parse_nav_file(text, nav_file) if text.startswith("## ") else None  # else an error

    def read_document_row(self, nav_file: str, row: int) -> Card | None:
        line = self.tools.code_execution(
            f"grep -E {shlex.quote(DOC_ROW_PATTERN)} {shlex.quote(nav_file)} | head -n {row} | tail -n 1")
        cards = parse_nav_file(f"{SECTION_DOCUMENTS}\n{line}", nav_file).cards
        return cards[0] if cards else None

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
