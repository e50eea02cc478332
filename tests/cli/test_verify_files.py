"""``modelseal verify-files``: the serving Pod's init container, run as the Pod runs it.

In-process for the outcomes and their one line; as a process of its own, as
an unprivileged user, on a read-only file system with no network, for what
the Pod's security context takes away.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelseal.cli import main
from tests.cli.conftest import Run
from tests.conftest import TESTDATA

NOBODY = 65534
HANG_GUARD_SECONDS = 60


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def cache() -> Iterator[Path]:
    """A model cache folder as LLMKube's downloader leaves it, that every user can read (pytest's
    own temporary folders are root's alone)."""
    root = Path(tempfile.mkdtemp(prefix="modelseal-verify-files-", dir="/tmp"))
    root.chmod(0o755)
    (root / "0123456789abcdef").mkdir(mode=0o755)
    (root / "0123456789abcdef" / "model.gguf").write_bytes(b"GGUF" + os.urandom(3 * 2**20))
    (root / "0123456789abcdef" / "mmproj.gguf").write_bytes(b"GGUF projector")
    try:
        yield root
    finally:
        shutil.rmtree(root)


def expect_all(cache: Path) -> list[str]:
    """``--expect SHA256 PATH`` for every file of the cache, and ``--exact`` its folder."""
    args = ["--exact", str(cache / "0123456789abcdef")]
    for p in sorted((cache / "0123456789abcdef").iterdir()):
        args += ["--expect", sha(p.read_bytes()), str(p)]
    return args


def one_line(text: str) -> str:
    assert text.count("\n") == 1 and text.endswith("\n") and "Traceback" not in text, text
    return text.rstrip("\n")


def test_genuine_files_pass_with_one_line(cli: Run, cache: Path) -> None:
    r = cli("verify-files", *expect_all(cache))
    assert r.code == 0 and r.err == ""
    size = 4 + 3 * 2**20 + len(b"GGUF projector")
    assert re.fullmatch(rf"verified 2 file\(s\), {size} bytes, in \d+\.\d\d s", one_line(r.out))


def test_a_changed_byte_is_refused_naming_the_file_and_both_digests(cli: Run, cache: Path) -> None:
    args = expect_all(cache)
    model = cache / "0123456789abcdef" / "model.gguf"
    data = bytearray(model.read_bytes())
    data[-1] ^= 0xFF
    model.write_bytes(data)
    r = cli("verify-files", *args)
    assert r.code == 1 and r.out == ""
    want = args[args.index(str(model)) - 1]
    assert one_line(r.err) == f"error: {model}: digest mismatch: expected {want}, found {sha(bytes(data))}"


def test_a_downloader_leftover_under_exact_is_refused(cli: Run, cache: Path) -> None:
    args = expect_all(cache)
    leftover = cache / "0123456789abcdef" / "model.gguf.tmp"
    leftover.write_bytes(b"half a download")
    r = cli("verify-files", *args)
    assert r.code == 1
    assert one_line(r.err) == (
        f"error: {leftover}: unexpected (a file; {cache}/0123456789abcdef must hold only the expected files)"
    )
    assert (
        cli("verify-files", *args[2:]).code == 0
    )  # without --exact the folder's other files are not looked at


def test_a_hostile_file_name_is_escaped(cli: Run, cache: Path) -> None:
    hostile = cache / "0123456789abcdef" / "\x1b[2K\rverified 9 file(s)\u202e.gguf"
    hostile.write_bytes(b"remote code")
    r = cli(
        "verify-files",
        *expect_all(cache)[:2],
        "--expect",
        sha(b"x"),
        cache / "0123456789abcdef" / "model.gguf",
    )
    line = one_line(r.err)
    assert r.code == 1 and line.isprintable()
    assert "\\x1b[2K\\rverified 9 file(s)\\u202e.gguf: unexpected (a file;" in line


def test_a_size_given_is_checked_before_any_byte_is_read(cli: Run, cache: Path) -> None:
    """A huge sparse file where a model should be is refused at once by its size, not hashed to its end
    (a tebibyte of holes reads at a few hundred MB/s: hours in which the Pod would sit initialising)."""
    args = expect_all(cache)
    model = cache / "0123456789abcdef" / "model.gguf"
    size = model.stat().st_size
    assert cli("verify-files", *args, "--size", str(size), model).code == 0
    with model.open("r+b") as f:
        f.truncate(2**40)  # 1 TiB, sparse: hashing it would take hours
    r = cli("verify-files", *args, "--size", str(size), model)
    assert r.code == 1
    assert one_line(r.err) == f"error: {model}: size is {2**40} bytes, expected {size}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "the following arguments are required: --expect"),
        (
            ("--expect", "ab" * 32, "/m/a", "--size", "1e3", "/m/a"),
            "the size must be a decimal count of bytes",
        ),
        (
            ("--expect", "ab" * 32, "/m/a", "--size", "-1", "/m/a"),
            "the size must be a decimal count of bytes",
        ),
        (
            ("--expect", "ab" * 32, "/m/a", "--size", "10", "/m/b"),
            "the path is not one of the --expect paths",
        ),
        (
            ("--expect", "ab" * 32, "/m/a", "--size", "1", "/m/a", "--size", "1", "/m/a"),
            "--size: /m/a is given twice",
        ),
        (("--expect", "ab" * 32), "argument --expect: expected 2 arguments"),
        (("--expect", "AB" * 32, "/m/model.gguf"), "the digest must be 64 lowercase hex digits"),
        (("--expect", "ab" * 32, "m/model.gguf"), "the path must be absolute and normalised"),
        (("--expect", "ab" * 32, "/m/../etc/shadow"), "the path must be absolute and normalised"),
        (("--expect", "ab" * 32, "/m/a", "--expect", "cd" * 32, "/m/a"), "--expect: /m/a is given twice"),
        (("--expect", "ab" * 32, "/m/a", "--exact", "m"), "--exact m: the folder must be absolute"),
        (("--expect", "ab" * 32, "/m/a", "--jobs", "2"), "unrecognized arguments: --jobs 2"),
    ],
)
def test_a_usage_error_is_one_line_and_exit_2(cli: Run, args: tuple[str, ...], message: str) -> None:
    r = cli("verify-files", *args)
    assert r.code == 2 and r.out == ""
    line = one_line(r.err)
    assert line.startswith("error: ") and message in line


def in_pod(*argv: str) -> subprocess.CompletedProcess[str]:
    """``argv`` as the init container runs: user 65534, no network, every file system read-only (a
    private mount namespace), nothing on standard input."""
    read_only = (
        "mount -o remount,bind,ro / && { ! mountpoint -q /dev/shm || mount -o remount,bind,ro /dev/shm; }"
    )
    drop = f"setpriv --reuid {NOBODY} --regid {NOBODY} --clear-groups --"
    return subprocess.run(
        ["unshare", "--mount", "--net", "--", "sh", "-c", f'{read_only} && exec {drop} "$@"', "sh", *argv],
        capture_output=True, text=True, timeout=HANG_GUARD_SECONDS, stdin=subprocess.DEVNULL,
        env={"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}, cwd="/",
    )  # fmt: skip


def run_as_pod(*argv: str) -> subprocess.CompletedProcess[str]:
    return in_pod(sys.executable, "-m", "modelseal", *argv)


POD_SANDBOX = """
import os, socket
print(os.getuid(), os.getgid(), os.getgroups())
for path in ("/tmp/modelseal-was-here", "/dev/shm/modelseal-was-here"):
    try:
        open(path, "w")
    except OSError as e:
        print(e.strerror)
try:
    socket.create_connection(("127.0.0.1", 22), timeout=5)
except OSError as e:
    print(e.strerror)
"""


def test_the_pod_s_sandbox_takes_away_root_writes_and_the_network() -> None:
    r = in_pod(sys.executable, "-c", POD_SANDBOX)
    assert r.stdout.splitlines() == [
        f"{NOBODY} {NOBODY} []",
        "Read-only file system",
        "Read-only file system",
        "Network is unreachable",
    ], r.stderr


def test_it_runs_unprivileged_on_a_read_only_root_with_no_network(cache: Path) -> None:
    args = expect_all(cache)
    r = run_as_pod("verify-files", *args)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("verified 2 file(s), ") and r.stderr == ""
    (cache / "0123456789abcdef" / "config.json").write_bytes(b"{}")
    refused = run_as_pod("verify-files", *args)
    assert refused.returncode == 1 and "config.json: unexpected" in one_line(refused.stderr)


def test_an_unreadable_file_or_folder_is_refused_naming_it(cache: Path) -> None:
    """Run unprivileged (root reads a mode-000 file): permission denied is a refusal, exit 1."""
    args = expect_all(cache)
    model = cache / "0123456789abcdef" / "model.gguf"
    model.chmod(0o000)
    r = run_as_pod("verify-files", *args)
    assert r.returncode == 1
    assert one_line(r.stderr) == f"error: {model}: unreadable (Permission denied)"
    model.chmod(0o644)
    (cache / "0123456789abcdef").chmod(0o700)  # root's folder: nobody may look inside
    r = run_as_pod("verify-files", *args)
    assert r.returncode == 1
    assert one_line(r.stderr) == (
        f"error: {cache}/0123456789abcdef/mmproj.gguf: unreadable ({cache}/0123456789abcdef: Permission denied)"
    )


def test_a_fifo_planted_at_a_path_is_refused_without_hanging(cache: Path) -> None:
    args = expect_all(cache)
    model = cache / "0123456789abcdef" / "model.gguf"
    model.unlink()
    os.mkfifo(model)
    r = run_as_pod("verify-files", *args)
    assert r.returncode == 1
    assert one_line(r.stderr) == f"error: {model}: not a regular file (a FIFO)"


CLI_REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_the_cli_reference_s_transcript_is_what_it_prints(cli: Run, tmp_path: Path) -> None:
    """docs/cli.md's ``/models`` transcript, run with ``/models`` a folder of the test's own."""
    blocks = re.findall(r"```text\n(.*?)```", CLI_REFERENCE.read_text(), flags=re.S)
    [block] = [b for b in blocks if "$ modelseal verify-files" in b]
    models = tmp_path / "models"
    lines, ran = [line.replace("/models/", f"{models}/") for line in block.splitlines()], 0
    for i, line in enumerate(lines):
        if not line.startswith("$ "):
            continue
        words = shlex.split(line[2:])
        if words[0] == "echo":  # echo TEXT > FILE
            Path(words[3]).write_text(words[1] + "\n")
            continue
        if ran == 0:  # the downloader's file: the sample model's weights
            where = Path(words[-1])
            where.parent.mkdir(parents=True)
            shutil.copy(TESTDATA / "sample-model" / where.name, where)
        r = cli(*words[1:])
        printed = re.sub(r"in \d+\.\d\d s$", "in 0.00 s", (r.out + r.err).rstrip("\n"))
        assert printed == lines[i + 1]
        ran += 1
    assert ran == 2


HELP_ALONE = "error: -h/--help is taken alone: among a check's arguments it would check nothing and exit 0"


def exit_code(*argv: str) -> int | str | None:
    """``main``'s exit code, or the one argparse's help exits with."""
    try:
        return main(list(argv))
    except SystemExit as e:
        return e.code


@pytest.mark.parametrize(
    "flag", ["-h", "--help", "--he", "-vh"], ids=["-h", "--help", "a prefix", "in a cluster"]
)
@pytest.mark.parametrize("before", [True, False], ids=["before", "after"])
def test_help_among_the_check_s_arguments_is_a_usage_error_never_exit_0(
    cache: Path, capsys: pytest.CaptureFixture[str], flag: str, before: bool
) -> None:
    """Exit 0 lets the runtime start. argparse's help printed the help page and exited 0 wherever a
    help flag stood, before any file was looked at: a command built with one more word (a file name
    turned flag) admitted a missing file. Help is taken alone; among the arguments it is refused."""
    missing = ["--expect", sha(b"x"), str(cache / "0123456789abcdef" / "missing.gguf")]
    code = exit_code("verify-files", *([flag, *missing] if before else [*missing, flag]))
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert one_line(captured.err) == HELP_ALONE
    assert exit_code("verify-files", flag) == 0  # alone, it is help
    assert capsys.readouterr().out.startswith("usage: modelseal verify-files")
