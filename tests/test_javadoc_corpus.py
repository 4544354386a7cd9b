"""The scale corpus's javadoc source (benchmarks/debian_corpus.py): a class page of the Java SE
API becomes a document for the class and one for each member, titled so that the known-item
questions can be templated from them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import debian_corpus as dc  # noqa: E402

# The shape javadoc 17 writes (header, member summary tables, then one section per member detail).
PAGE = """<!DOCTYPE HTML><html lang="en"><head><title>Deque (Java SE 17 &amp; JDK 17)</title></head><body>
<header role="banner"><nav role="navigation">Overview Module Package Class Use Tree</nav></header>
<div class="flex-content"><main role="main">
<div class="header">
<div class="sub-title"><span class="module-label-in-type">Module</span>&nbsp;<a href="../../module-summary.html">java.base</a></div>
<div class="sub-title"><span class="package-label-in-type">Package</span>&nbsp;<a href="package-summary.html">java.util</a></div>
<h1 title="Interface Deque" class="title">Interface Deque&lt;E&gt;</h1>
</div>
<section class="class-description" id="class-description">
<div class="block">A linear collection that supports element insertion and removal at both ends. The name
<i>deque</i> is short for "double ended queue" and is usually pronounced "deck". Most
<code>Deque</code> implementations place no fixed limits on the number of elements they may contain.</div>
</section>
<section class="summary"><h2>Method Summary</h2><table><tr><td>addFirst(E e)</td>
<td>Inserts the specified element at the front of this deque.</td></tr></table></section>
<section class="details"><ul class="details-list">
<li><section class="detail" id="addFirst(E)"><h3>addFirst</h3>
<div class="member-signature"><span class="return-type">void</span>&nbsp;<span class="element-name">addFirst</span><span class="parameters">(E&nbsp;e)</span></div>
<div class="block">Inserts the specified element at the front of this deque if it is possible to do so
immediately without violating capacity restrictions, throwing an <code>IllegalStateException</code>
if no space is currently available. When using a capacity-restricted deque, it is generally
preferable to use method <code>offerFirst</code>.</div>
<dl class="notes"><dt>Parameters:</dt><dd><code>e</code> - the element to add</dd></dl>
</section></li>
<li><section class="detail" id="peekLast()"><h3>peekLast</h3>
<div class="member-signature"><span class="return-type">E</span>&nbsp;<span class="element-name">peekLast</span><span class="parameters">()</span></div>
<div class="block">Retrieves, but does not remove, the last element of this deque, or returns
<code>null</code> if this deque is empty. Unlike <code>getLast</code>, it does not throw when the deque
holds no elements, so a caller can poll it without guarding the call.</div>
<dl class="notes"><dt>Returns:</dt><dd>the tail of this deque, or <code>null</code> if this deque is empty</dd></dl>
</section></li>
<li><section class="detail" id="size()"><h3>size</h3>
<div class="block">Returns the number of elements in this deque.</div>
</section></li>
</ul></section>
</main></div></body></html>
"""


def test_a_class_page_gives_the_class_and_each_member_as_documents(tmp_path):
    page = tmp_path / "java.base" / "java" / "util" / "Deque.html"
    page.parent.mkdir(parents=True)
    page.write_text(PAGE, encoding="utf-8")
    rel = "java.base/java/util/Deque.html"
    docs = [d for d in dc.split_units(dc.parse_javadoc(page), "javadoc", rel) if len(d["text"]) >= dc.MIN_DOC_CHARS]
    by_id = {d["id"]: d for d in docs}
    # The class, and the two members long enough to be documents (size() is under the floor).
    assert list(by_id) == [f"javadoc/{rel}#top", f"javadoc/{rel}#addFirst(E)", f"javadoc/{rel}#peekLast()"]
    top = by_id[f"javadoc/{rel}#top"]
    assert top["title"] == "java.util.Deque — A linear collection that supports element insertion and removal at both ends."
    assert "Method Summary" not in top["text"] and "Overview Module" not in top["text"]  # no tables, no navigation
    member = by_id[f"javadoc/{rel}#addFirst(E)"]
    assert member["title"].startswith("Deque.addFirst(E e) — Inserts the specified element at the front of this deque")
    assert "Parameters:" in member["text"] and "IllegalStateException" in member["text"]
    # The known-item template reads the member's purpose from its title.
    key, question = dc._question_for(member["_heading"])
    assert question.startswith("Which page covers: Inserts the specified element at the front of this deque")


def test_only_class_pages_are_read(tmp_path):
    api = tmp_path / "usr/share/doc/openjdk-17-jre-headless/api"  # as unpacked from openjdk-17-doc
    for rel in ("java.base/java/util/Deque.html", "java.base/java/util/package-summary.html",
                "java.base/java/util/class-use/Deque.html", "index-files/index-1.html",
                "java.base/module-summary.html", "java.base/java/util/doc-files/Figure.html"):
        (api / rel).parent.mkdir(parents=True, exist_ok=True)
        (api / rel).write_text(PAGE, encoding="utf-8")
    assert [rel for _, rel in dc.SOURCES["javadoc"].files(tmp_path)] == ["java.base/java/util/Deque.html"]
