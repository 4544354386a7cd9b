"""Navigability diagnostics of a compiled tree: whether an agent browsing it is expected to find
documents as well as flat retrieval would, measured when the tree is compiled.

    tree = TreeInputs(forest, cards, doc_ids, texts, vectors, soft, search, nav_files, term_index)   # or .load(art, out)
    report = diagnose(tree, embed)        # JSON-ready: manifest.json's "navigability"

What is measured:

* **collapse**: the share of documents under the largest skill and the top two (a few skills
  holding most documents is how navigation fails on homogeneous corpora);
* **sibling similarity**: cosine between the embedded nav rows of sibling nodes (rows that read
  alike cannot be told apart when routing): the skills, and the sub-groups of every node, or of
  a fixed hashed sample of 300 nodes on a large tree;
* **cohesion** per level: mean cosine of a node's members to its centroid, beside the same for
  the whole corpus as a baseline;
* **path term coverage**: how much of a document's own key terms (its card's title and
  phrases) appear on the nav rows along its path (skill row, group rows, its leaf's row);
* **self-retrieval probe**: for a seeded sample of documents (up to 200, chosen by a seeded
  hash of their ids), three questions each: its title (when no other document has it), its
  lead sentence and one sentence of its body that names a detail few documents mention (at
  least two terms at most 2% of the documents use). Each question is navigated by the offline
  navigator's engine (:mod:`c2s_core.navigation.engine`) over the compile's in-memory artifacts
  (:class:`~c2s_pipeline.tree_view.CompiledView`, which answers as the agent's tools would on
  the published tree): the same survey, beam descent, term-index jump and ranking of the
  reached documents, without the navigator's fallbacks. The document is reached when the
  navigation's candidates hold it (a leaf row, an ``@see`` stub, a term-index row read): the
  share reached is the **navigability score**; navigation's recall@5 is its place in the
  engine's final ranking. The same questions go to the tree's flat search index in each of its
  modes, as the agent's search tool and the evaluation rank: BM25, dense retrieval over the
  document vectors, and their hybrid.

The verdict compares navigation's recall@5 (not its reach: a flat method is judged on its top
five too) with the best flat method's (of bm25, dense and hybrid, as the evaluation judges) on the
same questions, by a paired bootstrap over the sampled documents (a document's questions
resampled together): "navigation" when the 95% interval of the difference lies above a margin
(``margin``: 5% of the flat method's recall, :data:`~c2s_core.navigation.stats.EQUIVALENCE`),
"flat" when below minus the margin, "either" else: a gap of a point or two on the probe's
questions is on par for a user, and on the development corpora such gaps measured ties on real
questions. The same per style of question (``by_question_style``): "topic" (titles and leads:
what a document is about) and "detail" (body sentences naming a detail), which can favour
different methods.
Questions are the documents' own words, which favours BM25 over both navigation and dense
retrieval; ``navigation_over_flat`` (the ratio of the two recalls) says by how much a "flat"
verdict was reached.

The probe runs the navigator's own engine, not a copy of it (the compiler and the agent do not
import each other; both import the engine from ``c2s_core``); it leaves out what the navigator
adds on top (entity-index hits, related-skill jumps, backtracking, routing to search), so the
probe measures the tree, not the agent's recoveries. A test holds the probe's descent and
ranking equal to the navigator's with those fallbacks off.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import sparse

from c2s_core.layout import TERM_INDEX_FILE
from c2s_core.navrows import DocCard, group_row
from c2s_core.navigation.engine import MAX_TERMS, Embed, Engine, Ranking
from c2s_core.navigation.gathered import gathered_map
from c2s_core.navigation.stats import EQUIVALENCE, bootstrap_groups, interval, judge
from c2s_core.search_index import SearchIndex, hybrid_scores
from c2s_core.term_index import TermIndex, document_terms, parse_term_index
from c2s_core.text import clip, query_terms, sentences, sha256_hex, terms

from .artifacts import CorpusArtifacts
from .cards import read_cards
from .forest import Forest, Node, build_forest
from .hierarchy import normalise
from .subgroups import SUBGROUPS_FILE, attach_subgroups
from .tree_view import CompiledView

NAVIGABILITY = "navigability"  # the manifest key
SAMPLE_SIZE = 200  # documents probed
SIBLING_FAMILIES = 300  # sibling families compared below the skills (a sample on larger trees)
SEED = 0
TOP_K = 5  # recall@5, as the benchmarks report
FLAT_METHODS = ("bm25", "dense", "hybrid")  # the flat methods navigation is judged against, as the evaluation's
SENTENCE_CHARS = 160  # a sentence posed as a question is clipped so
QUESTION_TERMS = 3  # content terms a sentence needs to be a question (a heading repeating the title is not)
RARE_SHARE = 0.02  # a term at most this share of the documents use is rare ...
RARE_TERMS = 2  # ... and a body sentence needs this many rare terms to be a detail question
COVERED_SHARE = 0.5  # a document is "covered" when at least this share of its key terms is on its path
COLLAPSE_SHARE = 0.6  # the least share of the documents under the largest skill that is a collapse
QUESTION_KINDS = ("title", "lead", "body")
QUESTION_STYLES = {"topic": ("title", "lead"), "detail": ("body",)}  # what a question asks of a document


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
    # Documents using each term (:func:`~c2s_core.term_index.document_terms`), as the compile
    # counted them building the term index; counted here when not given.
    document_frequency: dict[str, int] | None = None

    @classmethod
    def load(cls, art: CorpusArtifacts, out: str | Path) -> TreeInputs:
        """The inputs of a compiled corpus, from its stage artifacts and its published (or staged) tree."""
        from .incremental import previous_names

        names = previous_names(art)
        forest = build_forest(art, names)  # named as published
        if (art.root / SUBGROUPS_FILE).is_file():  # crowded leaves split as the tree was staged
            attach_subgroups(forest, art.read_json(SUBGROUPS_FILE), names)
        docs = art.read_table("documents.parquet")
        return cls(forest, read_cards(art), docs["doc_id"].to_list(), docs["text"].to_list(),
                   art.read_matrix("doc_vectors.npy"), soft_members(art), SearchIndex.load(out),
                   {n.nav_file: (Path(out) / n.nav_file).read_text(encoding="utf-8") for n in forest.nodes()},
                   _term_index(Path(out)))


    def view(self) -> CompiledView:
        """The tree as the navigation engine reads it (the probe's side of the parity test)."""
        return CompiledView(self.nav_files, {d: c.title for d, c in self.cards.items()},
                            dict(zip(self.doc_ids, self.texts)), self.term_index, self.search)


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


def diagnose(tree: TreeInputs, embed: Embed, *, sample: int = SAMPLE_SIZE, seed: int = SEED,
             on_progress: Callable[[int, int], None] | None = None) -> dict:
    """Every diagnostic of ``tree`` as a JSON-ready dict (see the module docstring); the same
    tree and seed give the same dict. ``on_progress(done, total)`` follows the probe's questions."""
    index = _TreeIndex(tree)
    questions = _questions(tree, sample, seed)
    view = tree.view()
    families = sibling_families(tree.forest)
    compared = list(dict.fromkeys(n.node_id for family in families for n in family))
    # One embedding batch: the rows of the sampled sibling families and every question. The
    # rows navigation scores and the leaf cards it ranks are embedded as questions reach them,
    # so the probe's cost follows its sampled questions, not the corpus size; documents read
    # are scored by the vectors the tree ships.
    texts = [index.row_texts[index.at[n]] for n in compared] + [q for _, _, q in questions]
    vectors = embed(texts)
    report = {
        "collapse": collapse(tree.forest),
        "sibling_similarity": sibling_similarity(families, dict(zip(compared, vectors))),
        "cohesion": cohesion(index, tree.vectors),
        "path_term_coverage": path_term_coverage(tree, index),
        "probe": _probe(tree, view, embed, dict(zip(texts, vectors)), questions, vectors[len(compared):], seed,
                        on_progress),
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
    """The forest as arrays: nodes in walk order, their rows as their parents list them (a
    skill's: its name and description) and which documents lie below each node."""

    def __init__(self, tree: TreeInputs):
        self.nodes: list[Node] = list(tree.forest.nodes())
        self.at = {n.node_id: i for i, n in enumerate(self.nodes)}
        self.doc_row = {d: i for i, d in enumerate(tree.doc_ids)}
        self.row_texts = [_row_text(n.name, n.description if n.is_skill else group_row(n).partition(" — ")[2])
                          for n in self.nodes]
        rows, cols = [], []
        for i, node in enumerate(self.nodes):
            for d in node.documents():
                rows.append(i)
                cols.append(self.doc_row[d])
        self.below = sparse.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)),
                                       shape=(len(self.nodes), len(tree.doc_ids)))


def _row_text(name: str, description: str) -> str:
    return f"{name.replace('-', ' ')}: {description}"


def sibling_families(forest: Forest) -> list[list[Node]]:
    """The sibling families whose rows :func:`sibling_similarity` compares: the skills, then up
    to :data:`SIBLING_FAMILIES` nodes' sub-groups, chosen by a hash of the parent's id (every
    family of a smaller tree; the same families on a recompile). A sample: the families are
    about one per p nodes, and comparing all would embed every row of a large tree."""
    below = [n.children for n in forest.nodes() if len(n.children) >= 2]
    if len(below) > SIBLING_FAMILIES:
        below = sorted(below, key=lambda f: sha256_hex(f"siblings:{f[0].parent.node_id}"))[:SIBLING_FAMILIES]
    return [list(forest.skills), *below]


def sibling_similarity(families: list[list[Node]], row_vecs: dict[str, np.ndarray]) -> dict:
    """Cosine between the rows of siblings in each family (the first: the skills)."""
    every, top = [], []
    for depth, family in enumerate(families):
        if len(family) < 2:
            continue
        block = np.stack([row_vecs[n.node_id] for n in family])
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
            members = (unit[[index.doc_row[d] for d in node.members]] if node.is_leaf
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
        if node.is_leaf:
            words, step = set(), node
            while step is not None:
                words |= set(terms(index.row_texts[index.at[step.node_id]]))
                step = step.parent
            path_terms[node.node_id] = words
    shares = []
    for node in index.nodes:
        if node.is_leaf:
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
    used = tree.document_frequency
    if used is None:
        used = Counter(t for d, text in zip(tree.doc_ids, tree.texts) for t in document_terms(tree.cards[d].title, text))
    rare_at = max(1.0, RARE_SHARE * len(tree.doc_ids))
    return lambda sentence: sum(used.get(t, 0) <= rare_at for t in query_terms(sentence)[:MAX_TERMS]) >= RARE_TERMS


def _stable_rank(scores: np.ndarray, row: int) -> int:
    """``row``'s place in a stable descending sort of ``scores`` (ties in row order), as the
    search tool orders its hits."""
    mine = scores[row]
    return int((scores > mine).sum() + (scores[:row] == mine).sum())


def navigate(view: CompiledView, embed: Embed, question: str) -> tuple[Engine, Ranking]:
    """One probe question's navigation: the engine the offline navigator runs, without its
    fallbacks (entity hits, related-skill jumps, backtracking, routing to search), over the
    compile's artifacts; the engine says what it read and the widths it chose."""
    engine = Engine(view, embed)
    return engine, engine.navigate(question)


def _probe(tree: TreeInputs, view: CompiledView, embed: Embed, known: dict[str, np.ndarray],
           questions: list[tuple[int, str, str]], question_vecs: np.ndarray, seed: int,
           on_progress: Callable[[int, int], None] | None = None) -> dict:
    if not questions:  # no document has a usable title or sentence: nothing to measure
        empty = {"rate": None, "low": None, "high": None}
        return {"documents": 0, "questions": 0, "seed": seed, "beam": {"min": 0, "mean": 0.0, "max": 0},
                "reach": empty, "navigation_recall_at_5": empty,
                "flat_recall_at_5": {"bm25": empty, "dense": empty, "hybrid": empty, "best": "bm25"},
                "navigation_minus_flat": {"mean": None, "low": None, "high": None, "margin": None},
                "verdict": "either"}
    # Every question against every document in one product, not one per question.
    dense_all = question_vecs @ normalise(tree.vectors).T
    search_row = {d["doc_id"]: i for i, d in enumerate(tree.search.docs)}
    tree_row = {d: i for i, d in enumerate(tree.doc_ids)}
    in_search_order = np.array([tree_row[d["doc_id"]] for d in tree.search.docs], dtype=np.int64)
    # The questions navigate on worker threads whose embeddings are encoded together (the
    # results are those of one question after another).
    navigated = gathered_map(lambda question, shared: navigate(view, shared, question),
                             [question for _, _, question in questions], embed, known=known, on_done=on_progress)
    reach, nav_hit, bm25_hit, dense_hit, hybrid_hit, beams = [], [], [], [], [], []
    for q, ((row, _, question), (engine, found)) in enumerate(zip(questions, navigated)):
        beams.append(float(np.mean(engine.widths)) if engine.widths else 0.0)
        doc_id = tree.doc_ids[row]
        reach.append(doc_id in found.cards)
        nav_hit.append(doc_id in found.ranked[:TOP_K])
        searched = tree.search.scores(question)
        at = search_row[doc_id]
        bm25_hit.append(len(searched) > 0 and searched[at] > 0 and _stable_rank(searched, at) < TOP_K)
        dense_hit.append(_stable_rank(dense_all[q], row) < TOP_K)
        # The search tool's hybrid: both full rankings fused, as the evaluation's hybrid ranks.
        hybrid = hybrid_scores(searched, dense_all[q][in_search_order]) if len(searched) else searched
        hybrid_hit.append(len(hybrid) > 0 and _stable_rank(hybrid, at) < TOP_K)
    docs = np.array([row for row, _, _ in questions])
    kinds = np.array([kind for _, kind, _ in questions])
    rng = np.random.default_rng(seed)
    groups = bootstrap_groups(docs, rng)
    outcomes = {name: np.array(v, dtype=float) for name, v in
                (("reach", reach), ("navigation", nav_hit), ("bm25", bm25_hit), ("dense", dense_hit),
                 ("hybrid", hybrid_hit))}
    # The best flat method as the evaluation picks it: of bm25, dense and hybrid (ties: that order).
    best_flat = max(FLAT_METHODS, key=lambda m: (outcomes[m].mean(), -FLAT_METHODS.index(m)))
    gain = outcomes["navigation"] - outcomes[best_flat]

    def judged(mask: np.ndarray) -> dict:
        return judge(gain[mask], groups[:, mask], float(outcomes[best_flat][mask].mean()))

    difference = judged(np.ones(len(gain), dtype=bool))
    decided = difference.pop("verdict")
    # Per style of question: a title or lead sentence asks what a document is about (as a
    # known-item search or a help-center question does), a body sentence asks a detail (as an
    # FAQ drawn from reference text does); the two can favour different methods.
    by_style = {}
    for style, members in QUESTION_STYLES.items():
        mask = np.isin(kinds, members)
        if mask.any():
            by_style[style] = judged(mask)

    def by_kind(values: np.ndarray) -> dict:
        return {k: round(float(values[kinds == k].mean()), 4) for k in QUESTION_KINDS if (kinds == k).any()}

    return {
        "documents": len(set(docs.tolist())), "questions": len(questions), "seed": seed,
        "sample_digest": sha256_hex(*sorted(tree.doc_ids[r] for r in set(docs.tolist())))[:12],
        "beam": {"min": round(float(min(beams)), 2), "mean": round(float(np.mean(beams)), 2),
                 "max": round(float(max(beams)), 2)},
        "reach": interval(outcomes["reach"], groups),
        "navigation_recall_at_5": interval(outcomes["navigation"], groups),
        "flat_recall_at_5": {**{m: interval(outcomes[m], groups) for m in FLAT_METHODS}, "best": best_flat},
        "navigation_minus_flat": difference,
        "by_question_style": by_style,
        "navigation_over_flat": (round(float(outcomes["navigation"].mean() / outcomes[best_flat].mean()), 4)
                                 if outcomes[best_flat].mean() else None),
        "verdict": decided,
        "by_question": {"reach": by_kind(outcomes["reach"]), "navigation": by_kind(outcomes["navigation"]),
                        best_flat: by_kind(outcomes[best_flat])},
    }


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
        warnings.append(f"flat retrieval is expected to beat navigating this tree by more than {EQUIVALENCE:.0%} "
                        f"(self-retrieval recall@5: navigation {probe['navigation_recall_at_5']['rate']:.2f}, {best} "
                        f"{probe['flat_recall_at_5'][best]['rate']:.2f}); keep the agent's search routing on")
    top = report["collapse"]
    if top["collapsed"]:
        warnings.append(f"the largest of {top['skills']} skills holds {top['largest_share']:.0%} of the documents; "
                        "routing at the top level separates little")
    return warnings
