"""term_index.txt: the file's format, the leaves and rows it names, and what the navigator reads of it."""

from __future__ import annotations

from c2s_pipeline.term_index import build_term_index, leaf_folder, leaf_nav_file, parse_term_lines, term_pattern

LEAVES = [
    ("skills/billing/refunds/INDEX.md", ["Refund a charge\nRefunds reach the card in 5 days.",
                                         "Chargebacks\nA disputed charge freezes the payout."]),
    ("skills/billing/invoices/INDEX.md", ["Invoice numbering\nInvoices are numbered per year."]),
    ("skills/domains/SKILL.md", ["Connect a domain\nPoint the domain's DNS at the site; refunds of domains take 5 days."]),
]


def test_places_are_leaves_and_rows_most_rows_first():
    index = parse_term_lines(build_term_index(LEAVES))
    assert index["refund"].documents == 2
    assert index["refund"].leaves == {"skills/billing/refunds/INDEX.md": (1,), "skills/domains/SKILL.md": (1,)}
    assert index["charge"].leaves == {"skills/billing/refunds/INDEX.md": (1, 2)}
    assert index["invoice"].leaves == {"skills/billing/invoices/INDEX.md": (1,)}
    assert "the" not in index and "are" not in index  # stop words are not terms


def test_a_term_in_more_leaves_than_the_cap_is_left_out():
    many = [(f"skills/s{i}/SKILL.md", [f"Topic {i}\nEvery page says widget."]) for i in range(20)]
    index = parse_term_lines(build_term_index(many + [("skills/t/SKILL.md", ["Rare\nOnly here: sprocket."])]))
    assert "widget" not in index  # in 20 of 21 leaves: no direction
    assert index["sprocket"].leaves == {"skills/t/SKILL.md": (1,)}


def test_lines_are_sorted_with_a_header_and_parse_back_from_grep_output():
    text = build_term_index(LEAVES)
    lines = text.splitlines()
    assert lines[0].startswith("# term_index:") and lines[1:] == sorted(lines[1:])
    # A subset of the lines (what `grep` prints) parses on its own; other lines are ignored.
    subset = "\n".join(line for line in lines if line.startswith(("refund ", "invoice "))) + "\ngrep: noise\n"
    assert set(parse_term_lines(subset)) == {"refund", "invoice"}


def test_leaf_folders_round_trip_and_the_pattern_matches_whole_terms():
    for nav in ("skills/a/SKILL.md", "skills/a/b/c/INDEX.md"):
        assert leaf_nav_file(leaf_folder(nav)) == nav
    import re
    pattern = re.compile(term_pattern(["refund", "merge.ff"]))
    assert pattern.match("refund 2 a:1") and pattern.match("merge.ff 1 a:1")
    assert not pattern.match("refunds 2 a:1") and not pattern.match("mergexff 1 a:1")


def _body_word_tree(root, with_index: bool):
    """Six skills of three groups of five look-alike documents; one document's body (not its
    card, which is its first sentence) names a sprocket's calibration torque."""
    from c2s_pipeline.layout import TERM_INDEX_FILE

    from .fakes.trees import documents, write_tree

    docs = documents(90, size=300)
    ids = list(docs)
    target = ids[47]
    title, text = docs[target]
    docs[target] = (title, text + " Sprocket calibration needs a torque of 12 newton metres.")
    skills = {f"area-{s}": {f"topic-{s}-{g}": ids[s * 15 + g * 5: s * 15 + g * 5 + 5] for g in range(3)}
              for s in range(6)}
    write_tree(root, skills, docs)
    if with_index:
        leaves = [(f"skills/{s}/{g}/INDEX.md", [f"{docs[d][0]}\n{docs[d][1]}" for d in members])
                  for s, groups in skills.items() for g, members in groups.items()]
        (root / TERM_INDEX_FILE).write_text(build_term_index(leaves), encoding="utf-8")
    return root, target


def test_the_navigator_finds_a_document_by_words_only_its_body_holds(tmp_path):
    from c2s_agent.offline import navigate
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
