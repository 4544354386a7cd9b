"""term_index.txt: the file's format, the leaves and rows it names, and what the navigator reads of it."""

from __future__ import annotations

import re

import pytest

from c2s_core.term_index import (MAX_LEAVES_LISTED, TermPostings, build_term_index, leaf_folder, leaf_name_pattern, leaf_nav_file,
                                     leaf_pattern, parse_leaf_lines, parse_term_index, parse_term_lines, row_scores,
                                     term_pattern)

LEAVES = [
    ("skills/billing/refunds/INDEX.md", [("Refund a charge", "Refunds reach the card in 5 days."),
                                         ("Chargebacks", "A disputed charge freezes the payout.")]),
    ("skills/billing/invoices/INDEX.md", [("Invoice numbering", "Invoices are numbered per year.")]),
    ("skills/domains/SKILL.md", [("Connect a domain",
                                  "Point the domain's DNS at the site; refunds of domains take 5 days.")]),
]


def test_leaves_are_numbered_in_order_and_places_are_leaf_numbers_and_rows_most_rows_first():
    built = build_term_index(LEAVES)
    index = parse_term_index(built.text)
    assert built.index == index  # the compile's probe uses the parsed form the file reads back as
    assert index.leaves == {1: "skills/billing/refunds/INDEX.md", 2: "skills/billing/invoices/INDEX.md",
                            3: "skills/domains/SKILL.md"}
    assert index.terms["refund"].documents == 2
    assert index.terms["refund"].leaves == {1: (1,), 3: (1,)}
    assert index.terms["charge"].leaves == {1: (1, 2)}
    assert index.terms["invoice"].leaves == {2: (1,)}
    assert "the" not in index.terms and "are" not in index.terms  # stop words are not terms
    assert index.terms["invoice"].idf(4) > index.terms["refund"].idf(4) > 0  # rarer says more
    # Title lines: the rows whose titles use the term (a title's words are body terms too).
    assert index.terms["=refund"] == TermPostings(1, {1: (1,)})
    assert index.terms["=charge"].leaves == {1: (1,)} and index.terms["=chargeback"].leaves == {1: (2,)}
    assert "=day" not in index.terms and index.terms["chargeback"].leaves == {1: (2,)}
    assert list(index.lines(["refund", "payout"])) == ["refund", "=refund", "payout"]


def test_a_term_in_more_leaves_than_the_cap_is_left_out():
    many = [(f"skills/s{i}/SKILL.md", [(f"Topic {i}", "Every page says widget.")]) for i in range(20)]
    built = build_term_index(many + [("skills/t/SKILL.md", [("Rare", "Only here: sprocket.")])])
    index = parse_term_lines(built.text)
    assert "widget" not in index and "=topic" not in index  # in 20 of 21 leaves: no direction
    assert index["sprocket"].leaves == {21: (1,)} and index["=rare"].leaves == {21: (1,)}
    # Documents per term are counted for every term, the ones left out of the file too.
    assert built.document_frequency["widget"] == 20 and built.document_frequency["topic"] == 20
    assert built.document_frequency["sprocket"] == 1 and "every" not in built.document_frequency


def test_a_large_tree_lists_no_term_in_more_leaves_than_the_absolute_cap():
    """On 1,000 leaves the share would list a term in up to 250: a line is held to
    MAX_LEAVES_LISTED leaves, so what a question reads does not grow with the corpus."""
    leaves = [(f"skills/s/g{i}/INDEX.md", [(f"Page {i}", ("gadget " if i < MAX_LEAVES_LISTED else "")
                                              + ("gizmo " if i <= MAX_LEAVES_LISTED else "") + "text")])
              for i in range(1000)]
    built = build_term_index(leaves)
    index = parse_term_lines(built.text)
    assert len(index["gadget"].leaves) == MAX_LEAVES_LISTED and "gizmo" not in index
    assert built.index == parse_term_index(built.text)


def test_leaf_lines_then_sorted_term_lines_each_parse_back_from_grep_output():
    text = build_term_index(LEAVES).text
    lines = text.splitlines()
    assert lines[0].startswith("# term_index:")
    assert [line.split(" ")[0] for line in lines[1:4]] == ["@1", "@2", "@3"] and lines[4:] == sorted(lines[4:])
    # Subsets of the lines (what `grep` prints) parse on their own; other lines are ignored.
    subset = "\n".join(line for line in lines if re.match(term_pattern(["refund", "invoice"]), line))
    assert set(parse_term_lines(subset + "\ngrep: noise\n@2 billing/invoices")) == {
        "refund", "invoice", "=refund", "=invoice"}
    assert parse_leaf_lines("\n".join(line for line in lines if re.match(leaf_pattern([3, 1]), line))) == {
        1: "skills/billing/refunds/INDEX.md", 3: "skills/domains/SKILL.md"}
    by_name = [line for line in lines if re.match(leaf_name_pattern(["invoices", "domains"]), line)]
    assert by_name == ["@2 billing/invoices", "@3 domains"]


def test_a_title_counts_its_words_again_where_it_restates_the_question():
    # Rows 1-3 of leaf 1 use 'list' and 'format' in their bodies; row 2's title is "List format",
    # row 3's holds 'list' only; a longer question's other words are in a row of leaf 2.
    lines = parse_term_lines("list 3 1:1,2,3\nformat 2 1:1,2\n=list 2 1:2,3\n=format 1 1:2\n"
                             "sprocket 1 2:1\ntorque 1 2:1\ngearbox 1 2:1\n")
    body = row_scores({k: v for k, v in lines.items() if not k.startswith("=")}, 100)
    short = row_scores({k: v for k, v in lines.items() if k.lstrip("=") in ("list", "format")}, 100)
    assert short[1, 1] == body[1, 1]  # no title word: its body words only
    again = lines["=list"].idf(100) + lines["=format"].idf(100)
    assert short[1, 2] == pytest.approx(body[1, 2] + again)  # its title is the whole question: counted again
    assert short[1, 3] == body[1, 3]  # 'list' alone is under TITLE_SHARE of its weight
    long = row_scores(lines, 100)  # asked also of sprocket gearbox torque, the same title restates little
    assert long[1, 2] == body[1, 2] and long[2, 1] > long[1, 2]


def test_leaf_folders_round_trip_and_the_patterns_match_whole_terms_and_numbers():
    for nav in ("skills/a/SKILL.md", "skills/a/b/c/INDEX.md"):
        assert leaf_nav_file(leaf_folder(nav)) == nav
    pattern = re.compile(term_pattern(["refund", "merge.ff"]))
    assert pattern.match("refund 2 1:1") and pattern.match("merge.ff 1 1:1") and pattern.match("=refund 1 1:1")
    assert not pattern.match("refunds 2 1:1") and not pattern.match("mergexff 1 1:1")
    assert re.match(leaf_pattern([1]), "@1 a") and not re.match(leaf_pattern([1]), "@12 a")
    assert not re.match(leaf_name_pattern(["voices"]), "@2 billing/invoices")


def _body_word_tree(root, with_index: bool, decoy: bool = False):
    """Six skills of three groups of five look-alike documents; one document's body (not its
    card, which is its first sentence) names a sprocket's calibration torque. ``decoy``: the
    first skill's titles are about gearbox torque, so its rows match a question on both words."""
    from c2s_core.layout import TERM_INDEX_FILE

    from .fakes.trees import documents, write_tree

    docs = documents(90, size=300)
    ids = list(docs)
    target = ids[47]
    title, text = docs[target]
    docs[target] = (title, text + " Sprocket calibration needs a torque of 12 newton metres.")
    for i in range(15 if decoy else 0):
        docs[ids[i]] = (f"Gearbox torque table {i}", docs[ids[i]][1])
    skills = {f"area-{s}": {f"topic-{s}-{g}": ids[s * 15 + g * 5: s * 15 + g * 5 + 5] for g in range(3)}
              for s in range(6)}
    write_tree(root, skills, docs)
    if with_index:
        leaves = [(f"skills/{s}/{g}/INDEX.md", [docs[d] for d in members])
                  for s, groups in skills.items() for g, members in groups.items()]
        (root / TERM_INDEX_FILE).write_text(build_term_index(leaves).text, encoding="utf-8")
    return root, target


def test_the_navigator_finds_a_document_by_words_only_its_body_holds(tmp_path):
    from c2s_agent.offline_navigator import navigate
    from c2s_agent.tools import TreeTools

    question = "What torque does sprocket calibration need?"
    root, target = _body_word_tree(tmp_path / "indexed", with_index=True)
    tools = TreeTools(root)
    reply = navigate(question, tools, route=False)
    assert target in reply.fetched[:5]  # (its look-alike neighbours tie it on every other signal)
    greps = [c.input["command"] for c in tools.trace if "term_index.txt" in c.input.get("command", "")]
    assert greps and all(c.startswith("grep ") for c in greps)  # read with grep, never whole

    bare, target = _body_word_tree(tmp_path / "bare", with_index=False)
    assert target not in navigate(question, TreeTools(bare), route=False).fetched  # rows alone never lead there


def test_the_blocking_check_names_a_leaf_line_or_place_that_is_no_document_row(tmp_path):
    from c2s_core.layout import TERM_INDEX_FILE
    from c2s_pipeline.validate import check_tree

    from .fakes.trees import documents, write_tree

    docs = documents(6)
    ids = list(docs)
    root = write_tree(tmp_path / "tree", {"alpha": {"one": ids[:3], "two": ids[3:5]}, "beta": {"": ids[5:]}}, docs)
    leaves = [("skills/alpha/one/INDEX.md", [docs[d] for d in ids[:3]]),
              ("skills/alpha/two/INDEX.md", [docs[d] for d in ids[3:5]]),
              ("skills/beta/SKILL.md", [docs[ids[5]]])]
    good = build_term_index(leaves).text

    def outcome(text: str):
        (root / TERM_INDEX_FILE).write_text(text, encoding="utf-8")
        return next(o for o in check_tree(root, ids, 10) if o.name == "term_index_rows")

    assert outcome(good).passed
    bad_row = outcome(good + "sprocket 1 2:7\n")  # leaf 2 lists two documents
    assert not bad_row.passed and bad_row.blocking and "(sprocket): leaf 2 row 7" in bad_row.description
    unknown_leaf = outcome(good.replace("@3 beta", "@3 gamma"))
    assert not unknown_leaf.passed and "leaf 3 (skills/gamma/SKILL.md) is not a leaf" in unknown_leaf.description


def test_a_leaf_the_beam_missed_is_read_only_at_the_rows_the_index_names(tmp_path):
    """With one node a level, the descent goes where the rows match the question (gearbox
    torque); the document whose body names the sprocket lives elsewhere, and the navigator
    reads just its row there."""
    from c2s_agent.offline_navigator import navigate
    from c2s_agent.tools import TreeTools

    root, target = _body_word_tree(tmp_path / "indexed", with_index=True, decoy=True)
    tools = TreeTools(root)
    reply = navigate("What torque does sprocket calibration need in a gearbox?", tools, route=False, beam=1)
    assert target in reply.fetched  # read and ranked (the gearbox rows match more of the question's words)
    leaf = "skills/area-3/topic-3-0/INDEX.md"  # the target is row 3 of it
    commands = [c.input["command"] for c in tools.trace if c.tool == "code_execution"]
    # (a round's row reads are pipelines joined with ';' in one call)
    row_reads = [p for c in commands for p in c.split("; ") if leaf in p and "| head -n" in p]
    assert row_reads == [f"grep -E '^- `[^`]+` \\*\\*' {leaf} | head -n 3 | tail -n 1"]
    assert not any(leaf in c and "'^(## |- )'" in c for c in commands)  # the leaf was never read whole
    assert any("term-index rows read in" in n for n in reply.notes)


def _title_word_tree(root, with_titles: bool):
    """Six skills of three groups of five look-alike documents, every body saying 'list',
    'output' and 'format' (too common to be listed as body terms); one document is titled
    "List output format"; the first skill's fifteen are titled "Output format table N" and the
    second's "List of settings N" (their rows match the question's words fifteen times over)."""
    from c2s_core.layout import TERM_INDEX_FILE
    from c2s_core.term_index import TITLE_MARK

    from .fakes.trees import documents, write_tree

    docs = {d: (title, f"{text} Each list has an output format.") for d, (title, text) in documents(90, size=300).items()}
    ids = list(docs)
    target = ids[52]  # row 3 of area-3/topic-3-1: not one of its skill's examples
    docs[target] = ("List output format", docs[target][1])
    for i in range(15):
        docs[ids[i]] = (f"Output format table {i}", docs[ids[i]][1])
        docs[ids[15 + i]] = (f"List of settings {i}", docs[ids[15 + i]][1])
    skills = {f"area-{s}": {f"topic-{s}-{g}": ids[s * 15 + g * 5: s * 15 + g * 5 + 5] for g in range(3)}
              for s in range(6)}
    write_tree(root, skills, docs)
    leaves = [(f"skills/{s}/{g}/INDEX.md", [docs[d] for d in members])
              for s, groups in skills.items() for g, members in groups.items()]
    lines = build_term_index(leaves).text.splitlines(keepends=True)
    (root / TERM_INDEX_FILE).write_text("".join(line for line in lines if with_titles or not line.startswith(TITLE_MARK)),
                                        encoding="utf-8")
    return root, target


def test_the_navigator_finds_a_document_whose_title_restates_the_question_in_common_words(tmp_path):
    from c2s_agent.offline_navigator import navigate
    from c2s_agent.tools import TreeTools

    question = "Where can I read about list output format?"
    root, target = _title_word_tree(tmp_path / "titles", with_titles=True)
    index = parse_term_index((root / "term_index.txt").read_text(encoding="utf-8"))
    assert "list" not in index.terms and index.terms["=list"].leaves[11] == (3,)  # body term over the cap; title kept
    reply = navigate(question, TreeTools(root), route=False, beam=1)  # the beam takes the first skill ...
    assert reply.fetched[0] == target and any("term-index rows read in" in n for n in reply.notes)  # ... the title lines jump

    bare, target = _title_word_tree(tmp_path / "bodies", with_titles=False)
    assert target not in navigate(question, TreeTools(bare), route=False, beam=1).fetched[:5]  # the decoys win
