"""documents → doc_cards → doc_embeddings: the per-document stages."""


from pathlib import Path

import polars as pl
from dagster import Failure, MetadataValue

from ..artifacts import matrix_version, table_version
from c2s_core.encoder import embed_with_cache, embedding_text
from c2s_core.identifiers import by_rarity
from ..ingest import CorpusError, as_rows, read_corpus, source_fingerprint
from c2s_core.llm.schemas import Card, CardInput
from ..resources import EncoderResource, LLMResource, WorkspaceResource
from ..storage import download_prefix, is_s3, s3_client, s3_fingerprint
from c2s_core.text import sha256_hex
from ..workspace import CorpusSpec
from c2s_core.atomic_publish import OutputError, check_output
from ._stage import SELF_DESCRIBED, Stage, markdown_table

CARD_TEXT_CHARS = 4000  # what a card prompt sees of a document
SOURCE_STATE_FILE = "source_state.json"


def corpus_fingerprint(spec: CorpusSpec, home: Path, s3) -> str:
    if is_s3(spec.source):
        return s3_fingerprint(s3_client(s3), spec.source)
    options = spec.read_options(home)
    return source_fingerprint(Path(spec.source), follow_symlinks=options["follow_symlinks"],
                              exclude=options["exclude"])


def corpus_state(spec: CorpusSpec, fingerprint: str) -> str:
    """What a compile's result depends on: the source's content and the registered settings."""
    return sha256_hex(fingerprint, spec.model_dump_json())[:24]


def documents(stage: Stage, workspace: WorkspaceResource, s3):
    """Read the corpus's source (a folder, a JSONL file or an S3 prefix) into documents."""
    spec, art = stage.corpus, stage.artifacts
    # Taken before reading, so a change made during the read is seen by the next sensor tick;
    # skill_tree records it once the tree is published.
    state = corpus_state(spec, corpus_fingerprint(spec, workspace.workspace.home, s3))
    try:
        check_output(Path(spec.out), spec.name)
    except OutputError as exc:
        raise Failure(description=str(exc), metadata={SELF_DESCRIBED: True}, allow_retries=False) from exc
    try:
        local = download_prefix(s3_client(s3), spec.source, art.root / "source") if is_s3(spec.source) else Path(spec.source)
        result = read_corpus(local, **spec.read_options(workspace.workspace.home))
    except CorpusError as exc:
        raise Failure(description=str(exc)) from exc
    rejected = pl.DataFrame(as_rows(result.rejected), schema={"source": pl.String, "reason": pl.String})
    duplicates = pl.DataFrame(as_rows(result.duplicates),
                              schema={"doc_id": pl.String, "source": pl.String, "duplicate_of": pl.String})
    docs = pl.DataFrame(as_rows(result.documents), schema={
        "doc_id": pl.String, "title": pl.String, "text": pl.String, "source": pl.String, "content_hash": pl.String})
    art.write_table("rejected.parquet", rejected)
    art.write_table("duplicates.parquet", duplicates)
    art.write_json("ingest.json", result.summary())
    if docs.height == 0:
        raise Failure(description=result.nothing_accepted(spec.source))
    if docs.height < spec.p:
        raise Failure(description=f"corpus '{spec.name}' has {docs.height} documents, fewer than the branching "
                      f"ratio p={spec.p}: nothing to cluster; lower --p or add documents")
    art.write_table("documents.parquet", docs)
    art.write_json(SOURCE_STATE_FILE, {"source": spec.source, "state": state})
    return stage.done(
        table_version(docs, rejected, duplicates),
        {
            **{k: v for k, v in result.summary().items()},
            "total_chars": int(docs["text"].str.len_chars().sum()),
            "rejected_inputs": markdown_table(as_rows(result.rejected)),
            "source": spec.source,
        },
    )


def card_input(doc_id: str, title: str, text: str) -> CardInput:
    """What a card task reads of a document (also what keys its cache entry): its start, and
    the rest for identifiers only."""
    return CardInput(doc_id=doc_id, title=title, text=text[:CARD_TEXT_CHARS], tail=text[CARD_TEXT_CHARS:])


def card_inputs(docs: pl.DataFrame) -> list[CardInput]:
    return [card_input(d, t, x) for d, t, x in docs.select("doc_id", "title", "text").iter_rows()]


def doc_cards_shard(stage: Stage, workspace: WorkspaceResource, llm: LLMResource) -> None:
    """The cards of one shard's documents, into the item cache."""
    stage.runner(llm).run("card", card_inputs(stage.shard.rows(stage.artifacts.read_table("documents.parquet"))), Card)


def doc_cards(stage: Stage, workspace: WorkspaceResource, llm: LLMResource):
    """A card per document; the card (less its identifiers) is embedded with the text. Its shards
    made them: each comes from the item cache here."""
    art = stage.artifacts
    docs = art.read_table("documents.parquet")
    cards = stage.runner(llm).run("card", card_inputs(docs), Card)
    frame = pl.DataFrame({
        "doc_id": docs["doc_id"],
        "title": [c.title for c in cards],
        "one_line": [c.one_line for c in cards],
        "phrases": [c.phrases for c in cards],
        # Rarest in the corpus first, so a row short of room shows the most distinctive.
        "identifiers": by_rarity([c.identifiers for c in cards]),
    }, schema={"doc_id": pl.String, "title": pl.String, "one_line": pl.String, "phrases": pl.List(pl.String),
               "identifiers": pl.List(pl.String)})
    art.write_table("cards.parquet", frame)
    with_identifiers = sum(1 for c in cards if c.identifiers)
    preview = [{"doc_id": r["doc_id"][:24], "title": r["title"], "one_line": r["one_line"][:80]}
               for r in frame.head(10).iter_rows(named=True)]
    return stage.done(table_version(frame), {
        "cards": frame.height, "preview": markdown_table(preview),
        "share_with_identifiers": round(with_identifiers / max(frame.height, 1), 4)})


def embedding_texts(docs: pl.DataFrame, cards: pl.DataFrame) -> list[str]:
    return [embedding_text(c["title"], c["one_line"], c["phrases"], text)
            for c, text in zip(cards.iter_rows(named=True), docs["text"])]


def doc_embeddings_shard(stage: Stage, workspace: WorkspaceResource, encoder: EncoderResource) -> None:
    """The embeddings of one shard's documents, into the item cache."""
    art, shard = stage.artifacts, stage.shard
    texts = embedding_texts(shard.rows(art.read_table("documents.parquet")), shard.rows(art.read_table("cards.parquet")))
    embed_with_cache(encoder.encoder, workspace.workspace.cache, texts, stage.embeddings, stage.progress)


def doc_embeddings(stage: Stage, workspace: WorkspaceResource, encoder: EncoderResource):
    """Each document's card and the start of its text, embedded (by its shards: each vector
    comes from the item cache here)."""
    art = stage.artifacts
    texts = embedding_texts(art.read_table("documents.parquet"), art.read_table("cards.parquet"))
    vectors = embed_with_cache(encoder.encoder, workspace.workspace.cache, texts, stage.embeddings, stage.progress)
    art.write_matrix("doc_vectors.npy", vectors)
    return stage.done(matrix_version(vectors), {"shape": MetadataValue.text(str(vectors.shape)),
                                                "encoder": encoder.model})
