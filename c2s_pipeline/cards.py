"""The documents' cards as the compile renders them on nav rows, read from a corpus's stage artifacts."""

from __future__ import annotations

from .artifacts import CorpusArtifacts
from .render import DocCard


def read_cards(art: CorpusArtifacts) -> dict[str, DocCard]:
    """Doc id -> its card (title, one-line summary, phrases, identifiers), from cards.parquet."""
    frame = art.read_table("cards.parquet")
    return {r["doc_id"]: DocCard(r["doc_id"], r["title"], r["one_line"], list(r["phrases"]),
                                 list(r.get("identifiers") or []))
            for r in frame.iter_rows(named=True)}
