"""The tools every agent gets, over one compiled tree:

- ``code_execution(command)``: ls / cat / grep ... over the skill tree and entity index, run by
  the confined :class:`~c2s_agent.sandbox.Sandbox` (navigation: where to look);
- ``get_document(doc_id, offset=0)``: a document's full text by exact id, paged (evidence);
- ``search(query, k=10, mode="hybrid")``: flat search over every document (the compiler's
  ``search_index/``): ``bm25`` (stemmed keywords), ``dense`` (the question's embedding against
  the documents' vectors) or ``hybrid`` (their reciprocal rank fusion), the fallback when the
  tree's evidence for a question is thin; rows give doc_id, title, the nav file that lists the
  document and the score. A tree without document vectors answers dense and hybrid searches
  by bm25, with a note saying so.

:class:`TreeTools` bundles them with a trace of every call and byte accounting::

    tools = TreeTools("out/tree")
    print(tools.code_execution("grep -ril refund skills | head"))
    print(tools.get_document("a1b2...", offset=0))
    print(tools.search("refund fee", k=5))
    tools.trace, tools.usage()
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import asdict, dataclass

from c2s_core.layout import SEARCH_INDEX_DIR
from c2s_core.navigation.engine import PAGE_CHARS  # one page of get_document: what navigation reads of a document
from c2s_core.search_index import DEFAULT_MODE, MODES, SearchHit, SearchIndex

from .sandbox import Sandbox
from c2s_core.tree import Tree, open_tree

SEARCH_K, MAX_SEARCH_K = 10, 50

TOOL_SCHEMAS: list[dict] = [
    {
        "name": "code_execution",
        "description": (
            "Run one read-only shell command line over the compiled skill tree (the current "
            "directory, '/'). Supported: ls, cat, head, tail, grep (-r -i -l -c -n -w -v -o -E -F), "
            "find, wc, sort, uniq, echo, joined with '|'; several commands joined with ';' run in order "
            "in one call, and 'for NAME in WORDS; do ...; done' loops run a body once a word "
            "(for d in skills/*/; do echo \"$d\"; grep -rih refund \"$d\" | wc -l; done). "
            "The tree holds skills/<skill>/SKILL.md, "
            "nested <group>/INDEX.md files, entity_index.json and term_index.txt (body words → "
            "leaf numbers and row numbers, '=word' lines for title words; '@N folder' lines name leaf N's folder). Output is capped; narrow with "
            "grep or page with head/tail."),
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string",
                                       "description": "e.g. cat skills/billing/SKILL.md"}},
            "required": ["command"],
        },
    },
    {
        "name": "get_document",
        "description": (
            "Return a document's full text by its exact doc_id (the id in backticks on an "
            "INDEX.md row). Long documents come in pages of "
            f"{PAGE_CHARS:,} characters; the header gives the offset of the next page. "
            "Cite documents as [doc_id]."),
        "input_schema": {
            "type": "object",
            "properties": {
                "doc_id": {"type": "string", "description": "exact id from an INDEX.md row"},
                "offset": {"type": "integer", "minimum": 0, "default": 0,
                           "description": "character offset of the page to read"},
            },
            "required": ["doc_id"],
        },
    },
]

SEARCH_SCHEMA: dict = {
    "name": "search",
    "description": (
        "Flat search over every document's full text. A fallback, not the first step: use it "
        "when the tree's evidence is thin (the skills and INDEX.md rows you read do not cover the "
        "question's terms, or grep finds them nowhere useful). mode: 'bm25' matches keywords "
        "(stemmed; best for exact names, codes, options), 'dense' matches meaning (the question "
        "in your own words), 'hybrid' (default) fuses the two rankings. Each row gives doc_id, "
        "title, the INDEX.md that lists the document and the score; read documents with "
        "get_document before citing them."),
    "input_schema": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "keywords, e.g. the question's distinctive terms"},
            "k": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_K, "default": SEARCH_K,
                  "description": "how many documents to return"},
            "mode": {"type": "string", "enum": list(MODES), "default": DEFAULT_MODE,
                     "description": "bm25 (keywords), dense (meaning) or hybrid (both, fused)"},
        },
        "required": ["query"],
    },
}
ALL_TOOL_SCHEMAS: list[dict] = [*TOOL_SCHEMAS, SEARCH_SCHEMA]


@dataclass(frozen=True)
class ToolCall:
    """One entry of the trace."""

    tool: str
    input: dict
    output_bytes: int
    seconds: float
    scanned_bytes: int = 0  # tree file content the sandbox read to answer (grep scans)
    error: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Page:
    """A parsed get_document reply (see :func:`parse_document`)."""

    doc_id: str
    title: str
    text: str
    offset: int
    total_chars: int
    next_offset: int | None = None


class TreeTools:
    """``code_execution``, ``get_document`` and ``search`` over one tree, with a trace;
    thread-safe."""

    def __init__(self, tree: Tree | str | os.PathLike[str], *, page_chars: int = PAGE_CHARS,
                 max_output_bytes: int = 8192):
        self.tree = open_tree(tree)
        self.page_chars = page_chars
        self.sandbox = Sandbox(self.tree.root, max_output_bytes=max_output_bytes)
        self._trace: list[ToolCall] = []
        self._fetched: dict[str, None] = {}  # ids with at least one page read, in first-read order
        self._lock = threading.Lock()  # the sandbox is single-threaded; the trace is shared
        self._ids: list[str] | None = None
        self._index: SearchIndex | None = None

    @property
    def has_search(self) -> bool:
        """Was the tree compiled with a search index (trees from before it have none)?"""
        return (self.tree.root / SEARCH_INDEX_DIR).is_dir()

    @property
    def schemas(self) -> list[dict]:
        """The tool schemas an LLM is offered for this tree."""
        return ALL_TOOL_SCHEMAS if self.has_search else TOOL_SCHEMAS

    # -- the tools ----------------------------------------------------------------------

    def code_execution(self, command: str) -> str:
        start = time.perf_counter()
        with self._lock:
            before = self.sandbox.stats.bytes_read
            output = self.sandbox.run(str(command))
            scanned = self.sandbox.stats.bytes_read - before
        self._record("code_execution", {"command": command}, output, start, scanned=scanned)
        return output

    def get_document(self, doc_id: str, offset: int = 0) -> str:
        start = time.perf_counter()
        output, ok = self._document(doc_id, offset)
        self._record("get_document", {"doc_id": doc_id, "offset": offset}, output, start, error=not ok)
        return output

    def search_hits(self, query: str, k: int = SEARCH_K, mode: str = DEFAULT_MODE) -> list[SearchHit]:
        """:meth:`search` as data (one traced call); [] when there is no index."""
        return self._search(query, k, mode)[0]

    def search(self, query: str, k: int = SEARCH_K, mode: str = DEFAULT_MODE) -> str:
        return self._search(query, k, mode)[1]

    def _search(self, query: object, k: object, mode: object) -> tuple[list[SearchHit], str]:
        start = time.perf_counter()
        hits: list[SearchHit] = []
        try:
            k = min(MAX_SEARCH_K, max(1, int(k if k is not None else SEARCH_K)))
        except (TypeError, ValueError):
            k = None
        mode = DEFAULT_MODE if mode is None else mode
        if k is None:
            output = f"error: k must be a whole number of documents (1-{MAX_SEARCH_K})"
        elif mode not in MODES:
            output = f"error: mode must be one of {', '.join(MODES)}, not {mode!r}"
        elif not isinstance(query, str) or not query.strip():
            output = "error: search needs a query: a few keywords, e.g. search(query=\"refund fee\")"
        else:
            index = self._load_index()
            if index is None:
                output = ("error: this tree has no search index (compiled before it existed); "
                          "navigate with code_execution instead")
            else:
                used, note = index.resolve(mode)
                hits = index.search(query, k, used)
                digits = {"bm25": 2, "dense": 3, "hybrid": 4}[used]  # BM25, cosine, fused 1/(60+rank) sums
                output = "\n".join(f"{i}. `{h.doc_id}` {h.title} | {h.path or '-'} | score {h.score:.{digits}f}"
                                   for i, h in enumerate(hits, 1)) or f"no document matches {query!r}"
                if note:
                    output = f"{note}\n{output}"
        self._record("search", {"query": query, "k": k, "mode": mode}, output, start,
                     error=output.startswith("error:"))
        return hits, output

    @property
    def search_index(self) -> SearchIndex | None:
        """The tree's flat search index, loaded once (None when it has none or it cannot be read)."""
        return self._load_index()

    def _load_index(self) -> SearchIndex | None:
        with self._lock:
            if self._index is None and self.has_search:
                try:
                    self._index = SearchIndex.load(self.tree.root)
                except (OSError, ValueError, KeyError):
                    return None
            return self._index

    def call(self, name: str, arguments: dict) -> str:
        """Dispatch an LLM tool call by name; bad calls come back as text, never raise."""
        arguments = arguments if isinstance(arguments, dict) else {}
        if name == "code_execution":
            return self.code_execution(str(arguments.get("command", "")))
        if name == "get_document":
            return self.get_document(arguments.get("doc_id", ""), arguments.get("offset", 0))
        if name == "search" and self.has_search:
            return self.search(arguments.get("query", ""), arguments.get("k", SEARCH_K),
                               arguments.get("mode", DEFAULT_MODE))
        names = "code_execution, get_document and search" if self.has_search else "code_execution and get_document"
        output = f"error: unknown tool {name!r}; the tools are {names}"
        self._record(name, arguments, output, time.perf_counter(), error=True)
        return output

    # -- accounting ---------------------------------------------------------------------

    @property
    def trace(self) -> list[ToolCall]:
        with self._lock:
            return list(self._trace)

    @property
    def fetched(self) -> list[str]:
        """Ids of documents read with get_document, in the order first read."""
        with self._lock:
            return list(self._fetched)

    def usage(self) -> dict:
        trace = self.trace
        nav = [c for c in trace if c.tool == "code_execution"]
        docs = [c for c in trace if c.tool == "get_document"]
        found = [c for c in trace if c.tool == "search"]
        return {
            "tool_calls": len(trace),
            "nav_calls": len(nav),
            "nav_bytes": sum(c.output_bytes for c in nav),  # what the agent saw of the tree
            "scanned_bytes": sum(c.scanned_bytes for c in nav),  # what its commands read
            "document_calls": len(docs),
            "document_bytes": sum(c.output_bytes for c in docs),
            "documents_fetched": len(self.fetched),
            "search_calls": len(found),
            "search_bytes": sum(c.output_bytes for c in found),  # rows of the flat fallback
            "tool_seconds": round(sum(c.seconds for c in trace), 4),
        }

    # -- internals ----------------------------------------------------------------------

    def _record(self, tool: str, arguments: dict, output: str, start: float, *, scanned: int = 0,
                error: bool = False) -> None:
        call = ToolCall(tool, dict(arguments), len(output.encode("utf-8")),
                        round(time.perf_counter() - start, 6), scanned, error)
        with self._lock:
            self._trace.append(call)

    def _document(self, doc_id: object, offset: object) -> tuple[str, bool]:
        if not isinstance(doc_id, str) or not doc_id.strip().strip("`"):
            return ("error: get_document needs a doc_id: copy it from the backticks on an "
                    "INDEX.md row, e.g. get_document(doc_id=\"...\")", False)
        # Models often keep the backticks or a stray space from the row; ids never contain them.
        key = doc_id.strip().strip("`").strip()
        try:
            offset = int(offset or 0)
        except (TypeError, ValueError):
            return f"error: offset must be a whole number of characters, not {offset!r}", False
        doc = self.tree.store.get(key)
        if doc is None:
            return self._unknown(key), False
        total = len(doc.text)
        if offset < 0 or (offset >= total and total > 0):
            return (f"error: offset {offset} is outside document {key!r}, which has "
                    f"{total:,} characters (pages start at 0)"), False
        end = min(offset + self.page_chars, total)
        nxt = (f"; next page: get_document(doc_id=\"{key}\", offset={end})" if end < total
               else "; end of document")
        with self._lock:
            self._fetched.setdefault(key, None)
        return (f"doc_id: {key}\ntitle: {' '.join(doc.title.split())}\n"
                f"chars: {offset}-{end} of {total}{nxt}\n\n{doc.text[offset:end]}"), True

    def _unknown(self, key: str) -> str:
        message = f"error: no document has doc_id {key!r}"
        if len(key) >= 6:  # a truncated id: name the candidates, never pick one silently
            with self._lock:
                if self._ids is None:
                    self._ids = self.tree.store.ids()
                ids = self._ids
            near = [i for i in ids if i.startswith(key)][:4]
            if near:
                return message + "; ids starting with it: " + ", ".join(near)
        return message + "; copy the exact id from the backticks on an INDEX.md row"


_HEADER = re.compile(r"doc_id: (?P<id>[^\n]*)\ntitle: (?P<title>[^\n]*)\n"
                     r"chars: (?P<start>\d+)-(?P<end>\d+) of (?P<total>\d+)[^\n]*\n\n")


def parse_document(output: str) -> Page | None:
    """The fields of a successful get_document reply; None for an error reply."""
    m = _HEADER.match(output)
    if not m:
        return None
    end, total = int(m["end"]), int(m["total"])
    return Page(m["id"], m["title"], output[m.end():], int(m["start"]), total,
                end if end < total else None)
