"""Every documented shell command runs, in the environment its README installs.

The commands are the lines of the ``bash``/``sh`` fenced blocks of ``README.md`` and
``examples/kb/README.md`` (continuation lines joined), taken in order. They run in one
fresh copy of the project (``git ls-files``, with ``../shared`` beside it as a symlink),
from the project folder, as a user types them: the project's ``.venv/bin`` is first on
``PATH`` only from the README's ``. .venv/bin/activate`` line on (before it, a bare
``retrieval-lib`` is "command not found", as for a user who skipped that line). The
convention, stated in README.md ("Development"):

- a command must exit 0, or the code its comment states (``# refuses: exit 1``), and never
  print a traceback;
- the paths after ``->`` in its comment must be written by it (exist afterwards with a
  modification time not before the command started); globs and ``{a,b}`` are allowed, a
  trailing ``/`` is a folder with a file written by the command;
- a line with a ``<placeholder>`` or an ``[--optional]`` part is a synopsis: not run;
- ``python3 -m venv .venv`` followed by ``.venv/bin/pip install -e '.[X]'`` gets a fresh
  virtual environment with exactly the extras X, built once per session (pip's wheel
  cache is reused) and linked as ``.venv``; ``.venv/bin/pip install -e '.[Y]'`` alone
  adds Y to the extras of the current one (a fresh environment with both);
- ``jupyter lab ...`` is started (no browser, a free port on 127.0.0.1, temporary runtime
  and config folders), checked to serve (``GET /api`` and ``/lab``: 200, the notebook
  folder listed) and stopped;
- the test command (``python -m pytest``) is what ``.ci/run`` runs, this test included: it
  is compared with ``.ci/run`` (same extras, same pytest arguments), not run again;
- a command that uses ``../shared`` is skipped when the corpus is absent.

Any other command (a new ``retrieval-lib`` sub-command, say) simply runs and must exit 0.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from glob import glob
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
READMES = ("README.md", "examples/kb/README.md")
SHELL_FENCES = frozenset({"bash", "sh", "shell"})
COMMAND_TIMEOUT = 900  # seconds, per command (a venv build included)
SERVER_TIMEOUT = 120  # seconds for jupyter to answer
SERVERS = frozenset({"lab", "notebook", "server"})

_FENCE = re.compile(r"^(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")
_PLACEHOLDER = re.compile(r"<[A-Za-z_][\w.-]*>|\[-")
_EXIT = re.compile(r"\bexit (\d+)\b")
_BRACES = re.compile(r"\{([^{}]*)\}")
_ACTIVATE = ({".", "source"}, ".venv/bin/activate")


# -- extraction ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """One documented command: where it is, its text (comment removed) and its comment."""

    source: str
    text: str
    comment: str = ""

    @property
    def synopsis(self) -> bool:
        return bool(_PLACEHOLDER.search(self.text))

    @property
    def expected_exit(self) -> int:
        match = _EXIT.search(self.comment)
        return int(match.group(1)) if match else 0

    @property
    def promises(self) -> list[str]:
        if "->" not in self.comment:
            return []
        words = self.comment.split("->", 1)[1].split()
        return [path for word in words for path in expand_braces(word.rstrip(",;"))]


def expand_braces(word: str) -> list[str]:
    """``a.{x,y}`` -> ``['a.x', 'a.y']`` (nested and repeated groups too).

    >>> expand_braces("r/{a,b}/n.{ipynb,html}")
    ['r/a/n.ipynb', 'r/a/n.html', 'r/b/n.ipynb', 'r/b/n.html']
    """
    match = _BRACES.search(word)
    if match is None:
        return [word]
    head, tail = word[: match.start()], word[match.end() :]
    return [out for part in match.group(1).split(",") for out in expand_braces(head + part + tail)]


def split_comment(line: str) -> tuple[str, str]:
    """Split a shell line at its first ``#`` comment outside quotes.

    >>> split_comment("echo '#no' x  # -> out.txt")
    ("echo '#no' x", '-> out.txt')
    """
    quote = ""
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def extract_commands(markdown: str, name: str) -> list[Command]:
    """The commands of the ``bash``/``sh`` fenced blocks of ``markdown``, in order."""
    commands: list[Command] = []
    fence = ""
    shell = False
    pending: list[str] = []
    start = 0
    for number, line in enumerate(markdown.splitlines(), start=1):
        if not fence:
            match = _FENCE.match(line)
            if match:
                fence, shell = match.group("fence"), match.group("lang").lower() in SHELL_FENCES
            continue
        if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
            fence = ""
            continue
        if not shell or (not pending and (not line.strip() or line.lstrip().startswith("#"))):
            continue
        if not pending:
            start = number
        text, comment = split_comment(line)
        if text.endswith("\\") and not comment:
            pending.append(text[:-1].strip())
            continue
        pending.append(text.strip())
        commands.append(Command(f"{name}:{start}", " ".join(pending), comment))
        pending = []
    return commands


def documented_commands() -> list[Command]:
    return [
        command
        for name in READMES
        for command in extract_commands((REPO / name).read_text(encoding="utf-8"), name)
    ]


# -- running -------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What running one command gave."""

    returncode: int | None = None
    output: str = ""
    before: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    skipped: str = ""
    ci_check: bool = False
    http: dict[str, int] = field(default_factory=dict)
    listed: list[str] = field(default_factory=list)
    stopped: bool = False


def _venv_create(argv: list[str]) -> bool:
    return (
        len(argv) == 4 and argv[0] in ("python", "python3") and argv[1:] == ["-m", "venv", ".venv"]
    )


def _editable_extras(argv: list[str]) -> frozenset[str] | None:
    """Extras of ``.venv/bin/pip install -e '.[a,b]'`` (also ``-q``), else None."""
    if argv[:1] == [".venv/bin/python"] and argv[1:3] == ["-m", "pip"]:
        argv = [".venv/bin/pip", *argv[3:]]
    if argv[:2] != [".venv/bin/pip", "install"]:
        return None
    rest = [a for a in argv[2:] if a not in ("-q", "--quiet")]
    if len(rest) != 2 or rest[0] not in ("-e", "--editable"):
        return None
    match = re.fullmatch(r"\.(?:\[([\w,-]*)\])?", rest[1])
    if match is None:
        return None
    return frozenset(e.strip() for e in (match.group(1) or "").split(",") if e.strip())


def _is_activation(argv: list[str]) -> bool:
    """``. .venv/bin/activate`` or ``source .venv/bin/activate``."""
    return len(argv) == 2 and argv[0] in _ACTIVATE[0] and argv[1] == _ACTIVATE[1]


def _is_test_command(argv: list[str]) -> bool:
    return "pytest" in argv[:3] or Path(argv[0]).name == "pytest" if argv else False


def _is_server(argv: list[str]) -> bool:
    return len(argv) >= 2 and Path(argv[0]).name == "jupyter" and argv[1] in SERVERS


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str, token: str = "") -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"token {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), b""


class ReadmeSession:
    """One project copy in which the documented commands run in order (each once)."""

    def __init__(self, root: Path, commands: list[Command]) -> None:
        self.root = root
        self.project = root / "project"
        self.commands = commands
        self.outcomes: list[Outcome] = []
        self.venvs: dict[frozenset[str] | None, Path] = {}
        self.extras: frozenset[str] | None = None  # the extras of the current .venv
        self.activated = False  # after the README's `. .venv/bin/activate`
        self.jupyter = root / "jupyter"
        self._copy_project()

    def _copy_project(self) -> None:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
        ).stdout.decode()
        for name in filter(None, listed.split("\0")):
            source = REPO / name
            if not source.exists() and not source.is_symlink():
                continue  # deleted in the working tree, not committed yet
            target = self.project / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target, follow_symlinks=False)
        if SHARED.is_dir():
            (self.root / "shared").symlink_to(SHARED.resolve(), target_is_directory=True)
        for sub in ("runtime", "config", "data"):
            (self.jupyter / sub).mkdir(parents=True)

    def env(self) -> dict[str, str]:
        drop = {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "CONDA_PREFIX"}
        env = {k: v for k, v in os.environ.items() if k not in drop}
        venv = self.project / ".venv"
        if self.activated:  # what `. .venv/bin/activate` does for the shell's commands
            env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
            env["VIRTUAL_ENV"] = str(venv)
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        env["JUPYTER_RUNTIME_DIR"] = str(self.jupyter / "runtime")
        env["JUPYTER_CONFIG_DIR"] = str(self.jupyter / "config")
        env["JUPYTER_DATA_DIR"] = str(self.jupyter / "data")
        return env

    def outcome(self, index: int) -> Outcome:
        while len(self.outcomes) <= index:
            command = self.commands[len(self.outcomes)]
            outcome = Outcome(before={p: _state(self.project, p) for p in command.promises})
            try:
                self._run(command, outcome)
            except subprocess.TimeoutExpired as exc:
                outcome.returncode, outcome.output = -1, f"timed out after {exc.timeout} s"
            self.outcomes.append(outcome)
        return self.outcomes[index]

    # -- one command

    def _run(self, command: Command, outcome: Outcome) -> None:
        if command.synopsis:
            outcome.skipped = "a synopsis (<placeholder> or [--optional] part), not a command"
            return
        if "../shared" in command.text and not SHARED.is_dir():
            outcome.skipped = f"the real corpus {SHARED} is absent"
            return
        segments = [s.strip() for s in command.text.split(" && ")]
        argvs = [shlex.split(s) for s in segments]
        if any(_is_test_command(argv) for argv in argvs):
            outcome.ci_check = True
            return
        if argvs and _is_activation(argvs[0]):
            # The session's later commands run in the activated environment (the state a
            # user's shell keeps); the script itself must exist and run.
            done = subprocess.run(
                ["bash", "-c", f"{command.text.split(' && ')[0]} && command -v python"],
                cwd=self.project,
                env=self.env(),
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT,
            )
            outcome.returncode, outcome.output = done.returncode, done.stdout + done.stderr
            if done.returncode != 0:
                return
            self.activated = True
            argvs, segments = argvs[1:], segments[1:]
            if not segments:
                return
        fresh = False
        while argvs and (_venv_create(argvs[0]) or _editable_extras(argvs[0]) is not None):
            argv = argvs.pop(0)
            segments.pop(0)
            if _venv_create(argv):
                fresh, self.extras = True, None
                continue
            extras = _editable_extras(argv) or frozenset()
            if not fresh and self.extras is not None:
                extras |= self.extras
            if not self._use_venv(extras, outcome):
                return
            fresh = False
        if fresh and not self._use_venv(None, outcome):  # `python3 -m venv .venv` alone
            return
        if argvs and _is_server(argvs[-1]):
            if len(argvs) > 1 and not self._shell(" && ".join(segments[:-1]), outcome):
                return
            self._serve(argvs[-1], outcome)
            return
        if segments:
            self._shell(" && ".join(segments), outcome)
        else:
            outcome.returncode = 0

    def _shell(self, text: str, outcome: Outcome) -> bool:
        done = subprocess.run(
            ["bash", "-c", text],
            cwd=self.project,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
        )
        outcome.returncode = done.returncode
        outcome.output += done.stdout + done.stderr
        return done.returncode == 0

    def _use_venv(self, extras: frozenset[str] | None, outcome: Outcome) -> bool:
        """Link ``.venv`` to the session's environment with exactly ``extras`` (built once)."""
        if extras not in self.venvs:
            label = "none" if extras is None else "-".join(sorted(extras)) or "base"
            venv = self.root / "venvs" / label
            steps = [[sys.executable, "-m", "venv", str(venv)]]
            if extras is not None:
                spec = (
                    f"{self.project}[{','.join(sorted(extras))}]" if extras else str(self.project)
                )
                steps.append(
                    [
                        str(venv / "bin" / "python"),
                        "-m",
                        "pip",
                        "install",
                        "-q",
                        "--no-compile",
                        "-e",
                        spec,
                    ]
                )
            for step in steps:
                done = subprocess.run(
                    step, env=self.env(), capture_output=True, text=True, timeout=COMMAND_TIMEOUT
                )
                if done.returncode != 0:
                    outcome.returncode = done.returncode
                    outcome.output += f"$ {shlex.join(step)}\n{done.stdout}{done.stderr}"
                    return False
            self.venvs[extras] = venv
        link = self.project / ".venv"
        if link.is_symlink():
            link.unlink()
        link.symlink_to(self.venvs[extras], target_is_directory=True)
        self.extras = extras
        return True

    def _serve(self, argv: list[str], outcome: Outcome) -> None:
        port, token = _free_port(), secrets.token_hex(16)
        base = f"http://127.0.0.1:{port}"
        log = self.jupyter / f"server-{port}.log"
        args = [
            *argv,
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
        ]
        if os.geteuid() == 0:  # containers and CI run as root; jupyter refuses without this
            args.append("--allow-root")
        with log.open("wb") as sink:
            server = subprocess.Popen(
                args, cwd=self.project, env=self.env(), stdout=sink, stderr=subprocess.STDOUT
            )
        try:
            deadline = time.monotonic() + SERVER_TIMEOUT
            while time.monotonic() < deadline and server.poll() is None:
                try:
                    status, _ = _get(f"{base}/api")
                except OSError:
                    time.sleep(0.25)
                    continue
                outcome.http["/api"] = status
                outcome.http["/lab"] = _get(f"{base}/lab", token)[0]
                status, body = _get(f"{base}/api/contents?content=1", token)
                outcome.http["/api/contents"] = status
                if status == 200:
                    outcome.listed = sorted(item["name"] for item in json.loads(body)["content"])
                break
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=30)
            outcome.stopped = server.poll() is not None
            outcome.returncode = 0 if outcome.http else server.returncode
            outcome.output = log.read_text(errors="replace")


def _state(project: Path, promise: str) -> dict[str, tuple[int, int]]:
    """``{file: (mtime_ns, size)}`` of the files a promised path or glob names (folders: the
    files under them)."""
    pattern = str(project / promise).rstrip("/")
    files: dict[str, tuple[int, int]] = {}
    for match in map(Path, glob(pattern)):
        if promise.endswith("/") and not match.is_dir():
            continue
        for path in match.rglob("*") if match.is_dir() else [match]:
            if path.is_file():
                stat = path.stat()
                files[str(path)] = (stat.st_mtime_ns, stat.st_size)
    return files


def _written_by(outcome: Outcome, project: Path, promise: str) -> bool:
    """Whether the command created or changed a file the promise names."""
    before = outcome.before[promise]
    after = _state(project, promise)
    return any(before.get(path) != state for path, state in after.items())


def _ci_commands(project: Path) -> tuple[set[frozenset[str]], list[list[str]]]:
    """Extras installed and pytest argument lists of ``.ci/run``."""
    extras: set[frozenset[str]] = set()
    pytests: list[list[str]] = []
    for line in (project / ".ci" / "run").read_text().splitlines():
        text = split_comment(line)[0]
        install = re.search(r"\bpip install\b.*-e '?\.\[([\w,-]+)\]", text)
        if install:
            extras.add(frozenset(install.group(1).split(",")))
        pytest_args = re.search(r"-m pytest\b(.*)$", text)
        if pytest_args:
            pytests.append(shlex.split(pytest_args.group(1)))
    return extras, pytests


# -- tests ---------------------------------------------------------------------------------

COMMANDS = documented_commands()


def test_the_parser_reads_lines_continuations_comments_and_promises():
    markdown = "\n".join(
        [
            "```bash",
            "# a comment line",
            "tool one --x 'a # b'  # -> out/a.{csv,json} out/dir/",
            "tool two \\",
            "    --y 2  # refuses: exit 1",
            "tool <path> [--opt]",
            "```",
            "```python",
            "print('not shell')",
            "```",
            "```sh",
            "tool three",
            "```",
        ]
    )
    one, two, three, four = extract_commands(markdown, "X.md")
    assert one == Command("X.md:3", "tool one --x 'a # b'", "-> out/a.{csv,json} out/dir/")
    assert one.promises == ["out/a.csv", "out/a.json", "out/dir/"]
    assert (one.expected_exit, one.synopsis) == (0, False)
    assert (two.source, two.text, two.expected_exit) == ("X.md:4", "tool two --y 2", 1)
    assert three.synopsis and not three.promises
    assert four == Command("X.md:12", "tool three", "")


def test_the_readmes_commands_are_found():
    texts = [c.text for c in COMMANDS]
    assert texts[0].startswith("python3 -m venv .venv && .venv/bin/pip install -e '.[notebooks]'")
    assert "retrieval-lib report --notebook kb_compare -f kb_example" in texts
    assert any(_is_server(shlex.split(t.split(" && ")[-1])) for t in texts)
    assert sum(c.source.startswith("examples/kb/README.md") for c in COMMANDS) >= 5
    assert not [c.source for c in COMMANDS if "/tmp/" in c.text], "use paths inside the project"


@pytest.fixture(scope="session")
def readme_session():
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the project copy is made from `git ls-files`")
    # Not under pytest's basetemp: other pytest runs of the same user may rotate it away.
    root = Path(tempfile.mkdtemp(prefix="retrieval-lib-readme-"))
    try:
        yield ReadmeSession(root, COMMANDS)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(COMMANDS)), ids=[c.source for c in COMMANDS])
def test_documented_command(readme_session, index):
    command = COMMANDS[index]
    outcome = readme_session.outcome(index)
    if outcome.skipped:
        pytest.skip(f"{command.source}: {outcome.skipped}")
    if outcome.ci_check:
        # Not run again: this test is part of what it runs. It must be what CI runs.
        extras, pytests = _ci_commands(readme_session.project)
        argvs = [shlex.split(s) for s in command.text.split(" && ")]
        installed = {_editable_extras(a) for a in argvs} - {None}
        assert installed <= extras, f"{command.source} installs {installed}, .ci/run {extras}"
        run = next(a for a in argvs if _is_test_command(a))
        assert run[run.index("pytest") + 1 :] in pytests, f"{command.source} vs .ci/run"
        return
    tail = outcome.output[-3000:] if outcome.returncode else outcome.output[-300:]
    assert outcome.returncode == command.expected_exit, f"{command.source}: {command.text}\n{tail}"
    assert "Traceback (most recent call last)" not in outcome.output, tail
    if outcome.http:
        assert outcome.http == {"/api": 200, "/lab": 200, "/api/contents": 200}, tail
        served = shlex.split(command.text.split(" && ")[-1])
        root = next((a for a in served[2:] if not a.startswith("-")), ".")
        notebooks = sorted(p.name for p in (readme_session.project / root).glob("*.ipynb"))
        assert notebooks and set(notebooks) <= set(outcome.listed)
        assert outcome.stopped
    for promise in command.promises:
        assert _written_by(outcome, readme_session.project, promise), (
            f"{command.source}: {promise} was not written by `{command.text}`"
        )
