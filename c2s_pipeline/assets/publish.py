"""entities → skill_tree: entity index and related skills, then the rendered, checked,
atomically published tree with its manifest and document store."""

import json
import math
import re
import shutil
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
from dagster import AssetCheckResult, AssetCheckSeverity, AssetExecutionContext, Failure, MetadataValue

from .. import __version__, incremental
from ..artifacts import CorpusArtifacts, table_version
from ..cards import read_cards
from ..diagnostics import NAVIGABILITY, TreeInputs, diagnose, navigability_metadata, soft_members
from c2s_core.docstore import StoredDocument, write_document_store
from c2s_core.encoder import embed_with_cache
from c2s_core.layout import DOCUMENT_STORE_FILE, ENTITY_INDEX_FILE, MANIFEST_FILE, TERM_INDEX_FILE
from c2s_core.llm.base import TASKS, cache_read_share, usage_sum
from c2s_core.llm.schemas import Entities, EntitiesInput
from c2s_core.atomic_publish import OutputError, publish, staging_dir
from c2s_core.navrows import DocCard, doc_stub, group_stub
from ..render import NodeExtras, render_node, rows_fit
from ..resources import EncoderResource, LLMResource, WorkspaceResource
from c2s_core.search_index import SearchIndex, write_search_index
from ..storage import publish_tree, s3_client
from c2s_core.term_index import TITLE_MARK, build_term_index
from c2s_core.text import clip, sha256_hex
from ..forest import Forest, Node, build_forest
from ..subgroups import SUBGROUPS_FILE, split_crowded, stub_home, subgroup_rows
from ..validate import check_tree
from ..recipe import MAX_LEVELS, STAGED_TREE_CHECKS
from ._stage import SELF_DESCRIBED, Stage, markdown_table
from .corpus import SOURCE_STATE_FILE

WARNING_CHECKS = {check.name for check in STAGED_TREE_CHECKS if not check.blocking}  # all others block
ENTITY_TEXTS, ENTITY_CHARS = 30, 600
EXEMPLARS = 3
RELATED_SKILLS = 3
SKILL_ENTITIES_SHOWN = 8
STAGED_FILE = "staged.json"
STATE_METADATA = "source_state"  # the corpus state (source + settings) a published tree compiled


def _entity_texts(node: Node, cards: dict, texts: dict, found: dict[str, Entities]) -> list[str]:
    if node.level == 1:
        return [f"{cards[d].title}. {cards[d].one_line} {clip(texts[d], ENTITY_CHARS)}" for d in node.members[:ENTITY_TEXTS]]
    return [f"{c.title}. {c.summary} Entities: {', '.join(found[c.node_id].entities)}" for c in node.children]


def _mentions(entity: str, texts: list[str]) -> int:
    pattern = re.compile(rf"(?<!\w){re.escape(entity)}(?!\w)")
    return sum(1 for t in texts if pattern.search(t))


def entities(stage: Stage, workspace: WorkspaceResource, llm: LLMResource):
    """Entities per cluster, bottom-up (a parent reads its children's), and related skills."""
    art = stage.artifacts
    forest = build_forest(art)
    cards, texts = read_cards(art), _texts(art)
    runner = stage.runner(llm)
    kept = _kept_entities(art)
    found: dict[str, Entities] = {}
    rows = []
    for level in sorted({n.level for n in forest.nodes()}):
        nodes = sorted((n for n in forest.nodes() if n.level == level), key=lambda n: n.node_id)
        node_texts = [_entity_texts(n, cards, texts, found) for n in nodes]
        inputs = [EntitiesInput(cluster_id=n.node_id, level=level, title=n.title, summary=n.summary, texts=t)
                  for n, t in zip(nodes, node_texts)]
        targets = [i for i, n in enumerate(nodes) if n.node_id not in kept]
        fresh = dict(zip(targets, runner.run("entities", inputs, Entities, targets=targets)))
        for i, (node, t) in enumerate(zip(nodes, node_texts)):
            if i in fresh:
                result = found[node.node_id] = fresh[i]
                mentions = [max(1, _mentions(e, [node.summary, *t])) for e in result.entities]
            else:
                row = kept[node.node_id]
                found[node.node_id] = Entities(entities=row["entities"], doc_types=row["doc_types"])
                result, mentions = found[node.node_id], row["mentions"]
            rows.append({"node_id": node.node_id, "level": level, "entities": result.entities,
                         "mentions": mentions, "doc_types": result.doc_types})
    frame = pl.DataFrame(rows, schema={"node_id": pl.String, "level": pl.Int64, "entities": pl.List(pl.String),
                                       "mentions": pl.List(pl.Int64), "doc_types": pl.List(pl.String)})
    related = related_skills(forest, found)
    art.write_table("entities.parquet", frame)
    art.write_json("related.json", related)
    distinct = {e for r in rows for e in r["entities"]}
    return stage.done(table_version(frame, extra=json.dumps(related, sort_keys=True)), {
        "distinct_entities": len(distinct),
        "index_entries": sum(len(r["entities"]) for r in rows),
        "skill_entities": markdown_table([{"node": r["node_id"], "entities": ", ".join(r["entities"][:8])}
                                          for r in rows if r["level"] == forest.skills[0].level]),
    })


def _kept_entities(art: CorpusArtifacts) -> dict[str, dict]:
    """On an incremental compile, the published entities of every node whose summary was kept:
    a node is re-tagged when (and only when) it is re-summarised."""
    if not incremental.RunMode.load(art).incremental:
        return {}
    rewritten = {n for level in art.used_levels()
                 for n in art.read_json(art.level(level, "summary_changes.json"))["resummarised"]}
    return {n: row for n, row in incremental.previous_entities(art).items() if n not in rewritten}


def related_skills(forest: Forest, found: dict[str, Entities]) -> dict[str, list[list]]:
    """Each skill's top siblings by Jaccard overlap of the entities across its whole subtree."""
    bags = {s.node_id: {e for n in s.walk() for e in found[n.node_id].entities} for s in forest.skills}
    out = {}
    for skill in forest.skills:
        scored = []
        for other in forest.skills:
            if other is skill:
                continue
            shared = bags[skill.node_id] & bags[other.node_id]
            union = bags[skill.node_id] | bags[other.node_id]
            if shared:
                scored.append((len(shared) / len(union), other.node_id, sorted(shared)))
        scored.sort(key=lambda t: (-t[0], t[1]))
        out[skill.node_id] = [[node_id, shared, round(score, 4)] for score, node_id, shared in scored[:RELATED_SKILLS]]
    return out


def _texts(art: CorpusArtifacts) -> dict[str, str]:
    docs = art.read_table("documents.parquet")
    return dict(zip(docs["doc_id"], docs["text"]))


def _extras(forest: Forest, art: CorpusArtifacts, cards: dict[str, DocCard], vectors: np.ndarray) -> dict[str, NodeExtras]:
    extras = {n.node_id: NodeExtras() for n in forest.nodes()}
    doc_leaf = {d: n for n in forest.nodes() if n.is_leaf for d in n.members}
    row = art.document_rows()
    centroids: dict[str, np.ndarray] = {}

    def centroid(node: Node) -> np.ndarray:
        if node.node_id not in centroids:
            centre = vectors[[row[d] for d in node.documents()]].mean(axis=0)
            centroids[node.node_id] = centre / (np.linalg.norm(centre) or 1.0)
        return centroids[node.node_id]

    stubs: dict[str, list[tuple[float, str]]] = {}  # node -> (similarity to it, stub line)
    for level in art.used_levels():
        for item, runner_up, similarity in art.final_placements(level).filter(pl.col("runner_up").is_not_null()).select(
                "item_id", "runner_up", "runner_up_similarity").iter_rows():
            if level == 1:
                home = stub_home(forest.by_id[runner_up], vectors[row[item]], centroid)
                stubs.setdefault(home.node_id, []).append((similarity, doc_stub(cards[item], doc_leaf[item].nav_file)))
            else:
                stubs.setdefault(runner_up, []).append((similarity, group_stub(forest.by_id[item])))
    for node_id, found in stubs.items():  # closest first: a file short of room keeps those
        extras[node_id].see_also = [line for _, line in sorted(found, key=lambda s: -(s[0] or 0.0))]
    for node in forest.nodes():
        if not node.is_leaf:
            extras[node.node_id].examples = _exemplars(node, vectors, row)
    found = art.read_table("entities.parquet")
    ents = dict(zip(found["node_id"], found["entities"]))
    for skill_id, related in art.read_json("related.json").items():
        extras[skill_id].related = [(node_id, shared) for node_id, shared, _ in related]
        extras[skill_id].entities = list(ents[skill_id])[:SKILL_ENTITIES_SHOWN]
    return extras


def _exemplars(node: Node, vectors: np.ndarray, row: dict[str, int]) -> list[str]:
    """The documents below ``node`` nearest its centroid."""
    ids = node.documents()
    block = vectors[[row[d] for d in ids]]
    centre = block.mean(axis=0)
    centre /= np.linalg.norm(centre) or 1.0
    return [ids[i] for i in np.argsort(-(block @ centre), kind="stable")[:EXEMPLARS]]


def _split_crowded_leaves(forest: Forest, art: CorpusArtifacts, cards: dict[str, DocCard], vectors: np.ndarray,
                          p: int, previous: dict[str, str] | None) -> tuple[dict[str, NodeExtras], list[Node]]:
    """Split the leaves whose rows do not fit one nav file into sub-groups (:mod:`..subgroups`);
    the forest's extras after the split (documents' canonical places and stubs moved with it)."""
    row = art.document_rows()
    extras = _extras(forest, art, cards, vectors)

    def fits(node: Node) -> bool:
        known = extras.get(node.node_id, NodeExtras())
        # A node split just now shows example documents, as every node with sub-groups does.
        planned = known if node.is_leaf else replace(known, examples=_exemplars(node, vectors, row))
        return rows_fit(node, cards, planned, forest)

    made = split_crowded(forest, cards, vectors, row, p, fits, previous)
    return (_extras(forest, art, cards, vectors) if made else extras), made


def _entity_index(forest: Forest, art: CorpusArtifacts) -> dict[str, list[dict]]:
    found = art.read_table("entities.parquet")
    index: dict[str, list[dict]] = defaultdict(list)
    for node_id, names, mentions in found.select("node_id", "entities", "mentions").iter_rows():
        for name, count in zip(names, mentions):
            index[name].append({"path": forest.by_id[node_id].nav_file, "mentions": count})
    ordered = sorted(index.items(), key=lambda kv: (-sum(e["mentions"] for e in kv[1]), kv[0]))
    return {name: sorted(entries, key=lambda e: (-e["mentions"], e["path"])) for name, entries in ordered}


def staged_tree(stage: Stage, workspace: WorkspaceResource, llm: LLMResource, encoder: EncoderResource):
    """Render the forest and its indexes into the staging folder, and check them there."""
    context = stage.context
    spec, art = stage.corpus, stage.artifacts
    mode = incremental.RunMode.load(art)
    names = incremental.previous_names(art) if mode.incremental else None
    forest = build_forest(art, names)
    cards = read_cards(art)
    vectors = art.read_matrix("doc_vectors.npy")
    extras, subgroups = _split_crowded_leaves(forest, art, cards, vectors, spec.p, names)
    art.write_json(SUBGROUPS_FILE, subgroup_rows(subgroups))
    staged = staging_dir(Path(spec.out))
    try:
        files = {n.nav_file: render_node(n, cards, extras[n.node_id], forest) for n in forest.nodes()}
        for rel, text in files.items():
            path = staged / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        index = _entity_index(forest, art)
        (staged / ENTITY_INDEX_FILE).write_text(entity_index_json(index), encoding="utf-8")
        docs = art.read_table("documents.parquet")
        texts = dict(zip(docs["doc_id"], docs["text"]))
        built_terms = build_term_index((n.nav_file, ((cards[d].title, texts[d]) for d in n.members))
                                       for n in forest.nodes() if n.is_leaf)
        terms_text = built_terms.text
        (staged / TERM_INDEX_FILE).write_text(terms_text, encoding="utf-8")
        write_document_store(staged / DOCUMENT_STORE_FILE, (
            StoredDocument(d, cards[d].title, text, h, src)
            for d, text, h, src in docs.select("doc_id", "text", "content_hash", "source").iter_rows()))
        outcomes = check_tree(staged, docs["doc_id"].to_list(), spec.p)
        manifest = build_manifest(spec, art, forest, files, index, outcomes, llm, encoder, stage)
        term_index = built_terms.index
        titles = sum(key.startswith(TITLE_MARK) for key in term_index.terms)
        manifest["stats"]["term_index"] = {"terms": len(term_index.terms) - titles, "title_terms": titles,
                                           "leaves": len(term_index.leaves),
                                           "bytes": len(terms_text.encode("utf-8"))}
        calls = manifest["stats"]["llm_calls"]
        saved = incremental.llm_calls_saved(art, mode, calls["made"])
        manifest["build"] = {"mode": mode.mode, "reason": mode.reason, **mode.counts(),
                             **({"llm_calls_saved": saved} if saved is not None else {})}
        (staged / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")
        # The agent's flat search: reads the store and manifest just written, and ships the
        # document vectors doc_embeddings computed (rows in documents.parquet order).
        write_search_index(staged, vectors, docs["doc_id"].to_list(), encoder.model)
        # Probed with the search index just written, so the flat side ranks as the agent's search tool.
        tree = TreeInputs(forest, cards, docs["doc_id"].to_list(), docs["text"].to_list(), vectors,
                          soft_members(art), SearchIndex.load(staged), files, term_index,
                          built_terms.document_frequency)
        started = time.perf_counter()
        report = diagnose(tree, lambda texts: embed_with_cache(encoder.encoder, workspace.workspace.cache, texts,
                                                               stage.embeddings), on_progress=stage.progress)
        _add_navigability(manifest, report, round(time.perf_counter() - started, 3), stage)
        (staged / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    version = table_version(pl.DataFrame({"path": list(files), "text": list(files.values())}))
    check_results = [AssetCheckResult(check_name=o.name, passed=o.passed, description=o.description,
                                      metadata=o.metadata, severity=AssetCheckSeverity.WARN if not o.blocking
                                      else AssetCheckSeverity.ERROR) for o in outcomes]
    failed = [o for o in outcomes if o.blocking and not o.passed]
    if failed:
        # No materialization and nothing for skill_tree to publish: the checks are recorded, the
        # step fails, and a later "Materialize selected" of skill_tree alone finds no staged tree.
        (art.root / STAGED_FILE).unlink(missing_ok=True)
        yield from check_results
        raise Failure(description=f"staged_tree: the rendered tree failed its checks and was not published (the "
                                  f"previous tree keeps serving; this one stays in {staged} for inspection): "
                                  + "; ".join(f"{o.name}: {o.description}" for o in failed),
                      metadata={SELF_DESCRIBED: True}, allow_retries=False)
    # What skill_tree needs to publish this tree and record it as the next incremental base.
    art.write_json(STAGED_FILE, {
        "staged": str(staged), "data_version": version, "names": {n.node_id: n.name for n in forest.nodes()},
        "fingerprint": incremental.build_fingerprint(spec, llm.for_corpus(spec), encoder.model),
        "llm_tasks": calls["made"] + calls["cached"]})
    stats = manifest["stats"]
    yield stage.done(
        version,
        {"staged": MetadataValue.path(str(staged)), "build_mode": mode.mode, "build_reason": mode.reason,
         **mode.counts(), **({"llm_calls_saved": saved} if saved is not None else {}),
         "nav_files": stats["nav_files"], "largest_nav_bytes": stats["nav_bytes"]["max"],
         "p95_nav_bytes": stats["nav_bytes"]["p95"], "subgroups": len(subgroups),
         **navigability_metadata(manifest[NAVIGABILITY]),
         "navigability_seconds": MetadataValue.float(manifest["stages"]["staged_tree"]["navigability_seconds"])},
        check_results=check_results,
    )


def skill_tree(stage: Stage, workspace: WorkspaceResource, s3):
    """Publish the staged tree and keep what it was built from as the next compile's base."""
    context = stage.context
    spec, art = stage.corpus, stage.artifacts
    if not (art.root / STAGED_FILE).exists():
        raise Failure(description=f"skill_tree: no checked tree is staged for '{spec.name}' (its last staged_tree "
                                  "failed or never ran); materialize staged_tree first",
                      metadata={SELF_DESCRIBED: True}, allow_retries=False)
    staged_info = art.read_json(STAGED_FILE)
    staged, out = Path(staged_info["staged"]), Path(spec.out)
    if not (staged / MANIFEST_FILE).exists():
        raise Failure(description=f"no staged tree at {staged}: materialize staged_tree for '{spec.name}' first")
    manifest = json.loads((staged / MANIFEST_FILE).read_text(encoding="utf-8"))
    failed = sorted(name for name, check in manifest.get("checks", {}).items()
                    if name not in WARNING_CHECKS and not check.get("passed"))
    if failed or not manifest.get("checks"):
        raise Failure(description=f"skill_tree: refusing to publish the staged tree at {staged}: "
                                  + (f"it failed {', '.join(failed)}" if failed else "it records no checks")
                                  + "; materialize staged_tree again", metadata={SELF_DESCRIBED: True},
                      allow_retries=False)
    mode = incremental.RunMode.load(art)
    try:
        publish(staged, out, spec.name)
    except OutputError as exc:
        raise Failure(description=f"skill_tree: {exc}", metadata={SELF_DESCRIBED: True},
                      allow_retries=False) from exc
    docs = art.read_table("documents.parquet")
    incremental.save_published(
        art, docs, {level: art.final_nodes(level) for level in art.used_levels()}, staged_info["names"],
        staged_info["fingerprint"], mode, art.level_status(1)["cohesion"], staged_info["llm_tasks"])
    published = {}
    if spec.publish:
        build = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{manifest_digest(out)}"
        published["s3_release"] = MetadataValue.url(publish_tree(s3_client(s3), out, spec.publish, spec.name, build))
    published.update(_view(context, out, art))
    stats = manifest["stats"]
    preview = "\n".join(f"- **{s['name']}** ({s['documents']} docs): {s['description']}" for s in manifest["skills"])
    return stage.done(
        staged_info["data_version"],
        {"out": MetadataValue.path(str(out)), STATE_METADATA: art.read_json(SOURCE_STATE_FILE)["state"],
         "build_mode": mode.mode, "build_reason": mode.reason, **mode.counts(),
         **({"llm_calls_saved": manifest["build"]["llm_calls_saved"]} if "llm_calls_saved" in manifest["build"] else {}),
         "skills": stats["skills"], "levels": stats["levels"],
         "nav_files": stats["nav_files"], "see_stubs": stats["see_stubs"],
         "entity_index_entries": stats["entity_index_entries"], "largest_nav_bytes": stats["nav_bytes"]["max"],
         "p95_nav_bytes": stats["nav_bytes"]["p95"], "top_level_skills": MetadataValue.md(preview),
         **(navigability_metadata(manifest[NAVIGABILITY]) if NAVIGABILITY in manifest else {}), **published},
    )


def _add_navigability(manifest: dict, report: dict, seconds: float, stage: Stage) -> None:
    """The diagnostics under the manifest's ``navigability`` key; their time and embeddings in
    staged_tree's record (the report itself is the same for the same tree)."""
    manifest[NAVIGABILITY] = report
    record = manifest["stages"]["staged_tree"]
    record.update(seconds=round(time.perf_counter() - stage.started, 3), embeddings=stage.embeddings.as_dict(),
                  navigability_seconds=seconds)
    for kind, count in stage.embeddings.as_dict().items():
        manifest["stats"]["embeddings"][kind] += count


def _view(context: AssetExecutionContext, out: Path, art: CorpusArtifacts) -> dict:
    """The published tree as people look at it (``c2s view``), linked from the materialization.
    The tree is already serving, so a view that cannot be written is a warning, not a failed run."""
    from c2s_core.tree import TreeError
    from c2s_core.view import ViewError, build_view

    try:
        return {"view": MetadataValue.path(str(build_view(out, art.root / "view")))}
    except (TreeError, ViewError, OSError) as exc:
        context.log.warning(f"skill_tree: the HTML view of {out} was not written: {exc}")
        return {"view_error": MetadataValue.text(str(exc))}


def entity_index_json(index: dict[str, list[dict]]) -> str:
    """One entity per line, so `grep NAME entity_index.json` shows where it lives."""
    lines = [f"{json.dumps(name, ensure_ascii=False)}: {json.dumps(entries, ensure_ascii=False)}"
             for name, entries in index.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def manifest_digest(out: Path) -> str:
    return sha256_hex((out / MANIFEST_FILE).read_bytes())[:8]


def build_manifest(spec, art: CorpusArtifacts, forest: Forest, files: dict[str, str], index: dict, outcomes,
                   llm: LLMResource, encoder: EncoderResource, stage: Stage) -> dict:
    records = art.stage_records(before="staged_tree")
    records["staged_tree"] = {"seconds": round(time.perf_counter() - stage.started, 3),
                             "llm_calls": {"made": 0, "cached": 0}, "embeddings": {"computed": 0, "cached": 0}}
    sizes = sorted(len(t.encode("utf-8")) for t in files.values())
    ingest = art.read_json("ingest.json")
    provider = llm.for_corpus(spec)
    # What this run's LLM stages spent (re-asks and retries included), from the API's usage fields.
    usage = {name: r["llm_usage"] for name, r in records.items() if "llm_usage" in r}
    total_usage = usage_sum(*usage.values())
    return {
        "corpus": spec.name,
        "source": spec.source,
        "c2s_version": __version__,
        "parameters": {"p": spec.p, "k": spec.k, "tau": spec.tau, "max_levels": MAX_LEVELS},
        "provider": {"name": provider.name, "model": provider.model,
                     "card_model": getattr(provider, "card_model", provider.model),
                     "prompt_versions": {t: provider.prompt_version(t) for t in TASKS}},
        "encoder": encoder.model,
        "stats": {
            "documents": {k: ingest[k] for k in ("accepted", "rejected", "duplicate", "ignored_hidden", "excluded")},
            "llm_calls": {k: sum(r["llm_calls"][k] for r in records.values()) for k in ("made", "cached")},
            "embeddings": {k: sum(r["embeddings"][k] for r in records.values()) for k in ("computed", "cached")},
            "llm_usage": {"stages": usage, "total": total_usage,
                          # per stage, the share of its prompt tokens read from the prompt cache
                          "cache_read_share": {name: cache_read_share(u)
                                               for name, u in [*usage.items(), ("total", total_usage)]}},
            "levels": forest.levels,
            "skills": len(forest.skills),
            "nav_files": len(files),
            "nav_bytes": {"max": sizes[-1], "p95": sizes[min(len(sizes) - 1, math.ceil(0.95 * len(sizes)) - 1)],
                          "total": sum(sizes)},
            "see_stubs": sum(t.count("\n- @see ") for t in files.values()),
            "entity_index_entries": sum(len(v) for v in index.values()),
            "distinct_entities": len(index),
        },
        "checks": {o.name: {"passed": o.passed, "description": o.description} for o in outcomes},
        "stages": records,
        "skills": [{"name": s.name, "path": s.nav_file, "documents": s.size, "description": s.description}
                   for s in sorted(forest.skills, key=lambda s: s.name)],
        "doc_paths": {d: n.nav_file for n in forest.nodes() if n.is_leaf for d in sorted(n.members)},
        "rejected": art.read_table("rejected.parquet").to_dicts(),
        "duplicates": art.read_table("duplicates.parquet").to_dicts(),
    }
