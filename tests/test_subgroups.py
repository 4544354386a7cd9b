"""Crowded leaves: a level-1 cluster of near-identical documents, too many to list in one nav file.
The corpus is part of the bundled sample corpus plus one of its real articles published once per
country (the way generated reference pages are), under long file names: K-Means puts those
near-duplicates in one cluster, whose rows would take its INDEX.md past the size design.

A full compile splits such a cluster into sibling leaves that fit (``crowded``). A leaf that
grows past its file afterwards, by incremental updates, is split below itself into sub-groups
(``grown``: 8 countries compiled, then 12 more added)."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from c2s_agent.offline_navigator import navigate
from c2s_agent.tools import TreeTools
from c2s_core.frontmatter import parse_frontmatter
from c2s_core.encoder import Encoder
from c2s_core.layout import INDEX_FILE, SECTION_DOCUMENTS, SECTION_SUBGROUPS, SKILLS_DIR
from c2s_core.navigation.scoring import embedder
from c2s_core.navrows import ROW_STYLES, DocCard, doc_row
from c2s_core.tree import Tree
from c2s_core.view import tree_data
from c2s_pipeline.artifacts import CorpusArtifacts
from c2s_pipeline.cards import read_cards
from c2s_pipeline.diagnostics import TreeInputs
from c2s_pipeline.diagnostics import navigate as probe_navigate
from c2s_pipeline.forest import SUBGROUP_LEVEL, Forest, Node, assign_names
from c2s_pipeline.render import NAV_FILE_TARGET_BYTES, NodeExtras, render_node, rows_fit
from c2s_pipeline.subgroups import SUBGROUPS_FILE, distinctive_terms, partition, split_crowded
from c2s_pipeline.validate import check_tree, nav_files, primary_rows

from .conftest import SAMPLE_CORPUS, compile_into

FOLDERS = ("plans-and-billing", "security-and-legal", "account-and-sign-in", "team-and-permissions", "clients",
           "calendar-sync", "booking", "invoicing-and-quotes", "integrations")
ARTICLE = "plans-and-billing/how-tax-is-calculated-on-your-subscription.md"
COUNTRIES = ("Austria Belgium Bulgaria Croatia Cyprus Czechia Denmark Estonia Finland France Germany Greece Hungary "
             "Ireland Italy Latvia Lithuania Luxembourg Malta Netherlands Poland Portugal Romania Slovakia Slovenia "
             "Spain Sweden Norway Iceland Switzerland Liechtenstein Albania Serbia Montenegro Moldova Ukraine Georgia "
             "Armenia Turkey Israel").split()


def page_id(country: str) -> str:
    return f"tax-by-country/how-tax-is-calculated-on-a-tidewell-subscription-billed-to-a-business-in-{country.lower()}.md"


def crowded_corpus(root: Path, countries: tuple[str, ...] = COUNTRIES) -> Path:
    for folder in FOLDERS:
        for path in sorted((SAMPLE_CORPUS / folder).glob("*.md")):
            (root / folder).mkdir(parents=True, exist_ok=True)
            (root / folder / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    add_countries(root, countries)
    return root


def add_countries(root: Path, countries: tuple[str, ...]) -> None:
    _, _, body = (SAMPLE_CORPUS / ARTICLE).read_text(encoding="utf-8").partition("\n")
    (root / "tax-by-country").mkdir(exist_ok=True)
    for country in countries:
        (root / page_id(country)).write_text(
            f"# How tax is calculated on a Tidewell subscription billed to a business in {country}: VAT, GST and "
            f"sales tax\n\n"
            f"This page covers Tidewell subscriptions billed to a business address in {country}.\n{body}",
            encoding="utf-8")


@pytest.fixture(scope="module")
def crowded(dagster_home, tmp_path_factory):
    return compile_into(dagster_home, "crowded", crowded_corpus(tmp_path_factory.mktemp("crowded-corpus")))


GROWN = COUNTRIES[:20]  # compiled with the first 8, then the other 12 added


@pytest.fixture(scope="module")
def grown(dagster_home, tmp_path_factory):
    corpus = crowded_corpus(tmp_path_factory.mktemp("grown-corpus"), GROWN[:8])
    compile_into(dagster_home, "grown", corpus)
    add_countries(corpus, GROWN[8:])
    compiled = compile_into(dagster_home, "grown", corpus)
    assert compiled.manifest["build"]["mode"] == "incremental"
    return compiled


@pytest.fixture(scope="module")
def split(grown):
    """The nav files of the tree by path, their frontmatter metadata, and its split clusters:
    nav file -> the nav files of its sub-groups."""
    texts = {f.relative_to(grown.out).as_posix(): f.read_text(encoding="utf-8") for f in nav_files(grown.out)}
    meta = {path: parse_frontmatter(text)["metadata"] for path, text in texts.items()}
    folders = {path.rsplit("/", 1)[0]: path for path in texts}
    parents: dict[str, list[str]] = {}
    for path in texts:
        parent = folders.get(path.rsplit("/", 2)[0])  # none above a skill
        if parent and meta[path].get("subgroup") and not meta[parent].get("subgroup"):
            parents.setdefault(parent, []).append(path)
    return texts, meta, parents


def test_a_full_compile_splits_a_crowded_cluster_into_sibling_leaves_that_fit(crowded):
    """40 near-duplicates under long names: their leanest rows would fill two nav files and more.
    The compile's level 1 splits their cluster into sibling leaves that each fit, so the tree has
    no sub-group level: every document is as many rounds away as any other."""
    texts = {f.relative_to(crowded.out).as_posix(): f.read_text(encoding="utf-8") for f in nav_files(crowded.out)}
    meta = {path: parse_frontmatter(text)["metadata"] for path, text in texts.items()}
    assert not any(m.get("subgroup") for m in meta.values())
    cards = read_cards(CorpusArtifacts(crowded.home / "artifacts" / "crowded"))
    pages = {page_id(c) for c in COUNTRIES}
    assert sum(len(doc_row(cards[d], ROW_STYLES[-1]).encode()) + 1 for d in pages) > 2 * NAV_FILE_TARGET_BYTES
    holding = {path: [d for d in primary_rows(text) if d in pages] for path, text in texts.items()}
    holding = {path: found for path, found in holding.items() if found}
    assert len(holding) >= 3 and sorted(d for found in holding.values() for d in found) == sorted(pages)
    assert all(meta[path]["level"] == 1 and len(texts[path].encode()) <= NAV_FILE_TARGET_BYTES for path in holding)
    status = CorpusArtifacts(crowded.home / "artifacts" / "crowded").read_json("level_1/status.json")
    assert status["clusters"] > math.ceil(crowded.manifest["stats"]["documents"]["accepted"] / 10)
    outcomes = {o.name: o for o in check_tree(crowded.out, list(crowded.manifest["doc_paths"]), 10)}
    assert all(o.passed for o in outcomes.values() if o.blocking)
    assert outcomes["depth_within_bound"].metadata["subgroup_levels"] == 0
    for country in ("Croatia", "Israel"):
        tools = TreeTools(crowded.out)
        reply = navigate(f"How is tax calculated on my subscription in {country}?", tools, route=False)
        assert reply.fetched[0] == page_id(country), (country, reply.fetched[:5])


def test_a_crowded_leaf_lists_sub_groups_in_child_folders(grown, split):
    texts, meta, parents = split
    assert parents, "no level-1 cluster was split"
    art = CorpusArtifacts(grown.home / "artifacts" / "grown")
    cards = read_cards(art)
    recorded = art.read_json(SUBGROUPS_FILE)
    for path, children in parents.items():
        assert len(children) >= 2 and all(c.endswith(f"/{INDEX_FILE}") for c in children)
        assert SECTION_DOCUMENTS not in texts[path]
        below = [d for c in children for d in primary_rows(texts[c])]
        # It was crowded: its documents' rows alone, in the leanest style, exceed the size design.
        lean = sum(len(doc_row(cards[d], ROW_STYLES[-1]).encode()) + 1 for d in below)
        assert lean > NAV_FILE_TARGET_BYTES
        assert meta[path]["documents"] == len(below)
        # The level a nav file shows is its height: sub-groups list documents, the split cluster
        # is one step above them, and its skill one more.
        assert meta[path]["level"] == 2 and all(meta[c]["level"] == 1 for c in children)
        skill = "/".join([*path.split("/")[:2], "SKILL.md"])
        assert path == skill or meta[skill]["level"] == 3
    # The compile keeps the sub-groups it made beside its artifacts: one per sub-group nav file.
    assert len(recorded) == sum(bool(m.get("subgroup")) for m in meta.values())
    # The near-duplicates are what crowded it, and each sub-group is named by what sets it apart.
    split_docs = {d for children in parents.values() for c in children for d in primary_rows(texts[c])}
    assert sum(d.startswith("tax-by-country/") for d in split_docs) >= 0.9 * len(GROWN)
    names = [c.rsplit("/", 2)[1] for children in parents.values() for c in children]
    assert len(set(names)) == len(names) and not any(n.startswith("part-") for n in names)


def test_every_document_is_listed_once_and_every_nav_file_fits(grown, split):
    texts, _, _ = split
    listed = Counter(d for text in texts.values() for d in primary_rows(text))
    assert set(listed) == set(grown.manifest["doc_paths"]) and set(listed.values()) == {1}
    assert len(listed) == grown.manifest["stats"]["documents"]["accepted"]
    oversize = {p: len(t.encode()) for p, t in texts.items() if len(t.encode()) > NAV_FILE_TARGET_BYTES}
    assert not oversize
    # Documents' canonical places are the sub-groups that list them.
    for doc_id, path in grown.manifest["doc_paths"].items():
        assert doc_id in primary_rows(texts[path])


def test_the_checks_pass_and_count_the_sub_group_level(grown, split):
    _, _, parents = split
    outcomes = {o.name: o for o in check_tree(grown.out, list(grown.manifest["doc_paths"]), 10)}
    assert all(o.passed for o in outcomes.values() if o.blocking), [o for o in outcomes.values() if not o.passed]
    assert outcomes["depth_within_bound"].metadata["subgroup_levels"] >= 1
    assert all(check["passed"] for check in grown.manifest["checks"].values()), grown.manifest["checks"]


def test_the_navigator_finds_a_document_inside_a_sub_group(grown, split):
    _, _, parents = split
    for country in ("Croatia", "Lithuania", "Netherlands"):  # (the Netherlands' page came with the update)
        doc_id = page_id(country)
        home = grown.manifest["doc_paths"][doc_id]
        assert any(home in children for children in parents.values())
        reply = navigate(f"How is tax calculated on my subscription in {country}?", TreeTools(grown.out), route=False)
        assert reply.fetched[0] == doc_id, (country, reply.fetched[:5])
        assert home in reply.visited


def test_the_probe_and_the_html_view_see_the_published_shape(grown, split):
    texts, _, parents = split
    tree = TreeInputs.load(CorpusArtifacts(grown.home / "artifacts" / "grown"), grown.out)
    assert set(tree.nav_files) == set(texts)
    assert tree.nav_files == texts
    view = tree.view()
    _, ranking = probe_navigate(view, embedder(), "How is tax calculated on my subscription in Croatia?")
    assert ranking.ranked[0] == page_id("Croatia")
    assert any(leaf.path in children for leaf in ranking.leaves for children in parents.values())
    data = tree_data(Tree(grown.out))
    assert data["counts"]["doc"] == len(grown.manifest["doc_paths"])
    assert data["counts"]["group"] + data["counts"]["skill"] == len(texts)


def test_a_leaf_of_hundreds_lists_its_sub_groups_in_lean_rows_one_level_deep():
    """320 near-duplicates (the article per country and plan): ceil(n/p) = 32 sub-groups, whose
    rows fit the leaf's own file at their leanest (judged so, as the file is rendered), so every
    sub-group lists documents: one level below the leaf, every file within its size."""
    title, _, body = (SAMPLE_CORPUS / ARTICLE).read_text(encoding="utf-8").partition("\n")
    lead = body.strip().split("\n")[0]
    plans = ("Starter", "Solo", "Team", "Studio", "Clinic", "Business", "Enterprise", "Nonprofit")
    cards, texts = {}, []
    for country in COUNTRIES:
        for plan in plans:
            doc_id = f"tax/{country.lower()}-{plan.lower()}.md"
            heading = f"{title.lstrip('# ')} on the {plan} plan in {country}"
            cards[doc_id] = DocCard(doc_id, heading, f"For {plan} plan subscriptions billed to {country}.", [], [])
            texts.append(f"{heading}. {lead}")
    docs = list(cards)
    leaf = Node("L1-0000", 1, "Tax, calculated, subscription", "Tax on subscriptions", "Key terms: tax.", "tax",
                [], len(docs), docs)
    forest = Forest([leaf], {leaf.node_id: leaf}, 1)
    assign_names([leaf], SKILLS_DIR, {})
    fits = lambda node: rows_fit(node, cards, NodeExtras(), forest)  # noqa: E731
    assert not fits(leaf)
    made = split_crowded(forest, cards, Encoder().encode(texts), {d: i for i, d in enumerate(docs)}, 10, fits)
    assert len(leaf.children) >= math.ceil(len(docs) / 10)
    assert len(made) == sum(1 for n in forest.nodes() if n.is_subgroup)
    assert sorted(d for n in forest.nodes() if n.is_leaf for d in n.members) == sorted(docs)
    sizes = [len(render_node(n, cards, NodeExtras(), forest).encode()) for n in forest.nodes()]
    assert max(sizes) <= NAV_FILE_TARGET_BYTES
    assert max(n.depth for n in forest.nodes()) - leaf.depth == 1


def test_partition_in_two_never_peels_one_document_off_a_crowd():
    """25 near-identical documents and one outlier: K-Means in two puts the outlier alone and the
    crowd together, a split that barely shrinks it (a level of sub-groups per document peeled
    off). No part keeps more than two thirds of the whole."""
    rng = np.random.default_rng(0)
    crowd = np.tile(np.eye(16, dtype=np.float32)[0], (25, 1)) + rng.normal(0, 1e-3, (25, 16)).astype(np.float32)
    unit = np.vstack([crowd, np.eye(16, dtype=np.float32)[1:2]])
    parts = partition(unit, 2)
    assert sorted(i for part in parts for i in part) == list(range(len(unit)))
    assert max(len(part) for part in parts) <= math.ceil(2 * len(unit) / 3)


def test_partition_never_returns_the_whole_even_for_identical_vectors():
    unit = np.tile(np.eye(8, dtype=np.float32)[0], (30, 1))
    parts = partition(unit, 3)
    assert len(parts) >= 2 and all(len(p) < len(unit) for p in parts)
    assert sorted(i for p in parts for i in p) == list(range(len(unit)))


def test_distinctive_terms_skip_words_most_parts_share_and_words_already_said():
    def card(title: str) -> DocCard:
        return DocCard(title, title, "", [])

    parts = [[card("Tax in Croatia"), card("Tax in Serbia")], [card("Tax in Kenya"), card("Tax in Ghana")],
             [card("Tax in Japan"), card("Refund policy")]]
    terms = distinctive_terms(parts, said={"refund"})
    assert terms[0] == ["croatia", "serbia"] and terms[1] == ["ghana", "kenya"]
    assert terms[2] == ["japan", "policy"]  # "tax" is in every part, "refund" said already


def test_a_flood_of_see_stubs_keeps_the_closest_within_the_file_size():
    """A leaf many other documents nearly joined: its ``@see`` section keeps the stubs that fit
    (closest first, as they come), says how many it left out, and the file stays within its size."""
    from c2s_core.navrows import doc_stub, parse_nav_file

    cards = {f"a/{i}.md": DocCard(f"a/{i}.md", f"Local tax rule {i}", "Tax for one region.", [], []) for i in range(5)}
    leaf = Node("L1-0000", 1, "Tax", "Tax rules", "Key terms: tax.", "tax", [], len(cards), list(cards))
    forest = Forest([leaf], {leaf.node_id: leaf}, 1)
    assign_names([leaf], SKILLS_DIR, {})
    stubs = [doc_stub(DocCard(f"b/{i:03d}.md", f"Shipping fee table for zone {i}", "", [], []),
                      f"{SKILLS_DIR}/other/zone-{i:03d}/{INDEX_FILE}") for i in range(200)]
    few = render_node(leaf, cards, NodeExtras(see_also=stubs[:3]), forest)
    assert few.count("\n- @see ") == 3 and "left out" not in few
    many = render_node(leaf, cards, NodeExtras(see_also=stubs), forest)
    kept = [c.doc_id for c in parse_nav_file(many, "x").see_cards]
    assert len(many.encode()) <= NAV_FILE_TARGET_BYTES
    assert 3 < len(kept) < 200 and kept == [f"b/{i:03d}.md" for i in range(len(kept))]  # the first ones
    assert f"({200 - len(kept)} more `@see` stubs left out" in many
    assert [c.doc_id for c in parse_nav_file(many, "x").cards] == list(cards)  # every row still there


def test_a_crowded_skill_file_keeps_every_group_row_within_the_file_size():
    """A skill with many sub-groups, long descriptions, entities, examples and related skills: what
    only helps gives way first (example one-lines, examples, related skills past the closest,
    stubs), group rows render leaner, and the file stays within its size with a row per group."""
    from c2s_core.navrows import parse_nav_file

    long = ("Shipping zones, carrier rates, customs declarations, label printing and the return "
            "labels merchants print for parcels crossing borders in the region")
    children = [Node(f"L1-{i:04d}", 1, f"Zone {i} shipping", f"Zone {i}: {long}", "Key terms: zone.", "zone",
                     [], 3, [f"d/{i}-{j}.md" for j in range(3)]) for i in range(24)]
    cards = {d: DocCard(d, f"Carrier rate sheet {d}", "Rates for one carrier in one zone.", [], [])
             for c in children for d in c.members}
    skill = Node("L2-0000", 2, "Shipping", f"Shipping: {long}", "Topic area: shipping. Key terms: zone.", "shipping",
                 [], sum(c.size for c in children), [c.node_id for c in children], children=children)
    others = [Node(f"L2-{i:04d}", 2, f"Other {i}", "Other things.", "Other.", "other", [], 1, []) for i in range(1, 9)]
    for child in children:
        child.parent = skill
    forest = Forest([skill, *others], {n.node_id: n for n in [skill, *others, *children]}, 2)
    assign_names([skill, *others], SKILLS_DIR, {})
    assign_names(children, skill.dir, {})
    extras = NodeExtras(examples=list(cards)[:5], entities=[f"carrier {i}" for i in range(12)],
                        related=[(o.node_id, [f"shared term {j}" for j in range(5)]) for o in others])
    text = render_node(skill, cards, extras, forest)
    nav = parse_nav_file(text, f"{skill.dir}/SKILL.md")
    assert len(text.encode()) <= NAV_FILE_TARGET_BYTES
    assert [g.name for g in nav.groups] == [c.name for c in children]  # every group row kept
    assert nav.related and nav.related[0].name == others[0].name  # the closest related skill stays
    roomy = render_node(skill, cards, NodeExtras(examples=list(cards)[:2]), Forest([skill], forest.by_id, 2))
    assert len(parse_nav_file(roomy, "x").examples) == 2  # a file with room keeps its examples


def test_a_full_leaf_with_stubs_keeps_the_left_out_line_within_the_file_size():
    """Rows that fill a leaf leave room for the line saying its stubs were left out: the file
    stays within its size, and a leaf whose leanest rows plus that line do not fit is crowded."""
    from c2s_core.navrows import doc_stub, parse_nav_file

    def leaf_of(n: int) -> tuple[Node, dict, Forest]:
        cards = {f"a/{i}.md": DocCard(f"a/{i}.md", f"Regional sales tax rule for district number {i}",
                                      "Tax for one region.", [], []) for i in range(n)}
        leaf = Node("L1-0000", 1, "Tax", "Tax rules", "Key terms: tax.", "tax", [], len(cards), list(cards))
        forest = Forest([leaf], {leaf.node_id: leaf}, 1)
        assign_names([leaf], SKILLS_DIR, {})
        return leaf, cards, forest

    stubs = [doc_stub(DocCard(f"b/{i:03d}.md", f"Shipping fee table for zone {i}", "", [], []),
                      f"{SKILLS_DIR}/other/zone-{i:03d}/{INDEX_FILE}") for i in range(50)]
    def fits(n: int) -> bool:
        leaf, cards, forest = leaf_of(n)
        return rows_fit(leaf, cards, NodeExtras(see_also=stubs), forest)

    n = max(n for n in range(20, 120) if fits(n))  # the fullest leaf that still fits
    leaf, cards, forest = leaf_of(n)
    text = render_node(leaf, cards, NodeExtras(see_also=stubs), forest)
    assert len(text.encode()) <= NAV_FILE_TARGET_BYTES
    assert "more `@see` stubs left out" in text and len(parse_nav_file(text, "x").cards) == n
    assert not fits(n + 1)


def test_a_leaf_beside_a_split_one_is_read_without_a_round_more(grown, split):
    """A skill's height counts its split cluster's sub-group level, one more than its other
    branches have. The navigator learns which of a node's children have sub-folders when it
    counts them, so it never spends a round counting the (absent) children of a leaf: a leaf
    beside the split one is read in the next round."""
    texts, meta, parents = split
    split_skills = {path.split("/")[1] for path in parents}
    beside = [(path, doc) for path, text in texts.items() for doc in primary_rows(text)
              if path.split("/")[1] in split_skills and not meta[path].get("subgroup") and path not in parents]
    assert beside
    leaves = {path.rsplit("/", 1)[0] for path, text in texts.items() if primary_rows(text)}
    for path, doc in beside[:4]:
        title = (grown.source / doc).read_text(encoding="utf-8").split("\n", 1)[0].lstrip("# ")
        tools = TreeTools(grown.out)
        reply = navigate(title, tools, route=False)
        assert doc in reply.fetched[:5], (title, reply.fetched[:5])
        opened = re.findall(r"for d in (\S+)/\*/;", " ".join(str(c.input.get("command", "")) for c in tools.trace))
        assert not set(opened) & leaves, (title, sorted(set(opened) & leaves))
        assert reply.turns <= len(path.split("/")) + 1, (path, reply.usage.get("calls_per_round"))


def test_a_split_leaf_of_many_sub_groups_cuts_its_summary_before_it_overflows():
    """A split cluster of ~30 sub-groups (300 near-identical API pages): its sub-group rows, at
    their leanest, and a long summary would pass the size. The summary restates what the rows
    list, so it is cut (marked) and the file keeps every sub-group row within its size."""
    from c2s_core.navrows import parse_nav_file

    covers = "; ".join(f"String message, throwable cause, exception {i}" for i in range(12))
    subgroups = [Node(f"S-{i:04d}", SUBGROUP_LEVEL, f"Unreflectsetter unreflectconstructor stackelements {i}",
                      f"Exception kind {i}: constructors.",
                      "Key terms: x.", f"unreflectsetter unreflectconstructor stackelements getcause {i}", [], 10,
                      [f"api/e{i}-{j}.html" for j in range(10)])
                 for i in range(30)]
    split_leaf = Node("L1-0000", 1, "Exception, explanation, throwable cause",
                      "Exception, explanation and throwable cause: 30 topics on string msg, string reason.",
                      f"Question types: troubleshooting, reference. Key terms: getcause, detailmessage. Covers: {covers}.",
                      "exception", [], 300, [d for g in subgroups for d in g.members], children=subgroups)
    for g in subgroups:
        g.parent = split_leaf
    forest = Forest([split_leaf], {n.node_id: n for n in [split_leaf, *subgroups]}, 2)
    assign_names([split_leaf], SKILLS_DIR, {})
    assign_names(subgroups, split_leaf.dir, {})
    cards = {d: DocCard(d, d, "A constructor.", [], []) for g in subgroups for d in g.members}
    text = render_node(split_leaf, cards, NodeExtras(), forest)
    assert len(text.encode()) <= NAV_FILE_TARGET_BYTES
    assert [g.name for g in parse_nav_file(text, f"{split_leaf.dir}/SKILL.md").groups] == [g.name for g in subgroups]
    assert "Key terms: getcause" in text and "…" in text and covers not in text  # cut, not dropped


def test_the_size_check_warns_only_above_the_4kb_design_and_reports_the_median(tmp_path):
    from .fakes.trees import documents, write_tree

    docs = documents(6)
    ids = list(docs)
    root = write_tree(tmp_path / "tree", {"alpha": {"one": ids[:3], "two": ids[3:5]}, "beta": {"": ids[5:]}}, docs)

    def sizes():
        return next(o for o in check_tree(root, ids, 10) if o.name == "nav_file_sizes")

    files = nav_files(root)
    median = sorted(f.stat().st_size for f in files)[(len(files) - 1) // 2]
    fine = sizes()
    assert fine.passed and not fine.blocking and f"median {median} B (typical: under 2048 B)" in fine.description
    leaf = root / "skills" / "alpha" / "one" / "INDEX.md"
    with leaf.open("a", encoding="utf-8") as out:  # past 2 KB: still within the design
        out.write("\n" + "x" * (3000 - leaf.stat().st_size))
    assert sizes().passed and sizes().metadata["over_4kb"] == 0
    with leaf.open("a", encoding="utf-8") as out:
        out.write("x" * 1200)
    over = sizes()
    assert not over.passed and over.metadata["over_4kb"] == 1
    assert "1 file(s) above 4096 B, largest skills/alpha/one/INDEX.md" in over.description
