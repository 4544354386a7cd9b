"""Flat search on a compiled tree: recall@5 / recall@10 / MRR@10 of each ``search`` mode against
the schemes it replaced, on a QA file's gold ids.

- ``bm25-unstemmed``: the previous index (bm25s, English stop words, no stemmer);
- ``bm25``: the tree's index (the same plus PyStemmer's Snowball English stemmer);
- ``dense``: the document vectors the tree ships (the compile's card + text embeddings);
- ``dense-title-text``: title + full text embedded here with the same encoder (the previous
  ``dense`` baseline of ``c2s eval``);
- ``hybrid`` / ``hybrid-title-text``: reciprocal rank fusion (k=60) of bm25 and each dense.

    .venv/bin/python benchmarks/search_bench.py --tree OUT --qa qa.jsonl [--json results/search.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from c2s_agent.evaluation.baselines import Corpus, DenseIndex  # noqa: E402
from c2s_agent.evaluation.metrics import mrr_at, recall_at  # noqa: E402
from c2s_core.navigation.scoring import embedder, rrf  # noqa: E402
from c2s_core.search_index import RRF_K, SearchIndex  # noqa: E402
from c2s_core.tree import open_tree  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", required=True, type=Path)
    ap.add_argument("--qa", required=True, type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    items = [json.loads(line) for line in args.qa.read_text(encoding="utf-8").splitlines() if line.strip()]
    items = [q for q in items if q.get("gold_ids")]
    tree = open_tree(args.tree)
    corpus = Corpus.load(tree)
    index = SearchIndex.load(args.tree)
    if [d["doc_id"] for d in index.docs] != corpus.ids:
        raise SystemExit("the search index and the document store list different documents")
    if not index.has_vectors:
        raise SystemExit(f"{args.tree} ships no document vectors (compiled before they did)")
    old = SearchIndex.build(index.docs, corpus.texts, stemmer=None)
    title_text = DenseIndex(corpus).matrix
    embed = embedder()

    def rankings(question: str) -> dict[str, np.ndarray]:
        lexical, unstemmed = index.bm25_scores(question), old.bm25_scores(question)
        shipped = index.dense_scores(question)
        plain = title_text @ embed([question])[0]
        return {"bm25-unstemmed": unstemmed, "bm25": lexical, "dense": shipped, "dense-title-text": plain,
                "hybrid": rrf(lexical, shipped, k=RRF_K), "hybrid-title-text": rrf(lexical, plain, k=RRF_K)}

    results: dict[str, dict[str, list[float]]] = {}
    for item in items:
        for name, scores in rankings(item["question"]).items():
            ranked = [corpus.ids[i] for i in np.argsort(-scores, kind="stable")[:10]]
            row = results.setdefault(name, {"recall@5": [], "recall@10": [], "mrr@10": []})
            row["recall@5"].append(recall_at(ranked, item["gold_ids"], 5))
            row["recall@10"].append(recall_at(ranked, item["gold_ids"], 10))
            row["mrr@10"].append(mrr_at(ranked, item["gold_ids"], 10))
    summary = {name: {k: round(float(np.mean(v)), 3) for k, v in row.items()} for name, row in results.items()}
    print(f"{args.tree}: {len(corpus.ids)} documents, {len(items)} questions ({args.qa.name})")
    print(f"{'method':<20} {'R@5':>6} {'R@10':>6} {'MRR@10':>7}")
    for name, row in summary.items():
        print(f"{name:<20} {row['recall@5']:>6.3f} {row['recall@10']:>6.3f} {row['mrr@10']:>7.3f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"tree": str(args.tree), "qa": str(args.qa), "questions": len(items),
                                         "methods": summary}, indent=2))


if __name__ == "__main__":
    main()
