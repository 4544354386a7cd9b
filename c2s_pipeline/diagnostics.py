"""Navigability diagnostics of a compiled tree: whether an agent browsing it is expected to find
documents as well as flat retrieval would, measured when the tree is compiled.

    tree = TreeInputs(forest, cards, doc_ids, texts, vectors, soft, search, nav_files, term_index)   # or .load(art, out)
    report = diagnose(tree, embed)        # JSON-ready: manifest.json's "navigability"

What is measured:

* **collapse**: the share of documents under the largest skill and the top two (a few skills
  holding most documents is how navigation fails on homogeneous corpora);
* **sibling similarity**: cosine between the embedded nav rows of sibling nodes (rows that read
  alike cannot be told apart when routing);
* **cohesion** per level: mean cosine of a node's members to its centroid, beside the same for
  the whole corpus as a baseline;
* **path term coverage**: how much of a document's own key terms (its card's title and
  phrases) appear on the nav rows along its path (skill row, group rows, its leaf's row);
* **self-retrieval probe**: for a seeded sample of documents (up to 200, chosen by a seeded
  hash of their ids), three questions each: its title (when no other document has it), its
  lead sentence and one sentence of its body that names a detail few documents mention (at
  least two terms at most 2% of the documents use). A beam descent over the tree, scored with the
  offline navigator's weights and beam rule (:mod:`c2s_core.navigation.beam`: reciprocal-rank fusion
  of row embedding similarity, BM25 on the row, grep-like counts of the question's terms in the
  nav files below each node and the best term-index row below it; 3-5 nodes a level), reaches
  the document when a leaf it opens lists it (as a row or an ``@see`` stub): the share reached
  is the **navigability score**. The reached documents are ranked on document vector, BM25,
  card BM25 and their term-index rows for navigation's recall@5. The same questions go to the
  tree's flat BM25 index (as the agent's search tool ranks) and to dense retrieval over the
  document vectors.

The verdict compares navigation's recall@5 (not its reach: a flat method is judged on its top
five too) with the better flat method's on the same questions, by a paired bootstrap over the
sampled documents (a document's questions resampled together): "navigation" when the 95%
interval of the difference lies above zero, "flat" when below it, "either" when it straddles
zero; the same per style of question (``by_question_style``): "topic" (titles and leads: what a
document is about) and "detail" (body sentences naming a detail), which can favour different
methods.
Questions are the documents' own words, which favours BM25 over both navigation and dense
retrieval; ``navigation_over_flat`` (the ratio of the two recalls) says by how much a "flat"
verdict was reached.

Scoring shares the navigator's term rules (:mod:`c2s_core.text`) and weights and beam rule
(:mod:`c2s_core.navigation.beam`) without importing ``c2s_agent.offline``, since the compiler and the
agent do not import each other; it leaves out what the navigator adds on top (entity-index hits, related-skill jumps, backtracking, routing to search),
so the probe measures the tree, not the agent's recoveries.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import CountVectorizer

from .artifacts import CorpusArtifacts
from c2s_core.navigation.beam import (BODY_CARD_WEIGHT, BODY_WEIGHT, EVIDENCE_WEIGHT, RRF_K, TERM_JUMP_ROWS, TERM_LEAVES, TITLE_WEIGHT,
                   beam_width, term_jump)
from .hierarchy import normalise
from c2s_core.navrows import DocCard, doc_row, group_row
from c2s_core.layout import TERM_INDEX_FILE
from c2s_core.search_index import SearchIndex
from c2s_core.term_index import RowScores, TermIndex, best_by_leaf, best_rows, parse_term_index, row_scores
from c2s_core.text import clip, content_tokens, query_terms, sentences, sha256_hex, terms, title_match, tokens
from .forest import Forest, Node, build_forest

NAVIGABILITY = "navigability"  # the manifest key
SAMPLE_SIZE = 200  # documents probed
SEED = 0
TOP_K = 5  # recall@5, as the benchmarks report
BOOTSTRAP = 2000
MAX_TERMS = 12  # question terms the navigator greps for
SENTENCE_CHARS = 160  # a sentence posed as a question is clipped so
QUESTION_TERMS = 3  # content terms a sentence needs to be a question (a heading repeating the title is not)
RARE_SHARE = 0.02  # a term at most this share of the documents use is rare ...
RARE_TERMS = 2  # ... and a body sentence needs this many rare terms to be a detail question
COVERED_SHARE = 0.5  # a document is "covered" when at least this share of its key terms is on its path
COLLAPSE_SHARE = 0.6  # the least share of the documents under the largest skill that is a collapse
QUESTION_KINDS = ("title", "lead", "body")
QUESTION_STYLES = {"topic": ("title", "lead"), "detail": ("body",)}  # what a question asks of a document
STUB_TITLE_CHARS = 80  # an @see group stub shows its target's title, clipped so

Embed = Callable[[Sequence[str]], np.ndarray]  # texts -> L2-normalised rows


@dataclass
class TreeInputs:
    """What the diagnostics read of a compiled tree; the compile has all of it in memory."""

    forest: Forest
    cards: dict[str, DocCard]
    doc_ids: list[str]  # row order of ``vectors``
    texts: list[str]
    vectors: np.ndarray  # document vectors, as clustered
    soft: dict[str, list[str]]  # node id -> items it lists as @see stubs (doc ids in leaves, node ids above)
    search: SearchIndex  # the tree's flat BM25 index, as the agent's search tool ranks
    nav_files: dict[str, str]  # path -> rendered text of every nav file
    term_index: TermIndex = field(default_factory=TermIndex)  # term_index.txt, parsed

    @classmethod
    def load(cls, art: CorpusArtifacts, out: str | Path) -> TreeInputs:
        """The inputs of a compiled corpus, from its stage artifacts and its published (or staged) tree."""
        from .assets.publish import _cards  # the cards exactly as the compile rendered them
        from .incremental import previous_names

        forest = build_forest(art, previous_names(art))  # named as published
        docs = art.read_table("documents.parquet")
        return cls(forest, _cards(art), docs["doc_id"].to_list(), docs["text"].to_list(),
                   art.read_matrix("doc_vectors.npy"), soft_members(art), SearchIndex.load(out),
                   {n.nav_file: (Path(out) / n.nav_file).read_text(encoding="utf-8") for n in forest.nodes()},
                   _term_index(Path(out)))


def _term_index(out: Path) -> TermIndex:
    """A tree's term_index.txt, parsed (trees compiled before it have none)."""
    path = out / TERM_INDEX_FILE
    return parse_term_index(path.read_text(encoding="utf-8")) if path.is_file() else TermIndex()


def soft_members(art: CorpusArtifacts) -> dict[str, list[str]]:
    """Node id -> the items soft assignment lists there as ``@see`` stubs."""
    soft: dict[str, list[str]] = {}
    for level in art.used_levels():
        frame = art.final_placements(level)
        for item, runner_up in frame.filter(frame["runner_up"].is_not_null()).select("item_id", "runner_up").iter_rows():
            soft.setdefault(runner_up, []).append(item)
    return soft


def diagnose(tree: TreeInputs, embed: Embed, *, sample: int = SAMPLE_SIZE, seed: int = SEED) -> dict:
    """Every diagnostic of ``tree`` as a JSON-ready dict (see the module docstring); the same
    tree and seed give the same dict."""
    index = _TreeIndex(tree)
    questions = _questions(tree, sample, seed)
    # One embedding batch: every row the descent can score, then every question.
    vectors = embed(index.row_texts + [q for _, _, q in questions])
    row_vecs, question_vecs = vectors[: len(index.row_texts)], vectors[len(index.row_texts):]
    report = {
        "collapse": collapse(tree.forest),
        "sibling_similarity": sibling_similarity(tree.forest, index, row_vecs),
        "cohesion": cohesion(index, tree.vectors),
        "path_term_coverage": path_term_coverage(tree, index),
        "probe": _probe(tree, index, questions, row_vecs, question_vecs, seed),
    }
    probe = report["probe"]
    report["navigability_score"] = probe["reach"]["rate"]
    report["verdict"] = probe["verdict"]
    report["verdict_by_question_style"] = {k: v["verdict"] for k, v in probe.get("by_question_style", {}).items()}
    return report


# -- structure -------------------------------------------------------------------------------------

def collapse(forest: Forest) -> dict:
    """Shares of the largest skills. Collapsed: the largest holds at least COLLAPSE_SHARE of the
    documents and at least half way from an even share to all of them (75% of two skills, 67%
    of three, 60% from five on), so 80/20 over two skills counts and 40% of ten does not; one
    skill alone is a small corpus, not a collapse."""
    sizes = sorted((len(s.documents()) for s in forest.skills), reverse=True)
    total = sum(sizes) or 1
    largest, top2 = sizes[0] / total, sum(sizes[:2]) / total
    threshold = max(COLLAPSE_SHARE, (1 + 1 / len(sizes)) / 2)
    return {"skills": len(sizes), "largest_share": round(largest, 4), "top2_share": round(top2, 4),
            "collapsed": len(sizes) > 1 and largest >= threshold}


class _TreeIndex:
    """The forest as arrays: nodes in walk order, the rows the navigator scores them by, which
    documents lie below each node, and term matrices of rows and cards."""

    def __init__(self, tree: TreeInputs):
        self.nodes: list[Node] = list(tree.forest.nodes())
        self.at = {n.node_id: i for i, n in enumerate(self.nodes)}
        self.doc_row = {d: i for i, d in enumerate(tree.doc_ids)}
        # A node's row as its parent lists it (a skill's: the preloaded name and description)...
        self.row_texts = [_row_text(n.name, n.description if n.is_skill else group_row(n).partition(" — ")[2])
                          for n in self.nodes]
        self.row_size = [n.size for n in self.nodes]
        # ... and, for a group softly assigned elsewhere too, its @see stub there.
        self.stub_rows: dict[str, list[int]] = {}  # parent node id -> stub rows
        self.row_node: list[int] = list(range(len(self.nodes)))
        for parent, items in tree.soft.items():
            for item in items:
                if item in self.at:
                    node = self.nodes[self.at[item]]
                    self.stub_rows.setdefault(parent, []).append(len(self.row_texts))
                    self.row_texts.append(_row_text(node.name, clip(node.title, STUB_TITLE_CHARS)))
                    self.row_node.append(self.at[item])
                    self.row_size.append(0)  # stubs show no count; the navigator takes the mean
        self.leaf_docs = {n.node_id: list(n.members) + [d for d in tree.soft.get(n.node_id, []) if d in self.doc_row]
                          for n in self.nodes if n.level == 1}
        rows, cols = [], []
        for i, node in enumerate(self.nodes):
            for d in node.documents():
                rows.append(i)
                cols.append(self.doc_row[d])
        self.below = sparse.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)),
                                       shape=(len(self.nodes), len(tree.doc_ids)))
        self.row_nodes, self.row_sizes = np.array(self.row_node), np.array(self.row_size, dtype=float)
        self.row_terms = CountVectorizer(analyzer=terms)
        self.row_counts = self.row_terms.fit_transform(self.row_texts).tocsr()
        self.row_lengths = np.asarray(self.row_counts.sum(axis=1), dtype=float).ravel()
        # What `grep -rih '\<TERM' <node's folder> | wc -l` counts: lines of the nav files at and
        # below the node (cards, summaries, stubs) holding a word that starts with the term.
        lines, owner = [], []
        for i, node in enumerate(self.nodes):
            for line in tree.nav_files[node.nav_file].splitlines():
                if line.strip():
                    lines.append(line)
                    owner.append(i)
        subtree = [(i, self.at[d.node_id]) for i, node in enumerate(self.nodes) for d in node.walk()]
        within = sparse.csr_matrix((np.ones(len(subtree), dtype=np.float32), tuple(zip(*subtree))),
                                   shape=(len(self.nodes), len(self.nodes)))
        owns = sparse.csr_matrix((np.ones(len(lines), dtype=np.float32), (owner, range(len(lines)))),
                                 shape=(len(self.nodes), len(lines)))
        self.lines_below = (within @ owns).tocsr()
        self.subtree = [within[i].indices for i in range(len(self.nodes))]  # node -> nodes at and below it
        # term_index.txt's places as documents: a leaf's rows are its primary members, in order.
        self.term_index = tree.term_index
        nav_node = {n.nav_file: i for i, n in enumerate(self.nodes)}
        self.term_leaf_node = {number: nav_node[nav] for number, nav in self.term_index.leaves.items() if nav in nav_node}
        self.node_term_leaf = {node: number for number, node in self.term_leaf_node.items()}
        self.leaf_rows = {i: [self.doc_row[d] for d in n.members] for i, n in enumerate(self.nodes) if n.level == 1}
        self.line_words = CountVectorizer(analyzer=tokens, binary=True)
        self.line_hits = self.line_words.fit_transform(lines).tocsc()
        self.line_vocab = np.array(self.line_words.get_feature_names_out())
        self._lines_with: dict[str, np.ndarray] = {}
        # The cards of the leaves' rows, for ranking the documents a descent reaches.
        self.card_terms = CountVectorizer(analyzer=terms)
        self.card_counts = self.card_terms.fit_transform([doc_row(tree.cards[d]) for d in tree.doc_ids]).tocsr()
        self.title_terms = [terms(tree.cards[d].title) for d in tree.doc_ids]  # tokenised once, not per question

    def lines_with(self, term: str) -> np.ndarray:
        """Which nav-file lines hold a word starting with ``term`` (0/1 per line)."""
        if term not in self._lines_with:
            lo, hi = np.searchsorted(self.line_vocab, [term, term + "\uffff"])
            self._lines_with[term] = (np.asarray(self.line_hits[:, lo:hi].sum(axis=1)).ravel() > 0).astype(np.float32)
        return self._lines_with[term]


def _row_text(name: str, description: str) -> str:
    return f"{name.replace('-', ' ')}: {description}"


def sibling_similarity(forest: Forest, index: _TreeIndex, row_vecs: np.ndarray) -> dict:
    """Cosine between the rows of siblings: the skills, and each node's sub-groups."""
    families = [forest.skills] + [n.children for n in index.nodes if n.level > 1]
    every, top = [], []
    for depth, family in enumerate(families):
        if len(family) < 2:
            continue
        block = row_vecs[[index.at[n.node_id] for n in family]]
        sims = (block @ block.T)[np.triu_indices(len(family), k=1)]
        every.append(sims)
        if depth == 0:
            top = sims
    if not every:
        return {"pairs": 0, "mean": None, "max": None, "top_level_mean": None, "top_level_max": None}
    pairs = np.concatenate(every)
    return {"pairs": len(pairs), "mean": round(float(pairs.mean()), 4), "max": round(float(pairs.max()), 4),
            "top_level_mean": round(float(np.mean(top)), 4) if len(top) else None,
            "top_level_max": round(float(np.max(top)), 4) if len(top) else None}


def cohesion(index: _TreeIndex, vectors: np.ndarray) -> dict:
    """Per level, the mean over nodes of their members' mean cosine to the node centroid; a
    group's members are its children, each the centroid of its documents."""
    unit = normalise(vectors)
    node_vecs = normalise(np.asarray(index.below @ unit))
    levels: dict[str, float] = {}
    for level in sorted({n.level for n in index.nodes}):
        values = []
        for node in (n for n in index.nodes if n.level == level):
            members = (unit[[index.doc_row[d] for d in node.members]] if level == 1
                       else node_vecs[[index.at[c.node_id] for c in node.children]])
            centre = normalise(members.mean(axis=0, keepdims=True))[0]
            values.append(float((members @ centre).mean()))
        levels[f"level_{level}"] = round(float(np.mean(values)), 4)
    centre = normalise(unit.mean(axis=0, keepdims=True))[0]
    return {**levels, "corpus": round(float((unit @ centre).mean()), 4)}


def path_term_coverage(tree: TreeInputs, index: _TreeIndex) -> dict:
    """How much of each document's key terms (card title and phrases) its path's rows carry."""
    path_terms: dict[str, set[str]] = {}
    for node in index.nodes:
        if node.level == 1:
            words, step = set(), node
            while step is not None:
                words |= set(terms(index.row_texts[index.at[step.node_id]]))
                step = step.parent
            path_terms[node.node_id] = words
    shares = []
    for node in index.nodes:
        if node.level == 1:
            for d in node.members:
                card = tree.cards[d]
                own = set(query_terms(f"{card.title} {' '.join(card.phrases)}"))
                if own:
                    shares.append(len(own & path_terms[node.node_id]) / len(own))
    shares = np.array(shares) if shares else np.zeros(1)
    return {"documents": round(float((shares >= COVERED_SHARE).mean()), 4), "mean_share": round(float(shares.mean()), 4),
            "covered_at": COVERED_SHARE}


# -- the self-retrieval probe ----------------------------------------------------------------------

def probe_sample(doc_ids: Sequence[str], size: int, seed: int) -> list[int]:
    """Rows of the documents probed: the ``size`` smallest by a seeded hash of their id, so the
    sample is fixed for a seed and a recompile after a few edits probes nearly the same
    documents (their questions' embeddings come from the cache)."""
    keys = [sha256_hex(f"{seed}:{d}") for d in doc_ids]
    return sorted(sorted(range(len(doc_ids)), key=keys.__getitem__)[:size])


def _questions(tree: TreeInputs, sample: int, seed: int) -> list[tuple[int, str, str]]:
    """(document row, kind, question) for each sampled document: its title, its lead sentence,
    and one sentence drawn from its body that asks about a detail of that document."""
    out = []
    # A title shared with other documents (sections named "Options") names none of them: only a
    # title whose terms no other title has is posed, as a known-item question would be.
    titles = Counter(frozenset(query_terms(tree.cards[d].title)) for d in tree.doc_ids)
    specific = _specific(tree)
    for row in probe_sample(tree.doc_ids, sample, seed):
        title = tree.cards[tree.doc_ids[row]].title
        title_terms = set(query_terms(title))
        if title_terms and titles[frozenset(title_terms)] == 1:
            out.append((row, "title", title))
        said = [clip(s, SENTENCE_CHARS) for s in sentences(tree.texts[row])
                if len(words := set(query_terms(s))) >= QUESTION_TERMS and not words <= title_terms]
        if said:
            out.append((row, "lead", said[0]))
        details = [s for s in said[1:] if specific(s)]
        if details:  # which one: seeded by the document, like the sample
            pick = int(sha256_hex(f"{seed}:{tree.doc_ids[row]}:body"), 16) % len(details)
            out.append((row, "body", details[pick]))
    return out


def _specific(tree: TreeInputs) -> Callable[[str], bool]:
    """Whether a sentence asks about something few documents mention: at least
    :data:`RARE_TERMS` of the terms the navigator would grep for are used by at most
    :data:`RARE_SHARE` of the documents (an option name, an error code), as an FAQ entry about a
    page does. A body sentence of common words ("The default is off.") is said by many
    documents, so a hit on any one of them is as right as on its own and the sentence has no
    single gold."""
    used = Counter(t for d, text in zip(tree.doc_ids, tree.texts)
                   for t in set(query_terms(tree.cards[d].title + "\n" + text)))
    rare_at = max(1.0, RARE_SHARE * len(tree.doc_ids))
    return lambda sentence: sum(used[t] <= rare_at for t in query_terms(sentence)[:MAX_TERMS]) >= RARE_TERMS


def _bm25(tf: np.ndarray, lengths: np.ndarray, k1: float = 1.2, b: float = 0.75) -> np.ndarray:
    """BM25 of one query over a small candidate set (rows of ``tf``: candidates, columns:
    query terms), IDF from the set itself, as the navigator scores rows."""
    n = tf.shape[0]
    df = (tf > 0).sum(axis=0)
    idf = np.where(df > 0, np.log1p((n - df + 0.5) / (df + 0.5)), 0.0)
    norm = k1 * (1 - b + b * lengths / (lengths.mean() or 1.0))
    return (idf * tf * (k1 + 1) / (tf + norm[:, None])).sum(axis=1)


def _rrf(*signals: np.ndarray, weights: Sequence[float] | None = None) -> np.ndarray:
    """Reciprocal rank fusion; ties share the better rank."""
    total = 0.0
    for weight, scores in zip(weights or [1.0] * len(signals), signals):
        ordered = np.sort(-scores)
        total = total + weight / (RRF_K + 1 + np.searchsorted(ordered, -scores, side="left"))
    return total


def _stable_rank(scores: np.ndarray, row: int) -> int:
    """``row``'s place in a stable descending sort of ``scores`` (ties in row order), as the
    search tool orders its hits."""
    mine = scores[row]
    return int((scores > mine).sum() + (scores[:row] == mine).sum())


def _term_columns(vectorizer: CountVectorizer, counts: sparse.csr_matrix, words: list[str]) -> np.ndarray:
    """Counts of ``words`` in every row of ``counts`` (rows x words, dense)."""
    vocab = vectorizer.vocabulary_
    cols = [vocab[w] for w in words if w in vocab]
    return counts[:, cols].toarray() if cols else np.zeros((counts.shape[0], 1))


class _Descent:
    """One question's beam descent, scored as the offline navigator scores nodes."""

    def __init__(self, index: _TreeIndex, forest: Forest, question: str, row_sims: np.ndarray):
        self.index, self.forest, self.row_sims = index, forest, row_sims
        self.qterms = query_terms(question)[:MAX_TERMS]
        hits = (np.stack([index.lines_with(t) for t in self.qterms], axis=1) if self.qterms
                else np.zeros((index.lines_below.shape[1], 0), dtype=np.float32))
        self.counts = np.asarray(index.lines_below @ hits)  # node x term: grep counts below the node
        lines = self.counts[[index.at[s.node_id] for s in forest.skills]].sum(axis=0)
        self.idf = np.where(lines > 0, np.log1p(index.below.shape[1] / (1.0 + lines)), 0.0)
        self.row_tf = _term_columns(index.row_terms, index.row_counts, self.qterms)
        self.row_scores, self.leaf_best, self.doc_body = self._term_index_scores()

    def _term_index_scores(self) -> tuple[RowScores, np.ndarray, np.ndarray]:
        """What the navigator's term-index reads give: the question's row scores (by leaf number
        and row); per leaf node, its best row's score, for the :data:`TERM_LEAVES` best leaves
        (those whose folders the survey looks up); and per document, the idf of the question's
        listed terms it uses (for ranking the leaves reached)."""
        index = self.index
        listed = index.term_index
        scores = row_scores(listed.lines(self.qterms), len(index.doc_row))
        doc_body = np.zeros(len(index.doc_row))
        for (leaf, r), score in scores.items():
            members = index.leaf_rows.get(index.term_leaf_node.get(leaf), [])
            if 1 <= r <= len(members):
                doc_body[members[r - 1]] += score
        best = best_by_leaf(scores)
        leaf_best = np.zeros(len(index.nodes))
        for leaf in sorted(best, key=lambda n: (-best[n], n))[:TERM_LEAVES]:
            if (node := index.term_leaf_node.get(leaf)) is not None:
                leaf_best[node] = best[leaf]
        return scores, leaf_best, doc_body

    def score(self, rows: list[int]) -> np.ndarray:
        index = self.index
        lex = _bm25(self.row_tf[rows], index.row_lengths[rows])
        sizes = index.row_sizes[rows].copy()
        sizes[sizes <= 0] = sizes[sizes > 0].mean() if (sizes > 0).any() else 1.0
        grep = self.counts[index.row_nodes[rows]]
        norm = 1.2 * (0.25 + 0.75 * sizes / sizes.mean())
        evidence = (self.idf * grep * 2.2 / (grep + norm[:, None])).sum(axis=1)
        body = np.array([self.leaf_best[index.subtree[n]].max() for n in index.row_nodes[rows]])
        return _rrf(self.row_sims[rows], lex, evidence, body, weights=(1.0, 1.0, EVIDENCE_WEIGHT, BODY_WEIGHT))

    def leaves(self) -> tuple[list[str], list[int], float]:
        """The leaves opened (node ids), the documents read in the leaves the term index led to
        (document rows) and the mean of the widths the levels chose."""
        index = self.index
        frontier = [index.at[s.node_id] for s in self.forest.skills]
        opened: set[int] = set()
        leaves, widths = [], []
        while frontier:
            scores = self.score(frontier)
            order = np.argsort(-scores, kind="stable")
            widths.append(beam_width(scores[order]))
            width = widths[-1]
            nxt: list[int] = []
            listed: set[int] = set()  # a group listed twice (a row here, an @see stub there) is one candidate
            for r in (frontier[i] for i in order[:width]):
                node_at = index.row_node[r]
                if node_at in opened:
                    continue
                opened.add(node_at)
                node = index.nodes[node_at]
                if node.level == 1:
                    leaves.append(node.node_id)
                    continue
                for row in [index.at[c.node_id] for c in node.children] + index.stub_rows.get(node.node_id, []):
                    if index.row_node[row] not in listed and index.row_node[row] not in opened:
                        listed.add(index.row_node[row])
                        nxt.append(row)
            frontier = nxt
        # The navigator also reads the best rows of the leaves with term-index rows as good as
        # any in the leaves reached.
        best = {int(n): float(self.leaf_best[n]) for n in np.flatnonzero(self.leaf_best)}
        jump = term_jump(best, (index.at[n] for n in leaves), opened)
        read = [index.leaf_rows[node][r - 1] for node in jump
                for r in best_rows(self.row_scores, index.node_term_leaf[node], TERM_JUMP_ROWS)]
        return leaves, read, float(np.mean(widths))


def _probe(tree: TreeInputs, index: _TreeIndex, questions: list[tuple[int, str, str]], row_vecs: np.ndarray,
           question_vecs: np.ndarray, seed: int) -> dict:
    if not questions:  # no document has a usable title or sentence: nothing to measure
        empty = {"rate": None, "low": None, "high": None}
        return {"documents": 0, "questions": 0, "seed": seed, "beam": {"min": 0, "mean": 0.0, "max": 0},
                "reach": empty, "navigation_recall_at_5": empty,
                "flat_recall_at_5": {"bm25": empty, "dense": empty, "best": "bm25"},
                "navigation_minus_flat": {"mean": None, "low": None, "high": None}, "verdict": "either"}
    # Every question against every row and document in two products, not one per question.
    dense_all = question_vecs @ normalise(tree.vectors).T
    row_sims_all = question_vecs @ row_vecs.T
    search_row = {d["doc_id"]: i for i, d in enumerate(tree.search.docs)}
    to_search = np.array([search_row[d] for d in tree.doc_ids])  # document row -> search index row
    reach, nav_hit, bm25_hit, dense_hit, beams = [], [], [], [], []
    for q, (row, _, question) in enumerate(questions):
        descent = _Descent(index, tree.forest, question, row_sims_all[q])
        leaves, jumped, beam = descent.leaves()
        beams.append(beam)
        candidates = list(dict.fromkeys([index.doc_row[d] for leaf in leaves for d in index.leaf_docs[leaf]] + jumped))
        searched = tree.search.scores(question)
        if not len(searched):
            searched = np.zeros(len(tree.doc_ids))
        reach.append(row in candidates)
        nav_hit.append(row in _rank(index, descent, candidates, dense_all[q], searched[to_search])[:TOP_K])
        at = int(to_search[row])
        bm25_hit.append(searched[at] > 0 and _stable_rank(searched, at) < TOP_K)
        dense_hit.append(_stable_rank(dense_all[q], row) < TOP_K)
    docs = np.array([row for row, _, _ in questions])
    kinds = np.array([kind for _, kind, _ in questions])
    rng = np.random.default_rng(seed)
    groups = _bootstrap_groups(docs, rng)
    outcomes = {name: np.array(v, dtype=float) for name, v in
                (("reach", reach), ("navigation", nav_hit), ("bm25", bm25_hit), ("dense", dense_hit))}
    best_flat = "bm25" if outcomes["bm25"].mean() >= outcomes["dense"].mean() else "dense"
    gain = outcomes["navigation"] - outcomes[best_flat]
    difference = _interval(gain, groups, key="mean")
    verdict = _verdict(difference)
    # Per style of question: a title or lead sentence asks what a document is about (as a
    # known-item search or a help-center question does), a body sentence asks a detail (as an
    # FAQ drawn from reference text does); the two can favour different methods.
    by_style = {}
    for style, members in QUESTION_STYLES.items():
        mask = np.isin(kinds, members)
        if mask.any():
            interval = _interval(gain[mask], groups[:, mask], key="mean")
            by_style[style] = {**interval, "verdict": _verdict(interval)}

    def by_kind(values: np.ndarray) -> dict:
        return {k: round(float(values[kinds == k].mean()), 4) for k in QUESTION_KINDS if (kinds == k).any()}

    return {
        "documents": len(set(docs.tolist())), "questions": len(questions), "seed": seed,
        "sample_digest": sha256_hex(*sorted(tree.doc_ids[r] for r in set(docs.tolist())))[:12],
        "beam": {"min": round(float(min(beams)), 2), "mean": round(float(np.mean(beams)), 2),
                 "max": round(float(max(beams)), 2)},
        "reach": _interval(outcomes["reach"], groups),
        "navigation_recall_at_5": _interval(outcomes["navigation"], groups),
        "flat_recall_at_5": {"bm25": _interval(outcomes["bm25"], groups), "dense": _interval(outcomes["dense"], groups),
                             "best": best_flat},
        "navigation_minus_flat": difference,
        "by_question_style": by_style,
        "navigation_over_flat": (round(float(outcomes["navigation"].mean() / outcomes[best_flat].mean()), 4)
                                 if outcomes[best_flat].mean() else None),
        "verdict": verdict,
        "by_question": {"reach": by_kind(outcomes["reach"]), "navigation": by_kind(outcomes["navigation"]),
                        best_flat: by_kind(outcomes[best_flat])},
    }


def _verdict(difference: dict) -> str:
    """From the 95% interval of navigation's recall@5 minus the best flat method's."""
    if difference["low"] is None:
        return "either"
    return "navigation" if difference["low"] > 0 else "flat" if difference["high"] < 0 else "either"


def _rank(index: _TreeIndex, descent: _Descent, candidates: list[int], dense: np.ndarray, flat: np.ndarray) -> list[int]:
    """The reached documents ranked as the navigator ranks opened leaves: document embedding,
    BM25 on the document and BM25 on the card, the term-index rows and how closely the title
    restates the question, fused."""
    if not candidates:
        return []
    counts = index.card_counts[candidates]
    card = _bm25(_term_columns(index.card_terms, counts, descent.qterms), np.asarray(counts.sum(axis=1), dtype=float).ravel())
    weights = dict(zip(descent.qterms, descent.idf.tolist()))
    title = np.array([title_match(descent.qterms, index.title_terms[c], weights) for c in candidates])
    fused = _rrf(dense[candidates], flat[candidates], card, descent.doc_body[candidates], title,
                 weights=(1.0, 1.0, 1.0, BODY_CARD_WEIGHT, TITLE_WEIGHT))
    return [candidates[i] for i in np.argsort(-fused, kind="stable")]


def _bootstrap_groups(docs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """BOOTSTRAP resamples of the sampled documents (a document's questions move together), as
    a (resamples x questions) weight matrix."""
    unique, which = np.unique(docs, return_inverse=True)
    draws = rng.integers(0, len(unique), size=(BOOTSTRAP, len(unique)))
    per_doc = np.zeros((BOOTSTRAP, len(unique)))
    np.add.at(per_doc, (np.repeat(np.arange(BOOTSTRAP), len(unique)), draws.ravel()), 1.0)
    return per_doc[:, which]


def _interval(values: np.ndarray, weights: np.ndarray, key: str = "rate") -> dict:
    """Mean with its 95% bootstrap interval."""
    if not len(values):
        return {key: None, "low": None, "high": None}
    means = (weights @ values) / weights.sum(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {key: round(float(values.mean()), 4), "low": round(float(low), 4), "high": round(float(high), 4)}


def summary_line(report: dict) -> str:
    """One line for the compile summary."""
    probe = report["probe"]
    flat = probe["flat_recall_at_5"][probe["flat_recall_at_5"]["best"]]
    nav = probe["navigation_recall_at_5"]

    def show(v: dict) -> str:
        return "n/a" if v["rate"] is None else f"{v['rate']:.2f} [{v['low']:.2f}, {v['high']:.2f}]"

    styles = ", ".join(f"{k} questions {v}" for k, v in report.get("verdict_by_question_style", {}).items())
    ratio = probe.get("navigation_over_flat")
    return (f"reach {show(probe['reach'])}, navigation recall@5 {show(nav)}, flat ({probe['flat_recall_at_5']['best']}) "
            f"recall@5 {show(flat)}" + (f" ({ratio:.2f}x)" if ratio is not None else "")
            + f" on {probe['questions']} questions; expected winner: {report['verdict']}"
            + (f" ({styles})" if styles else ""))



def navigability_metadata(report: dict) -> dict:
    """The diagnostics as Dagster metadata: the headline numbers, and the whole report."""
    from dagster import MetadataValue

    probe = report["probe"]
    flat = probe["flat_recall_at_5"][probe["flat_recall_at_5"]["best"]]
    numbers = {
        "navigability_score": probe["reach"]["rate"],
        "navigation_recall_at_5": probe["navigation_recall_at_5"]["rate"],
        "flat_recall_at_5": flat["rate"],
        "navigation_over_flat": probe.get("navigation_over_flat"),
        "largest_skill_share": report["collapse"]["largest_share"],
        "top2_skill_share": report["collapse"]["top2_share"],
        "sibling_similarity_mean": report["sibling_similarity"]["mean"],
        "sibling_similarity_max": report["sibling_similarity"]["max"],
        "path_term_coverage": report["path_term_coverage"]["documents"],
        **{f"cohesion_{level}": value for level, value in report["cohesion"].items()},
    }
    return {
        **{name: MetadataValue.float(float(value)) for name, value in numbers.items() if value is not None},
        "navigability_verdict": MetadataValue.text(report["verdict"]),
        **{f"navigability_verdict_{style}": MetadataValue.text(verdict)
           for style, verdict in report.get("verdict_by_question_style", {}).items()},
        "navigability_summary": MetadataValue.text(summary_line(report)),
        NAVIGABILITY: MetadataValue.json(report),
    }


def navigability_warnings(report: dict) -> list[str]:
    """What the compile summary warns about: navigation not expected to win, a collapsed top level."""
    warnings = []
    if report["verdict"] == "flat":
        probe = report["probe"]
        best = probe["flat_recall_at_5"]["best"]
        warnings.append(f"flat retrieval is expected to beat navigating this tree (self-retrieval recall@5: "
                        f"navigation {probe['navigation_recall_at_5']['rate']:.2f}, {best} "
                        f"{probe['flat_recall_at_5'][best]['rate']:.2f}); keep the agent's search routing on")
    top = report["collapse"]
    if top["collapsed"]:
        warnings.append(f"the largest of {top['skills']} skills holds {top['largest_share']:.0%} of the documents; "
                        "routing at the top level separates little")
    return warnings
