"""The agent's code_execution sandbox: confinement, hostile input, bounds and happy paths."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from c2s_agent.sandbox import TRUNCATED, Sandbox, files, limits, patterns

SECRET = "TOPSECRET-42"

BILLING = """\
# Billing
Refund policy: refunds within 30 days.
Invoices are sent monthly.
See refunds/INDEX.md for the refund process.
"""
REFUNDS = """\
# Refunds
How to request a refund
Escalation path: tier1;tier2
"""
SHIPPING = """\
# Shipping
Carriers and delivery times.
No refund on shipping fees.
"""
ROOT_INDEX = """\
# Corpus
- skills/billing
- skills/shipping
"""
BIG = "".join(f"line {i:04d} filler text for paging\n" for i in range(2000))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    # Secrets beside the tree: nothing the agent types may ever read them.
    (tmp_path / "secret.txt").write_text(SECRET + "\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "x").write_text(SECRET + "\n")

    root = tmp_path / "tree"
    files = {
        "INDEX.md": ROOT_INDEX,
        "entity_index.json": '{"refund": [{"path": "skills/billing/SKILL.md", "mentions": 3}]}\n',
        "big.txt": BIG,
        "long.txt": "a" * 5000 + "b\n",
        "skills/billing/SKILL.md": BILLING,
        "skills/billing/refunds/INDEX.md": REFUNDS,
        "skills/shipping/SKILL.md": SHIPPING,
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "documents.sqlite").write_bytes(b"SQLite format 3\x00\x00refund policy\x00")
    (root / "link_out").symlink_to(tmp_path / "outside")
    (root / "skills" / "alias").symlink_to("billing")  # points inside, still refused
    return root


@pytest.fixture
def touched(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every path the sandbox opens or lists, resolved, so tests can check confinement."""
    seen: list[Path] = []
    real_open, real_iterdir, real_listdir = Path.open, Path.iterdir, os.listdir

    def spy_open(self: Path, *args, **kwargs):
        seen.append(Path(os.path.realpath(self)))
        return real_open(self, *args, **kwargs)

    def spy_iterdir(self: Path):
        seen.append(Path(os.path.realpath(self)))
        return real_iterdir(self)

    def spy_listdir(path="."):
        seen.append(Path(os.path.realpath(path)))
        return real_listdir(path)

    monkeypatch.setattr(Path, "open", spy_open)
    monkeypatch.setattr(Path, "iterdir", spy_iterdir)
    monkeypatch.setattr(files.os, "listdir", spy_listdir)
    return seen


@pytest.fixture
def sb(tree: Path) -> Sandbox:
    return Sandbox(tree, max_output_bytes=8192, regex_timeout_s=0.2)


@pytest.fixture
def local(tree: Path) -> Sandbox:
    """The same interpreter run in this process, where the spies above see what it touches (and
    monkeypatched limits apply)."""
    return Sandbox(tree, max_output_bytes=8192, regex_timeout_s=0.2, isolated=False)


def assert_confined(root: Path, touched: list[Path]) -> None:
    root = root.resolve()
    outside = [p for p in touched if not p.is_relative_to(root)]
    assert not outside, f"sandbox touched paths outside the tree: {outside}"


# -- confinement and hostile input ---------------------------------------------------------

SUPPORTED_ONLY_PIPES = "is not supported; only '|' pipes, ';' lists and 'for NAME in WORDS; do ...; done' loops are"

ESCAPES = [
    ("cat ../secret.txt", "refused: path '../secret.txt' is outside the tree"),
    ("cat /etc/passwd", "refused: path '/etc/passwd' is outside the tree"),
    ("cat skills/../../secret.txt", "refused: path 'skills/../../secret.txt' is outside the tree"),
    ("cat /../secret.txt", "refused: path '/../secret.txt' is outside the tree"),
    ("cat link_out/../../secret.txt", "is outside the tree"),
    ("head -n 5 ../outside/x", "refused: path '../outside/x' is outside the tree"),
    ("grep -r TOPSECRET ..", "refused: path '..' is outside the tree"),
    ("find .. -name '*'", "refused: path '..' is outside the tree"),
    ("wc -l ../secret.txt", "refused: path '../secret.txt' is outside the tree"),
    ("cat link_out/x", "refused: 'link_out' is a symbolic link"),
    ("cat 'link_out'/x", "refused: 'link_out' is a symbolic link"),
    ("ls link_out", "refused: 'link_out' is a symbolic link"),
    ("ls -R link_out", "refused: 'link_out' is a symbolic link"),
    ("grep -r TOPSECRET link_out", "refused: 'link_out' is a symbolic link"),
    ("cat skills/alias/SKILL.md", "refused: 'skills/alias' is a symbolic link"),
    ("ls ~", "refused: path '~' is outside the tree"),
    ("cat ~/secret.txt", "refused: path '~/secret.txt' is outside the tree"),
    ("cat $(echo x)", "refused: command substitution '$(...)' " + SUPPORTED_ONLY_PIPES),
    ("cat `echo x`", "refused: command substitution with backticks " + SUPPORTED_ONLY_PIPES),
    ("ls; cat ../secret.txt", "refused: path '../secret.txt' is outside the tree"),  # the whole line's answer
    ("; ".join(["ls"] * 65), "refused: 65 commands joined with ';'; the limit is 64"),
    ("ls && cat x", "refused: command chaining '&&' " + SUPPORTED_ONLY_PIPES),
    ("ls || cat x", "refused: command chaining '||' " + SUPPORTED_ONLY_PIPES),
    ("ls & cat x", "refused: background job '&' " + SUPPORTED_ONLY_PIPES),
    ("cat x > y", "refused: redirection '>' " + SUPPORTED_ONLY_PIPES),
    ("cat x >> y", "refused: redirection '>>' " + SUPPORTED_ONLY_PIPES),
    ("cat < x", "refused: redirection '<' " + SUPPORTED_ONLY_PIPES),
    ("grep -r x . 2>/dev/null", "refused: redirection '>' " + SUPPORTED_ONLY_PIPES),
    ("echo $HOME", "refused: variable expansion '$HOME' " + SUPPORTED_ONLY_PIPES),
    ("cat ${HOME}/x", "refused: variable expansion '${HOME}' " + SUPPORTED_ONLY_PIPES),
    ("cat ${HOME/x/y}", "refused: variable expansion '${HOME/x/y}' " + SUPPORTED_ONLY_PIPES),
    ("for f in ../secret.txt; do cat $f; done", "refused: path '../secret.txt' is outside the tree"),
    ("for f in a; do cat $g; done", "refused: variable expansion '$g' " + SUPPORTED_ONLY_PIPES),
    ("for x in a b; do ls; done | wc -l", "syntax error near 'done': a loop ends with '; done', and its output cannot be piped"),
    ("for x in a; ls; done", "syntax error: a loop is 'for NAME in WORDS; do COMMANDS; done'"),
    ("for x in a; do ls", "syntax error: 'for' without 'done'"),
    ("ls; done", "syntax error: 'done' without 'for'"),
    ("while true; do ls; done", "syntax error near 'while': the only compound command is"),
    ("for f in $(ls); do cat $f; done", "refused: command substitution '$(...)' " + SUPPORTED_ONLY_PIPES),
    ("for a in " + "x " * 50 + "; do for b in " + "y " * 50 + "; do pwd; done; done",
     "refused: this command line runs over 2,048 pipelines (loops unrolled); split it"),
    ("(cat ../secret.txt)", "refused: subshell '(' " + SUPPORTED_ONLY_PIPES),
    ("ls\ncat ../secret.txt", "refused: a newline (run one command line at a time)"),
    ("rm -rf skills", "rm: command not found; supported: cat, echo, find, grep, head, ls, pwd, sort"),
    ("python -c 'print(1)'", "python: command not found; supported:"),
    ("ls | sh", "sh: command not found; supported:"),
    ("grep 'unclosed", "syntax error: No closing quotation"),
    ("ls | | head", "syntax error: empty command in pipeline"),
    ("", "syntax error: empty command"),
    ("cat skills/billing/SKILL.md" + " | head" * 8, "refused: pipeline has 9 stages; the limit is 8"),
    ("ls " + "x" * 2000, "refused: command line is 2,003 characters; the limit is 2,000"),
    ("grep " + "a" * 600 + " INDEX.md", "refused: pattern is 600 characters; the limit is 512"),
    ("grep -E '(a+)+$' long.txt", "grep: stopped: pattern '(a+)+$' took over 0.2 s of matching"),
    ("grep '\\(a\\+\\)\\+$' long.txt", "took over 0.2 s of matching"),
    ("grep -rE '(a|aa)+$' .", "took over 0.2 s of matching"),
    ("grep -E '(' INDEX.md", "grep: invalid pattern '('"),
    ("grep --include=*.md refund .", "grep: unsupported option '--include=*.md'"),
    ("find . -exec cat {} +", "find: unsupported expression '-exec'"),
]


@pytest.mark.parametrize(("command", "expected"), ESCAPES)
def test_escape_attempts_are_refused_or_bounded(sb, local, tree, touched, command, expected):
    start = time.monotonic()
    out = local.run(command)
    assert out == sb.run(command)  # in a worker process or not, the same reply
    assert expected in out
    assert "\n" not in out  # one-line messages
    assert SECRET not in out
    assert time.monotonic() - start < 2
    assert_confined(tree, touched)


def test_a_list_runs_its_pipelines_in_order_in_one_reply(sb, local):
    one = [sb.run("grep -ri refund skills | wc -l"), sb.run("ls skills"), sb.run("grep -ric zzzunseen skills/billing")]
    listed = sb.run("grep -ri refund skills | wc -l; ls skills ;grep -ric zzzunseen skills/billing;")
    assert listed == "\n".join(one) == local.run("grep -ri refund skills | wc -l; ls skills ;grep -ric zzzunseen skills/billing;")
    # Quoted, ';' is a character of a pattern, not a separator.
    assert sb.run("grep -c 'a;b' skills/billing/SKILL.md") == "0"
    # A missing file does not stop the list: the rest runs, and errors follow the output.
    mixed = sb.run("cat no-such-file; ls skills")
    assert mixed == one[1] + "\ncat: no-such-file: No such file or directory"


def test_a_loop_runs_its_body_once_a_word_with_the_variable_expanded(sb, local):
    folders = ["skills/billing", "skills/shipping"]
    terms = ["refund", "fee"]
    one = [sb.run(f"grep -rih '\\<{t}' {d} | wc -l") for d in folders for t in terms]
    loop = ("for d in skills/billing 'skills/shipping'; do for t in refund fee; "
            'do grep -rih "\\<$t" "$d" | wc -l; done; done')
    assert sb.run(loop) == "\n".join(one) == local.run(loop)
    assert len(set(one)) > 1  # the counts differ: each ran with its own words
    # ${NAME} too; a word with a space stays one word; single quotes keep '$d' literal.
    assert sb.run("for d in skills/billing; do ls ${d}; done") == sb.run("ls skills/billing")
    assert sb.run("for p in 'refund policy'; do grep -ric \"$p\" skills/billing; done") == \
        sb.run("grep -ric 'refund policy' skills/billing")
    assert sb.run("for d in skills; do grep -c '$d' INDEX.md; done") == "0"
    # A loop's words are globbed inside the tree (a trailing '/' keeps folders only), one run a match.
    files = ["skills/billing/SKILL.md", "skills/shipping/SKILL.md"]
    assert sb.run("for f in skills/*/SKILL.md; do grep -c Refund $f; done") == "\n".join(
        sb.run(f"grep -c Refund {f}") for f in files)
    assert sb.run('for d in skills/*/; do echo "$d"; done') == "skills/billing/\nskills/shipping/"
    assert sb.run('for d in skills/billing/refunds/*/; do echo "$d"; done') == "skills/billing/refunds/*/"  # no match: as written


def test_grep_suppresses_names_and_names_unsupported_options(sb):
    # -h is supported; an unsupported option is named so the agent can rephrase.
    assert sb.run("grep -rh refund skills") == (
        "Refund policy: refunds within 30 days.\n"
        "See refunds/INDEX.md for the refund process.\n"
        "How to request a refund\n"
        "No refund on shipping fees."
    )
    assert sb.run("grep -rA 2 refund skills") == (
        "grep: unsupported option '-A'; supported: -r -R -i -n -l -c -E -w -v -F -I -h -H -o -e"
    )


def test_broad_commands_never_read_outside(local, tree, touched):
    sb = local
    # Globs, '/', whole-tree walks: all stay inside, skip symlinks, and never show the secret.
    commands = [
        "grep -r TOPSECRET", "grep -r TOPSECRET /", "grep -ril secret .", "find / -name '*'",
        "find . -name x", "ls -R", "ls -R /", "cat *", "cat */*", "cat skills/*/SKILL.md",
        "head -n 100 *", "wc -l * */* */*/*", "grep -c TOPSECRET *",
    ]
    for command in commands:
        assert SECRET not in sb.run(command), command
    assert sb.run("grep -r TOPSECRET") == ""
    assert "link_out" not in sb.run("find / -name '*'")
    assert_confined(tree, touched)


def test_quoted_metacharacters_are_literal(sb):
    assert sb.run("grep 'tier1;tier2' skills/billing/refunds/INDEX.md") == (
        "Escalation path: tier1;tier2")
    assert sb.run('grep "a|b > c && $(d)" INDEX.md') == ""  # searched for literally, no error
    assert sb.run("grep -c '$HOME' INDEX.md") == "0"


def test_huge_output_is_cut_at_a_line_boundary(sb):
    out = sb.run("cat big.txt")
    shown = BIG.encode()[:8192]
    shown = shown[: shown.rindex(b"\n") + 1].decode()
    note = (f"[output truncated: showed {len(shown.encode()):,} of {len(BIG.encode()):,} bytes; "
            "narrow with grep or page with head -n/tail -n]")
    assert out == shown + note
    assert len(out.encode()) <= 8192 + len(note)


def test_a_single_huge_line_is_cut_too(tree):
    out = Sandbox(tree, max_output_bytes=100).run("cat long.txt")
    assert out == "a" * 100 + "\n[output truncated: showed 100 of 5,002 bytes; " \
        "narrow with grep or page with head -n/tail -n]"


def test_catastrophic_regex_is_bounded_without_the_regex_module(local, monkeypatch):
    # Fallback when `regex` is missing: stdlib `re` under an interval timer.
    sb = local
    monkeypatch.setattr(patterns, "_regex", None)
    start = time.monotonic()
    assert "took over 0.2 s of matching" in sb.run("grep -E '(a+)+$' long.txt")
    assert time.monotonic() - start < 2
    assert sb.run("grep -c 'ab$' long.txt") == "1"  # ordinary patterns still work


def test_without_the_regex_module_other_threads_get_fixed_strings_only(local, monkeypatch):
    # SIGALRM only reaches the main thread, so elsewhere regexes are refused, literals allowed.
    sb = local
    monkeypatch.setattr(patterns, "_regex", None)
    results: list[str] = []
    worker = threading.Thread(target=lambda: results.extend(
        [sb.run("grep -E '(a+)+$' long.txt"), sb.run("grep -c 'a.b' -F long.txt")]))
    worker.start()
    worker.join(timeout=5)
    assert results == [
        "grep: regular expressions need the 'regex' package here; use -F for a fixed string",
        "0",
    ]


def test_walks_are_bounded(local, tree, monkeypatch):
    sb = local
    monkeypatch.setattr(limits, "MAX_FILES", 5)
    # A stop keeps what the command printed before it, as a shell shows a killed command's output.
    assert sb.run("grep -r refund") == (
        'entity_index.json:{"refund": [{"path": "skills/billing/SKILL.md", "mentions": 3}]}\n'
        "stopped: visited more than 5 files and directories; narrow the path")
    assert sb.last_status == 2
    # A loop's finished runs keep their output: the caller asks again for the rest only.
    monkeypatch.setattr(limits, "MAX_FILES", 1000)
    entries, count = int(sb.run("find skills | wc -l")), sb.run("grep -r refund skills | wc -l")
    monkeypatch.setattr(limits, "MAX_FILES", 2 * entries + 1)  # two walks of skills/ fit, not three
    counts = sb.run("for t in refund refund refund refund; do grep -r $t skills | wc -l; done").split("\n")
    assert counts == [count, count, f"stopped: visited more than {2 * entries + 1} files and directories; narrow the path"]
    # The stop line fits in the output cap with what comes before it.
    monkeypatch.setattr(limits, "MAX_FILES", 5)
    stop = "stopped: visited more than 5 files and directories; narrow the path"
    printed = sb.run("grep -r refund").rsplit("\n", 1)[0]
    cap = len(printed.encode()) + 10  # what was printed fits, not with the stop line after it
    capped = Sandbox(tree, max_output_bytes=cap, isolated=False).run("grep -r refund")
    assert capped.endswith("\n" + stop) and capped.startswith("entity_index.json:")
    note = f"{TRUNCATED} showed {cap:,} of {len(printed.encode()) + 1:,} bytes; narrow with grep or page with head -n/tail -n]"
    assert len(capped.encode()) <= cap + (len(note) + 1 if TRUNCATED in capped else 0)
    # Refusals are the whole reply, whatever ran before them.
    assert sb.run("ls; cat ../secret.txt") == "refused: path '../secret.txt' is outside the tree"
    monkeypatch.setattr(limits, "MAX_SCAN_BYTES", 1000)
    assert sb.run("cat big.txt") == (
        "cat: stopped: this command would read more than 1,000 bytes; narrow the path")


def test_binary_files_are_skipped_or_refused(sb):
    assert sb.run("cat documents.sqlite") == "cat: refused: 'documents.sqlite' is a binary file"
    assert sb.run("grep -rl refund") == "\n".join([
        "entity_index.json", "skills/billing/SKILL.md", "skills/billing/refunds/INDEX.md",
        "skills/shipping/SKILL.md",
    ])


# -- happy paths ------------------------------------------------------------------------------

def test_ls(sb):
    assert sb.run("ls") == "\n".join([
        "INDEX.md", "big.txt", "documents.sqlite", "entity_index.json", "link_out@", "long.txt",
        "skills/",
    ])
    assert sb.run("ls skills") == "alias@\nbilling/\nshipping/"
    assert sb.run("ls /skills/billing") == "SKILL.md\nrefunds/"
    assert sb.run("ls skills/billing/SKILL.md") == "skills/billing/SKILL.md"
    assert sb.run("ls nope") == "ls: cannot access 'nope': No such file or directory"


def test_ls_recursive_and_long(sb):
    assert sb.run("ls -R skills") == "\n".join([
        "skills:", "alias@", "billing/", "shipping/", "",
        "skills/billing:", "SKILL.md", "refunds/", "",
        "skills/billing/refunds:", "INDEX.md", "",
        "skills/shipping:", "SKILL.md",
    ])
    file_line, dir_line = sb.run("ls -l skills/billing").splitlines()
    assert file_line.startswith("-rw") and file_line.endswith(f" {len(BILLING)} SKILL.md")
    assert dir_line.startswith("d") and dir_line.endswith(" refunds/")


def test_cat_head_tail(sb):
    assert sb.run("cat skills/billing/SKILL.md") == BILLING.rstrip("\n")
    assert sb.run("cat '/skills/billing/SKILL.md'") == BILLING.rstrip("\n")
    assert sb.run("head -n 2 skills/billing/SKILL.md") == "# Billing\nRefund policy: refunds within 30 days."
    assert sb.run("head -1 skills/shipping/SKILL.md") == "# Shipping"
    assert sb.run("tail -n 1 skills/billing/SKILL.md") == "See refunds/INDEX.md for the refund process."
    assert sb.run("tail -n +3 skills/shipping/SKILL.md") == "No refund on shipping fees."
    assert sb.run("head -n 1 skills/*/SKILL.md") == (
        "==> skills/billing/SKILL.md <==\n# Billing\n\n==> skills/shipping/SKILL.md <==\n# Shipping")
    assert sb.run("cat nope.md") == "cat: nope.md: No such file or directory"
    assert sb.run("cat skills") == "cat: skills: Is a directory"
    assert sb.run("head -n x INDEX.md") == "head: invalid number of lines: 'x'"


def test_grep(sb):
    assert sb.run("grep -ril refund skills") == (
        "skills/billing/SKILL.md\nskills/billing/refunds/INDEX.md\nskills/shipping/SKILL.md")
    assert sb.run("grep -c -i refund skills/billing/SKILL.md") == "2"
    assert sb.run("grep -ci refund skills/billing/SKILL.md skills/shipping/SKILL.md") == (
        "skills/billing/SKILL.md:2\nskills/shipping/SKILL.md:1")
    assert sb.run("grep -in refund skills/billing/SKILL.md | head -n 1") == (
        "2:Refund policy: refunds within 30 days.")
    assert sb.run("grep -rn refund skills | head -2") == (
        "skills/billing/SKILL.md:2:Refund policy: refunds within 30 days.\n"
        "skills/billing/SKILL.md:4:See refunds/INDEX.md for the refund process.")
    assert sb.run("grep -rn refund ./skills/shipping") == (
        "./skills/shipping/SKILL.md:3:No refund on shipping fees.")
    assert sb.run('grep -ri "refund policy" skills') == (
        "skills/billing/SKILL.md:Refund policy: refunds within 30 days.")
    assert sb.run("grep -rE 'Invoices|Carriers' skills") == (
        "skills/billing/SKILL.md:Invoices are sent monthly.\n"
        "skills/shipping/SKILL.md:Carriers and delivery times.")
    assert sb.run("grep 'Invoices\\|Carriers' skills/shipping/SKILL.md") == (
        "Carriers and delivery times.")  # GNU basic-regex alternation
    assert sb.run("grep -w refund skills/billing/SKILL.md") == (
        "See refunds/INDEX.md for the refund process.")
    assert sb.run("grep -v refund skills/shipping/SKILL.md") == (
        "# Shipping\nCarriers and delivery times.")
    assert sb.run("grep -F 'refunds/INDEX.md' skills/billing/SKILL.md") == (
        "See refunds/INDEX.md for the refund process.")
    assert sb.run("grep -c b long.txt") == "1"
    assert sb.run("grep refund skills") == "grep: skills: Is a directory"


def test_grep_passes_over_blocks_without_a_patterns_text_and_finds_every_line_it_would_match(tmp_path):
    """Blocks of lines holding none of a pattern's required text are skipped without a regex
    search; what grep prints is what a search of every line prints, across block edges and
    for the letters a case-insensitive match pairs with ASCII ones (Kelvin sign, long s, dotted
    and dotless i)."""
    import regex

    specials = {255: "the \u212aelvin scale", 256: "a \u017fet of \u017ftates", 257: "T\u0130TLE page",
                400: "t\u0131tle case", 511: "foo-bar baz", 512: "FOO-BAR and Sets", 700: "kelvin-set"}
    lines = [specials.get(i, f"filler line {i} of text") for i in range(1, 801)]
    root = tmp_path / "tree"
    root.mkdir()
    (root / "folds.txt").write_text("\n".join(lines) + "\n")
    sandbox = Sandbox(root, max_output_bytes=1 << 20, regex_timeout_s=1.0, isolated=False)
    for flags, pattern in [("-in", "\\<kelvin"), ("-in", "\\<set"), ("-in", "\\<title"), ("-n", "foo-bar"),
                           ("-in", "\\<foo-bar"), ("-n", "Sets"), ("-inF", "FOO-bar"), ("-in", "line 4"),
                           ("-in", "nowhere")]:
        source = patterns.gnu_to_python(pattern, False) if "F" not in flags else regex.escape(pattern)
        rx = regex.compile(source, regex.IGNORECASE if "i" in flags else 0)
        expected = [f"{n}:{line}" for n, line in enumerate(lines, 1) if rx.search(line)]
        assert sandbox.run(f"grep {flags} '{pattern}' folds.txt") == "\n".join(expected), (flags, pattern)
    # The folded letters are found, in blocks that hold no ASCII spelling of the word.
    assert sandbox.run("grep -in '\\<kelvin' folds.txt") == "255:the \u212aelvin scale\n700:kelvin-set"
    assert sandbox.run("grep -in '\\<set' folds.txt").startswith("256:a \u017fet")
    assert sandbox.run("grep -in '\\<title' folds.txt") == "257:T\u0130TLE page"
    assert patterns.required_texts([patterns.gnu_to_python("\\<Foo-Bar\\>", False)], True) == ["foo-bar"]
    assert patterns.required_texts(["foo|bar"], False) is None  # no text every match holds
    assert patterns.required_texts(["caf\u00e9"], True) is None  # folds known for ASCII only


def test_grep_only_matching(sb):
    # Each match on its own line, in line order, with the line number and file name if asked.
    assert sb.run("grep -o -i 'refunds*' skills/billing/SKILL.md") == "Refund\nrefunds\nrefunds\nrefund"
    assert sb.run("grep -n -o -E 'refunds?/[A-Z]+' skills/billing/SKILL.md") == "4:refunds/INDEX"
    assert sb.run("grep -r -o -e monthly -e Invoices skills/billing") == (
        "skills/billing/SKILL.md:Invoices\nskills/billing/SKILL.md:monthly")  # in line order, not -e order
    assert sb.run("grep -o -i refund skills/billing/SKILL.md | sort | uniq -c") == "      1 Refund\n      3 refund"
    assert sb.run("grep -o -E '\"[a-z]+\": \\[[^]]*' entity_index.json") == (
        '"refund": [{"path": "skills/billing/SKILL.md", "mentions": 3}')
    assert sb.run("grep -o -E 'x*' skills/shipping/SKILL.md") == ""  # empty matches print nothing


def test_find(sb):
    assert sb.run("find . -name '*.md'") == "\n".join([
        "./INDEX.md", "./skills/billing/SKILL.md", "./skills/billing/refunds/INDEX.md",
        "./skills/shipping/SKILL.md",
    ])
    assert sb.run("find skills -name INDEX.md -type f") == "skills/billing/refunds/INDEX.md"
    assert sb.run("find skills -maxdepth 1 -type d") == "skills\nskills/billing\nskills/shipping"
    assert sb.run("find -iname 'skill.MD'") == "./skills/billing/SKILL.md\n./skills/shipping/SKILL.md"


def test_wc_sort_uniq_pwd(sb):
    assert sb.run("wc -l skills/billing/SKILL.md") == "4 skills/billing/SKILL.md"
    assert sb.run("wc -l skills/*/SKILL.md") == (
        "4 skills/billing/SKILL.md\n3 skills/shipping/SKILL.md\n7 total")
    assert sb.run("cat skills/*/SKILL.md | grep -i refund | wc -l") == "3"
    assert sb.run("grep -rl refund skills | sort -r") == (
        "skills/shipping/SKILL.md\nskills/billing/refunds/INDEX.md\nskills/billing/SKILL.md")
    assert sb.run("grep -rc refund skills | sort -t -n") == (
        "sort: unsupported option '-t'; supported: -r -n -u")
    assert sb.run("cat INDEX.md INDEX.md | sort | uniq -c") == (
        "      2 # Corpus\n      2 - skills/billing\n      2 - skills/shipping")
    assert sb.run("pwd") == "/"


def test_stats_count_commands_and_bytes_read(sb):
    sb.run("cat skills/billing/SKILL.md")
    sb.run("ls; cat x")
    assert sb.stats.commands == 2
    assert sb.stats.bytes_read == len(BILLING.encode())
