"""The language-reference development corpus (benchmarks/debian_corpus.py, source ``perl``): POD
pages become documents, each of perlfunc's functions a page of its own, and Perl's FAQ becomes
questions whose gold is the pages their answers link to."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import debian_corpus as dc  # noqa: E402

PERLFUNC = """=head1 NAME
X<function>

perlfunc - Perl builtin functions

=head1 DESCRIPTION

The functions in this section can serve as terms in an expression. They fall into two major
categories: list operators and named unary operators. These differ in their precedence relationship
with a following comma.

=head2 Alphabetical Listing of Perl Functions

=over

=item sort SUBNAME LIST
X<sort>

=item sort BLOCK LIST

=item sort LIST

=for Pod::Functions sort a list of values

In list context, this sorts the LIST and returns the sorted list value. If SUBNAME or BLOCK is
omitted, sorts in standard string comparison order, so C<< $a cmp $b >> is the default and
C<< $a <=> $b >> sorts numerically. See L<perlop/"Equality Operators"> and L<the reverse
function|/reverse LIST>.

    my @articles = sort {$a <=> $b} @files;

=over

=item Stability

A stable sort keeps equal elements in their order, which E<lt>use sort 'stable'E<gt> asks for
in older perls; the nested list stays inside the function's own page.

=back

=item reverse LIST
X<reverse>

In list context, returns a list value consisting of the elements of LIST in the opposite order.
In scalar context, concatenates the elements of LIST and returns a string value with all
characters in the opposite order, which is handy for palindromes.

=back

=cut
"""

MODULE = """package Time::Tiny;
use strict;
sub new { bless {}, shift }

=head1 NAME

Time::Tiny - A date object with the least possible code

=head1 SYNOPSIS

  my $t = Time::Tiny->new;

=head1 DESCRIPTION

B<Time::Tiny> keeps a time of day and nothing else. It parses I<ISO 8601> strings and prints
them back; use L<Time::Piece> where dates, time zones and arithmetic are needed instead.

=begin comment

An editor's note that no reader sees.

=end comment

=cut

sub parse { 1 }
1;
"""

FAQ = """=head1 NAME

perlfaq4 - Data Manipulation

=head1 Data: Arrays

=head2 How do I sort an array by (anything)?

Supply a comparison function to sort() (described in L<perlfunc/sort>):

    @list = sort { $a <=> $b } @list;

See also L<perlop> and L<Time::Tiny>.

=head2 How do I shuffle an array randomly?

Use L<List::Util>, which is not in this corpus, or read L<perlfaq4> itself.

=head2 How do I reverse a string?

Use C<reverse()> in scalar context, as documented in L<perlfunc/"reverse">.
"""


def _docs(tmp_path: Path, name: str, rel: str, text: str) -> list[dict]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return dc.split_pod(dc.parse_pod(path), "perl", rel)


def test_formatting_codes_become_plain_text_and_links_are_collected():
    links: list[str] = []
    text = dc.pod_inline("Use C<< $a <=> $b >>, B<not> X<index>I<E<lt>fooE<gt>> or L<sort|perlfunc/sort> "
                         "and L<perlop/\"Quote and Quote-like Operators\">.", links)
    assert text == "Use $a <=> $b, not <foo> or sort and Quote and Quote-like Operators in perlop."
    assert links == ["perlfunc/sort", 'perlop/"Quote and Quote-like Operators"']
    assert dc.pod_inline("E<0x41>E<66>E<0103>E<eacute>") == "ABCé"  # hex, decimal, octal, a name


def test_each_perlfunc_function_is_a_page_with_its_signatures(tmp_path):
    docs = _docs(tmp_path, "perlfunc.pod", dc.PERLFUNC, PERLFUNC)
    by_page = {d["id"].split("#", 1)[0]: d for d in docs}
    assert set(by_page) == {"perl/pod/perlfunc", "perl/pod/perlfunc/sort", "perl/pod/perlfunc/reverse"}
    sort = by_page["perl/pod/perlfunc/sort"]
    assert sort["title"] == "perlfunc › sort"
    assert sort["text"].startswith("sort SUBNAME LIST\nsort BLOCK LIST\nsort LIST\nIn list context")
    assert "$a <=> $b sorts numerically" in sort["text"]
    assert "    my @articles = sort {$a <=> $b} @files;" in sort["text"]  # verbatim kept as written
    assert "- Stability" in sort["text"] and "<use sort 'stable'>" in sort["text"]  # the nested list stays
    assert "sort a list of values" not in sort["text"]  # =for paragraphs are not text
    assert by_page["perl/pod/perlfunc"]["title"] == "perlfunc — Perl builtin functions"
    assert "reverse" not in by_page["perl/pod/perlfunc"]["text"]


def test_a_module_reads_only_its_pod_without_begin_regions(tmp_path):
    docs = _docs(tmp_path, "Tiny.pm", "Time/Tiny", MODULE)
    assert [d["id"] for d in docs] == ["perl/Time/Tiny#top"]
    (doc,) = docs
    assert doc["title"] == "Time::Tiny — A date object with the least possible code"
    assert "Time::Tiny keeps a time of day" in doc["text"] and "use Time::Piece where" in doc["text"]
    assert "sub parse" not in doc["text"] and "use strict" not in doc["text"]
    assert "editor's note" not in doc["text"]


def test_faq_questions_take_the_linked_pages_of_the_corpus_as_gold(tmp_path):
    docs = _docs(tmp_path, "perlfunc.pod", dc.PERLFUNC, PERLFUNC) + _docs(tmp_path, "Tiny.pm", "Time/Tiny", MODULE)
    faq = tmp_path / "perlfaq4.pod"
    faq.write_text(FAQ, encoding="utf-8")
    rows = dc.make_perlfaq_questions(docs, [faq])
    assert [(r["question"], r["gold_pages"]) for r in rows] == [
        ("How do I sort an array by (anything)?", ["perl/pod/perlfunc/sort", "perl/Time/Tiny"]),
        ("How do I reverse a string?", ["perl/pod/perlfunc/reverse"]),
    ]  # perlop is not in this corpus; the shuffle question links to nothing in it and is left out
    assert rows[0]["gold_ids"] == [d["id"] for d in docs if d["id"].split("#")[0] in rows[0]["gold_pages"]]
