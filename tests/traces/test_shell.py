"""Read-only shell command recognition (reference pitfall 7)."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from retrieval_lib.traces.shell import (
    ShellRead,
    analyze_shell_command,
    looks_like_file,
    parse_shell_command,
)


def one(command: str) -> ShellRead:
    reads = parse_shell_command(command)
    assert len(reads) == 1, reads
    return reads[0]


# --------------------------------------------------------------------------- file reads


@pytest.mark.parametrize(
    ("command", "paths", "line_range"),
    [
        ("cat django/contrib/admin/options.py", ["django/contrib/admin/options.py"], None),
        ("cat -n a.py b.py", ["a.py", "b.py"], None),
        ("head -n 30 src/app.py", ["src/app.py"], (1, 30)),
        ("head -n30 src/app.py", ["src/app.py"], (1, 30)),
        ("head -30 src/app.py", ["src/app.py"], (1, 30)),
        ("head --lines=7 src/app.py", ["src/app.py"], (1, 7)),
        ("head src/app.py", ["src/app.py"], (1, 10)),  # head's default is 10 lines
        ("head -c 100 src/app.py", ["src/app.py"], None),  # bytes, not lines
        ("tail -n 20 x.log", ["x.log"], None),  # depends on the file's length
        ("sed -n '10,40p' app.py", ["app.py"], (10, 40)),
        ('sed -n "5p" app.py', ["app.py"], (5, 5)),
        ("sed -n 1,50p\\;50q app.py", ["app.py"], (1, 50)),
        ("sed -n '/def foo/,/return/p' app.py", ["app.py"], None),
        ("sed -n '100,$p' app.py", ["app.py"], None),
        # an end before the start: sed prints the start line only
        ("sed -n '40,10p' f", ["f"], (40, 40)),
        ("sed 's/a/b/' app.py", ["app.py"], None),  # prints to stdout: still a read
        ("nl -ba django/db/models/query.py", ["django/db/models/query.py"], None),
        ("wc -l setup.py", ["setup.py"], None),
        ("less README.md", ["README.md"], None),
        ("awk 'NR>=10 && NR<=20' a/b.c", ["a/b.c"], None),
        ("awk -F: '{print $1}' OFS=, data.csv", ["data.csv"], None),
        ("git show HEAD~1:src/a.py", ["src/a.py"], None),
        ("head -20 Makefile", ["Makefile"], (1, 20)),  # no extension, still a file
    ],
)
def test_file_reads(command: str, paths: list[str], line_range: tuple[int, int] | None) -> None:
    read = one(command)
    assert read.category == "file_read"
    assert read.paths == paths
    assert read.line_range == line_range


def test_piped_line_windows() -> None:
    # the agent sees only the lines the next stage keeps
    assert one("nl -ba django/db/models/query.py | sed -n '100,200p'").line_range == (100, 200)
    assert one("cat -n a.py | head -40").line_range == (1, 40)
    assert one("cat a.py | head").line_range == (1, 10)
    # two files are one stream: no per-file window
    assert one("cat a.py b.py | head -5").line_range is None
    # a filter in between changes which lines remain
    assert one("cat a.py | grep x | head -3").line_range is None
    assert one("cat a.py | sed 's/x/y/'").line_range is None


def test_sed_numbers_several_files_as_one_stream() -> None:
    assert one("sed -n '1,5p' a.py b.py").line_range is None
    assert one("sed -s -n '1,5p' a.py b.py").line_range == (1, 5)


def test_cd_sets_the_directory_of_relative_paths() -> None:
    read = one("cd /workspace/src && sed -n '10,40p' app.py")
    assert (read.program, read.paths, read.cwd) == (
        "sed",
        ["/workspace/src/app.py"],
        "/workspace/src",
    )
    # relative cd from a known directory, and absolute operands stay as they are
    reads = parse_shell_command("cd /workspace; cd pkg && cat a.py /etc/hosts ../b.py")
    assert reads[0].paths == ["/workspace/pkg/a.py", "/etc/hosts", "/workspace/b.py"]
    # after "cd ~" or "cd $X" the directory is unknown: relative paths are dropped
    assert one("cd ~ && cat x.py /abs/y.py").paths == ["/abs/y.py"]
    assert one('cd "$REPO" && cat x.py').paths == []


def test_stdin_readers_are_not_reads() -> None:
    for command in ("cat", "head -n 5", "sed -n 1,5p", "awk '{print}'", "wc -l"):
        assert parse_shell_command(command) == [], command


def test_globs_and_variables_are_not_paths_but_still_reads() -> None:
    read = one("wc -l src/*.py")
    assert (read.category, read.paths) == ("file_read", [])
    assert one("cat $FILE ~/notes.txt real.py").paths == ["real.py"]
    # a quoted glob character is literal
    assert one("cat 'weird[1].py'").paths == ["weird[1].py"]


# --------------------------------------------------------------------------- searches


def test_grep_pattern_operands_and_options() -> None:
    read = one('grep -rn "BuildHTTPRoutes" /workspace/istio/pilot/ --include="*.go"')
    assert read.category == "code_search"
    assert read.pattern == "BuildHTTPRoutes"
    assert read.paths == ["/workspace/istio/pilot/"]
    assert read.output_format == "grep"

    read = one("grep -e foo -A 3 -m2 a.py b.py")
    assert (read.pattern, read.paths, read.output_format) == ("foo", ["a.py", "b.py"], "grep")
    # one file: grep prints no file names
    assert one("grep -n foo a.py").output_format is None
    assert one("grep -h foo a.py b.py").output_format is None

    read = one("egrep -l 'x|y' src/a.py src/b.py")
    assert (read.program, read.pattern, read.output_format) == ("egrep", "x|y", "paths")

    read = one("grep ';' f.c")  # a quoted ";" is an argument, not a separator
    assert (read.pattern, read.paths) == (";", ["f.c"])

    read = one("cd /workspace; grep -c foo a.py b.py")
    assert (read.paths, read.output_format) == (["/workspace/a.py", "/workspace/b.py"], "count")


def test_ripgrep() -> None:
    read = one("rg -n 'def foo' src tests -g '*.py'")
    assert (read.program, read.pattern, read.paths) == ("rg", "def foo", ["src", "tests"])
    assert read.output_format == "grep"
    listing = one("rg --files src")
    assert (listing.category, listing.paths, listing.output_format) == (
        "file_search",
        ["src"],
        "paths",
    )
    # rg -r is --replace (takes a value), not "recursive"
    assert one("rg -r X foo a.py").paths == ["a.py"]


def test_find() -> None:
    read = one('find /workspace -type f -name "*.py" | head -20')
    assert (read.category, read.program, read.paths, read.pattern) == (
        "file_search",
        "find",
        ["/workspace"],
        "*.py",
    )
    assert read.output_format == "paths"
    assert one("find -name x.py").paths == ["."]


def test_find_exec_grep_is_a_code_search() -> None:
    command = (
        'find /workspace/docs -type f \\( -name "*.txt" -o -name "*.rst" \\) '
        '-exec grep -l "get_list_filter" {} \\;'
    )
    read = one(command)
    assert (read.category, read.paths, read.pattern, read.output_format) == (
        "code_search",
        ["/workspace/docs"],
        "get_list_filter",
        "paths",
    )
    # grep without -l prints matched lines, not a file list
    assert one("find . -name '*.py' -exec grep foo {} +").output_format is None


def test_ls_tree_git_grep() -> None:
    assert one("ls -la /workspace/django/") == ShellRead(
        "file_search", "ls", ["/workspace/django/"]
    )
    assert one("ls").paths == ["."]
    assert one("git grep -n needle -- src").pattern == "needle"
    assert one("git ls-files pkg").output_format == "paths"


# --------------------------------------------------------------------------- structure


def test_compound_commands_keep_order() -> None:
    reads = parse_shell_command("head -n 30 foo/bar.py && tail -5 x.log || cat c.py; ls d")
    assert [(r.program, r.paths) for r in reads] == [
        ("head", ["foo/bar.py"]),
        ("tail", ["x.log"]),
        ("cat", ["c.py"]),
        ("ls", ["d"]),
    ]


def test_only_the_first_pipeline_stage_reads() -> None:
    reads = parse_shell_command("cat x.py | grep foo | head -3")
    assert [(r.program, r.paths) for r in reads] == [("cat", ["x.py"])]
    # "cat -" reads the pipe (standard input), not a file named "-"
    reads = parse_shell_command("grep -n foo f | cat -")
    assert [(r.category, r.program, r.paths) for r in reads] == [("code_search", "grep", ["f"])]
    # xargs grep searches the piped names: a search, with no invented paths
    reads = parse_shell_command("find . -name '*.py' | xargs grep -l foo")
    assert [(r.category, r.program, r.paths) for r in reads] == [
        ("file_search", "find", ["."]),
        ("code_search", "grep", []),
    ]
    # more than one output pipeline: the output can no longer be read back as a list
    assert all(r.output_format is None for r in reads)


@pytest.mark.parametrize(
    "command",
    [
        "sed -i 's/a/b/' x.py",
        "sed --in-place -n 1p x.py",
        "cat a.py b.py > out.txt",
        "grep foo a.py >> hits.txt",
        "tee out.py",
        "rm -rf build",
        "mv a.py b.py",
        "git apply fix.patch",
        "python script.py",
        "python -c 'print(open(\"x.py\").read())'",
        "find . -name '*.pyc' -delete",
        "find . -name '*.py' -exec sed -i s/a/b/ {} +",
        "sed -n 'w copy.py' x.py",
        "awk '{print > \"out.txt\"}' x.py",
    ],
)
def test_writers_are_never_reads(command: str) -> None:
    assert parse_shell_command(command) == []


def test_redirections_to_null_and_fd_duplication_are_ignored() -> None:
    read = one("grep -rl foo . 2>/dev/null")
    assert (read.paths, read.output_format) == (["."], "paths")
    assert one("cat a.py 2>&1").paths == ["a.py"]
    assert one("cat a.py &>/dev/null").paths == ["a.py"]
    # a pipeline that ends in a write is still a read of its first stage
    assert one("cat a.py | tee b.py").paths == ["a.py"]


def test_wrappers_and_groups() -> None:
    assert one("FOO=1 timeout 10 cat a.py").paths == ["a.py"]
    assert one("sudo -u me cat a.py").paths == ["a.py"]
    assert one("{ cat a.py; }").paths == ["a.py"]
    assert one("if [ -f a.py ]; then cat a.py; fi").paths == ["a.py"]
    assert one("echo hi && cat x.py").output_format is None


@pytest.mark.parametrize(
    "command",
    [
        "cat 'unbalanced",
        'grep "open',
        "cat <<EOF > x.py\nhello\nEOF",
        "python - <<'PY'\nprint(1)\nPY",
        "cat <<< 'here string'",
        "echo $(cat a.py",
        "",
        "   ",
        "`",
    ],
)
def test_unparseable_input_gives_nothing(command: str) -> None:
    assert parse_shell_command(command) == []


def test_non_string_input() -> None:
    assert parse_shell_command(None) == []  # type: ignore[arg-type]


_FRAGMENTS = list("ab./ -|&;<>'\"\\$()`{}*\n#=0") + [
    "cat ",
    "grep ",
    "sed -n ",
    "find ",
    "cd ",
    "<<",
    "-exec ",
    " \\; ",
    "2>",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=30).map("".join))
@example("grep -n foo f | cat -").via("a pipe read as a file named '-'")
@example("sed -n '40,10p' f").via("a backwards line range")
def test_never_raises(command: str) -> None:
    # no exception, and what comes back obeys the documented contract on any input
    _check_reads(command, parse_shell_command(command))


_CATEGORIES = {"file_read", "code_search", "file_search"}


def _named_in(command: str, path: str) -> bool:
    """Every part of ``path`` is written in the command: the parser invents no path.

    A part may be spelt with quotes or backslashes (``a''a`` and ``a\\a`` are ``aa``): the
    words as ``shlex`` (POSIX rules) splits them count too, and the command without its
    backslashes (when ``shlex`` refuses it, as it does a trailing backslash).
    """
    try:
        words = shlex.split(command)
    except ValueError:  # an unclosed quote or a trailing backslash
        words = []
    text = "\0".join([command, command.replace("\\", ""), *words])
    return all(part in text for part in path.split("/") if part not in ("", ".", ".."))


def _check_reads(command: str, reads: list[ShellRead]) -> None:
    for read in reads:
        assert read.category in _CATEGORIES, read
        assert read.program and read.program in command, read
        assert all(_named_in(command, p) for p in read.paths), read
        assert "-" not in read.paths, read  # standard input is not a file
        if read.line_range is not None:
            first, last = read.line_range
            assert 1 <= first <= last, read
        if read.pattern is not None:
            assert read.category == "code_search", read


def test_looks_like_file() -> None:
    assert looks_like_file("django/contrib/admin/options.py")
    assert looks_like_file("/workspace/docs/releases/1.5.txt")
    assert not looks_like_file("tests/")
    assert not looks_like_file("src")
    assert not looks_like_file("src/*.py")
    assert not looks_like_file(".")
    assert not looks_like_file(".github")


# --------------------------------------------------------------------------- files created


@pytest.mark.parametrize(
    ("command", "created"),
    [
        ("echo x > notes.md", ["notes.md"]),
        ("printf '%s\\n' a b > out.txt", ["out.txt"]),
        ("echo more >> notes.md", ["notes.md"]),
        ("echo x >| f.txt", ["f.txt"]),
        ("make &> build.log", ["build.log"]),
        ("pytest 2> err.log", ["err.log"]),
        ("cat a.py | tee copy.py", ["copy.py"]),
        ("cat a.py | tee -a log.txt other.txt", ["log.txt", "other.txt"]),
        ("touch a.md b.md", ["a.md", "b.md"]),
        ("touch -d 2020-01-01 stamp.txt", ["stamp.txt"]),
        ("cp a.py b.py", ["b.py"]),
        ("mv old.py new.py", ["new.py"]),
        ("cp a.py src/", ["src/a.py"]),  # a destination folder keeps the source's name
        ("cp lib/a.py .", ["a.py"]),
        ("cp a.py b.py dest", ["dest/a.py", "dest/b.py"]),  # several sources: a folder
        ("cp lib/a.py backup", ["backup/a.py"]),  # no extension for a file source: a folder
        ("cp -T lib/a.py backup", ["backup"]),  # -T: the destination is the file
        ("cp -t dest a.py b.py", ["dest/a.py", "dest/b.py"]),
        ("cp Makefile Makefile.orig", ["Makefile.orig"]),
        ("cat > f.py <<EOF\nimport os\nEOF", ["f.py"]),
        ("cat <<-'EOF' > g.py\n\tx = 1\n\tEOF", ["g.py"]),
        ("cd src && echo x > n.py", ["src/n.py"]),
        ("echo x > ./notes.md; echo y >> notes.md", ["notes.md"]),  # one file, once
        ('echo x > "my notes.md"', ["my notes.md"]),
        ("ls > /tmp/listing.txt", ["/tmp/listing.txt"]),  # kept here; the builder drops it
    ],
)
def test_files_created_through_the_shell(command: str, created: list[str]) -> None:
    assert analyze_shell_command(command).created == created


@pytest.mark.parametrize(
    "command",
    [
        "python run.py > /dev/null 2>&1",
        "make 2>&1 | tail",
        "cat a.py &>/dev/null",
        "grep -rn x . 2>/dev/null",
        "touch -c exists.md",  # -c: never creates
        "echo x > $OUT",
        "echo x > ~/notes.md",
        "echo x > *.md",
        "cp *.py dest/",  # glob sources: names unknown
        "cp -r src out",  # a tree copy: files unknown
        "mv build dist",  # may be a folder
        "cd $HOME && echo x > n.md",  # unknown directory
        "echo $(touch made.md)",  # substitutions are not looked into for writes
        "cp a.py",
        "sed -i 's/a/b/' a.py",  # an in-place edit of an existing file, not a creation
        "git diff",
        "",
    ],
)
def test_commands_that_create_nothing(command: str) -> None:
    assert analyze_shell_command(command).created == []


def test_a_file_created_earlier_in_the_line_is_not_read() -> None:
    result = analyze_shell_command("echo x > notes.md && cat notes.md other.py")
    assert result.created == ["notes.md"]
    assert [(r.category, r.paths) for r in result.reads] == [("file_read", ["other.py"])]
    assert analyze_shell_command("cp a.py b.py && cat b.py").reads == []
    # read first, then overwritten: the read stays
    result = analyze_shell_command("cat notes.md; echo y > notes.md")
    assert [r.paths for r in result.reads] == [["notes.md"]]
    assert result.created == ["notes.md"]


def test_here_document_body_is_not_a_command() -> None:
    result = analyze_shell_command("cat > plan.md <<'EOF'\ncat src/util.py\nEOF\ncat a.py")
    assert result.created == ["plan.md"]
    assert [r.paths for r in result.reads] == [["a.py"]]
    # an unterminated body runs to the end, as bash reads it
    assert analyze_shell_command("cat > p.md <<EOF\ncat b.py").reads == []
    # the read-only view is unchanged for these commands
    assert parse_shell_command("cat > plan.md <<EOF\ncat src/util.py\nEOF") == []


def test_a_read_that_pipes_into_tee_still_reads() -> None:
    result = analyze_shell_command("cat a.py | tee b.py")
    assert [(r.category, r.paths) for r in result.reads] == [("file_read", ["a.py"])]
    assert result.created == ["b.py"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([*_FRAGMENTS, "tee ", "cp ", "mv ", "touch ", ">> "]), max_size=30
    ).map("".join)
)
@example("cat a\\a\\").via("an escaped character next to a trailing backslash")
def test_analyze_never_raises(command: str) -> None:
    result = analyze_shell_command(command)
    _check_reads(command, result.reads)
    assert all(_named_in(command, p) for p in result.created), result
    assert len(set(result.created)) == len(result.created)  # each created file once
    # per read, how many creations precede it: one count per read, never decreasing
    assert len(result.created_before) == len(result.reads)
    assert list(result.created_before) == sorted(result.created_before)
    assert all(0 <= n <= len(result.created) for n in result.created_before)


def test_a_pipeline_written_into_a_file_prints_nothing() -> None:
    # the only printing pipeline is find's, so its output is a file list
    assert one("echo x > f.md; find . -name '*.py'").output_format == "paths"
    assert one("touch f.md && find src").output_format == "paths"
    # two printing pipelines: no output format (unchanged)
    assert one("echo hi; find src").output_format is None


def test_created_before_counts_the_creations_preceding_each_read() -> None:
    result = analyze_shell_command("cat a.py; echo x > b.md; cat c.py; touch d.md e.md; cat f.py")
    assert [r.paths for r in result.reads] == [["a.py"], ["c.py"], ["f.py"]]
    assert result.created == ["b.md", "d.md", "e.md"]
    assert result.created_before == [0, 1, 3]
    # a substitution's read runs before the redirection of its command
    result = analyze_shell_command("echo $(cat a.py) > b.md")
    assert (result.created, result.created_before) == (["b.md"], [0])
