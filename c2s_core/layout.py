"""The compiled tree's on-disk layout: a contract the agent and other tools rely on.

    OUT/skills/<skill-name>/SKILL.md                 one per top-level cluster
    OUT/skills/<skill-name>/<group-name>/INDEX.md    one per deeper cluster (nested)
    OUT/skills/.../<leaf-name>/<part-name>/INDEX.md  a leaf too crowded for one nav file lists sub-groups
                                                     instead of documents, one folder below it (again
                                                     below a sub-group still crowded), frontmatter
                                                     ``subgroup: true``; they list the documents
    OUT/entity_index.json                            entity → [{path, mentions}], most mentions first
    OUT/term_index.txt                               body term → the leaves whose documents use it
    OUT/documents.sqlite                             full texts, random access by doc_id
    OUT/manifest.json                                corpus, parameters, versions, counts, doc_id → nav file
    OUT/search_index/                                flat search over every document: bm25s files (stemmed
                                                     BM25), vectors.npy (the compile's document embeddings,
                                                     float16, index order; absent in trees from before it)
                                                     and docs.json (ids, titles, nav files, tokenizer, encoder)

A nav file lists either sub-groups (``## Sub-groups``) or documents (``## Documents``): a reader
tells a leaf by its rows. The frontmatter's ``level`` is the node's height (1: it lists documents),
so a skill's says how many steps its deepest documents lie below it.

Paths inside the tree (in manifest.json, entity_index.json and ``@see`` stubs) are POSIX paths
relative to OUT, e.g. ``skills/billing/refunds/INDEX.md``.
"""

SKILLS_DIR = "skills"
SKILL_FILE = "SKILL.md"
INDEX_FILE = "INDEX.md"
ENTITY_INDEX_FILE = "entity_index.json"
TERM_INDEX_FILE = "term_index.txt"
DOCUMENT_STORE_FILE = "documents.sqlite"
MANIFEST_FILE = "manifest.json"
SEARCH_INDEX_DIR = "search_index"

# A nav file is designed to stay under 4 KB, so that one read of it costs an agent a bounded share
# of its context however large the corpus (the method's files are typically under 2 KB).
NAV_FILE_DESIGN_BYTES = 4096

# Section headings of navigation files; the navigator parses them.
SECTION_SUBGROUPS = "## Sub-groups"
SECTION_DOCUMENTS = "## Documents"
SECTION_SEE_ALSO = "## See also"
SECTION_EXAMPLES = "## Example documents"
SECTION_RELATED = "## Related skills"
