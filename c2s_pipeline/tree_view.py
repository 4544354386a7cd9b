"""The navigation engine's :class:`~c2s_core.navigation.engine.TreeView` over a compile's
in-memory artifacts (the rendered nav files, the parsed term index, the documents), for the
navigability probe. Every answer is what the agent's sandboxed tools would return for the same
call on the published tree (``grep -rih '\\<TERM' <folder> | wc -l``, ``ls``, ``grep -E
'^(## |- )'``, grep over term_index.txt, ``get_document``'s first page), computed without a
shell: a probe asks hundreds of questions, and the same term's line matches serve them all."""

from __future__ import annotations

import posixpath
import re
from bisect import bisect_left
from collections.abc import Mapping

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import CountVectorizer

from c2s_core.layout import SECTION_DOCUMENTS
from c2s_core.navigation.engine import PAGE_CHARS, Child, DocumentPage
from c2s_core.navrows import Card, Group, NavFile, parse_nav_file
from c2s_core.search_index import SearchIndex
from c2s_core.term_index import TermIndex, TermPostings, leaf_folder
from c2s_core.tree import parse_skill

_ROW_LINE = re.compile(r"(## |- )")  # what ``grep -E '^(## |- )'`` keeps of a nav file
_DOC_ROW = re.compile(r"- `[^`]+` \*\*")  # a leaf's document rows (its @see stubs start '- @see')
_WORD = re.compile(r"\w+")  # grep's words: '\<' is a word start


def _words(line: str) -> list[str]:
    return _WORD.findall(line.lower())


class CompiledView:
    """``nav_files``: path -> rendered text of every nav file; ``titles`` / ``texts``: each
    document's stored title and text; ``term_index``: term_index.txt, parsed; ``search``: the
    tree's search index, whose shipped vectors score the documents read (None: embedded)."""

    def __init__(self, nav_files: Mapping[str, str], titles: Mapping[str, str], texts: Mapping[str, str],
                 term_index: TermIndex, search: SearchIndex | None = None):
        self.nav_files = dict(nav_files)
        self.titles, self.texts = titles, texts
        self.term_index = term_index
        self.search = search
        # The top-level skills as the agent's preloaded context lists them: by folder name.
        found = [parse_skill(text, path) for path, text in self.nav_files.items() if path.count("/") == 2]
        self._skills = [(Group(s.name, s.path, s.documents, s.description), s.level)
                        for s in sorted((s for s in found if s is not None), key=lambda s: s.path.split("/"))]
        self.documents = sum(g.documents for g, _ in self._skills)
        # Sub-folders of each folder, as ``ls`` lists them.
        self.subfolders: dict[str, list[str]] = {}
        for path in self.nav_files:
            folder = posixpath.dirname(path)
            self.subfolders.setdefault(folder, [])
            parent = posixpath.dirname(folder)
            if parent.count("/") >= 1:  # below skills/: a group's folder in its parent's
                self.subfolders.setdefault(parent, []).append(posixpath.basename(folder))
        for names in self.subfolders.values():
            names.sort()
        # Every line of every nav file, files in path order, so a folder's files (and their
        # lines) are one run: those whose paths start with the folder's.
        lines, starts = [], []
        paths = sorted(self.nav_files)
        for path in paths:
            starts.append(len(lines))
            lines += [line for line in self.nav_files[path].split("\n") if line]
        starts.append(len(lines))
        self.lines = lines
        self.lines_in: dict[str, tuple[int, int]] = {}  # nav file -> its folder's run of lines
        for path in self.nav_files:
            folder = posixpath.dirname(path) + "/"
            lo, hi = bisect_left(paths, folder), bisect_left(paths, folder + "\U0010ffff")
            self.lines_in[path] = (starts[lo], starts[hi])
        words = CountVectorizer(analyzer=_words, binary=True)
        self.line_words = words.fit_transform(lines).tocsc() if lines else sparse.csc_matrix((0, 0))
        self.vocab = np.array(words.get_feature_names_out()) if lines else np.array([], dtype=str)
        self._hits: dict[str, np.ndarray] = {}
        self._term_order = {key: i for i, key in enumerate(term_index.terms)}
        self._parsed: dict[str, NavFile | None] = {}
        # Leaf numbers by folder name (a folder's last part), as a grep of the leaf lines finds them.
        self._leaves_by_name: dict[str, list[int]] = {}
        for number, nav in term_index.leaves.items():
            self._leaves_by_name.setdefault(leaf_folder(nav).rsplit("/", 1)[-1], []).append(number)

    def skills(self) -> list[tuple[Group, int]]:
        return list(self._skills)

    def grep_counts(self, asked: list[tuple[str, str]]) -> list[int]:
        return [self._count(term, nav_file) for term, nav_file in asked]

    def _count(self, term: str, nav_file: str) -> int:
        if nav_file not in self.lines_in:
            return 0
        lo, hi = self.lines_in[nav_file]
        matching = self._lines_with(term)
        return int(np.searchsorted(matching, hi) - np.searchsorted(matching, lo))

    def _lines_with(self, term: str) -> np.ndarray:
        """The nav-file lines (ascending numbers) that hold a word starting with ``term``
        (case-insensitive). Kept as the matches alone: a probe asks thousands of terms, and a
        running count over every line for each was gigabytes on a 50,000-document tree."""
        if term not in self._hits:
            key = term.lower()
            # Any match holds a word starting with the term's first run of word characters (it
            # starts the term, after grep's word start, or follows a non-word character in it).
            first = _WORD.search(key)
            if first is None:
                lines = np.arange(len(self.lines))
            else:
                lo, hi = np.searchsorted(self.vocab, [first.group(0), first.group(0) + "\uffff"])
                lines = np.flatnonzero(np.asarray(self.line_words[:, lo:hi].sum(axis=1)).ravel())
            if not _WORD.fullmatch(key):  # a term with other characters: those lines matched as grep would
                rx = re.compile(r"\b" + re.escape(term), re.IGNORECASE)
                lines = lines[np.array([bool(rx.search(self.lines[i])) for i in lines], dtype=bool)]
            self._hits[term] = lines.astype(np.int32)
        return self._hits[term]

    def count_children(self, asked: list[tuple[str, list[str]]]) -> dict[str, list[Child]]:
        found = {}
        for nav_file, terms in asked:
            folder = posixpath.dirname(nav_file)
            if folder in self.subfolders:
                names = self.subfolders[folder]
                # Each child's run of lines; one search of a term's matching lines counts them all.
                runs = np.array([self.lines_in.get(f"{folder}/{k}/INDEX.md", (0, 0)) for k in names],
                                dtype=np.int64).reshape(-1, 2)
                counts = [np.searchsorted(hits, runs[:, 1]) - np.searchsorted(hits, runs[:, 0])
                          for hits in map(self._lines_with, terms)]
                found[nav_file] = [Child(k, [int(c[i]) for c in counts], bool(self.subfolders.get(f"{folder}/{k}")))
                                   for i, k in enumerate(names)]
        return found

    def read_rows(self, nav_files: list[str]) -> dict[str, NavFile]:
        return {path: nav for path in nav_files if (nav := self._rows(path)) is not None}

    def _rows(self, nav_file: str) -> NavFile | None:
        if nav_file not in self._parsed:
            text = self.nav_files.get(nav_file)
            rows = [line for line in text.split("\n") if _ROW_LINE.match(line)] if text is not None else []
            self._parsed[nav_file] = (parse_nav_file("\n".join(rows) + "\n", nav_file)
                                      if rows and rows[0].startswith("## ") else None)
        return self._parsed[nav_file]

    def read_document_rows(self, asked: list[tuple[str, int]]) -> list[Card | None]:
        return [self._document_row(nav_file, row) for nav_file, row in asked]

    def _document_row(self, nav_file: str, row: int) -> Card | None:
        rows = [line for line in self.nav_files.get(nav_file, "").split("\n") if _DOC_ROW.match(line)][:row][-1:]
        cards = parse_nav_file(f"{SECTION_DOCUMENTS}\n" + "\n".join(rows), nav_file).cards if rows else []
        return cards[0] if cards else None

    def term_lines(self, words: list[str]) -> dict[str, TermPostings]:
        keys = self.term_index.lines(words)
        return {key: keys[key] for key in sorted(keys, key=self._term_order.__getitem__)}

    def leaves_numbered(self, numbers: list[int]) -> dict[int, str]:
        leaves = self.term_index.leaves
        return {n: leaves[n] for n in sorted(set(numbers)) if n in leaves}

    def leaves_named(self, names: list[str]) -> dict[int, str]:
        return self.leaves_numbered([n for name in set(names) for n in self._leaves_by_name.get(name, ())])

    def read_document(self, doc_id: str) -> DocumentPage | None:
        if doc_id not in self.texts:
            return None
        return DocumentPage(doc_id, " ".join(self.titles[doc_id].split()), self.texts[doc_id][:PAGE_CHARS])

    def document_vectors(self, doc_ids: list[str]) -> np.ndarray | None:
        return self.search.vectors_of(doc_ids) if self.search is not None else None
