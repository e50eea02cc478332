"""The README's first command, run as scripts/test.sh and CI run it: redirected to a file."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_demo_redirected_to_a_file_keeps_every_step(tmp_path: Path) -> None:
    log = tmp_path / "demo.log"
    script = (ROOT / "scripts" / "demo.sh").read_text()
    headers = re.findall(r'^echo "(== \d+\..*)"$', script, flags=re.M)
    assert len(headers) >= 10
    with log.open("wb") as out:  # one file for stdout and stderr, as `> log 2>&1`
        code = subprocess.run(["bash", "scripts/demo.sh"], cwd=ROOT, stdout=out, stderr=out, check=False)
    data = log.read_bytes()
    assert b"\0" not in data, "the log holds NUL bytes: something reopened it and truncated it"
    text = data.decode()
    assert code.returncode == 0, text
    positions = [text.find(h + "\n") for h in headers]
    assert -1 not in positions, [h for h, p in zip(headers, positions, strict=True) if p < 0]
    assert positions == sorted(positions)
    assert text.find("== ") == positions[0]  # nothing of step 1 was lost
    # the publish step shows its command, then what it published, then the image reference
    step6 = text[positions[5] : positions[6]]
    assert re.search(
        r"\$ modelseal publish .*\npublished 3 file\(s\).*\noci://\S+@sha256:[0-9a-f]{64}\n", step6
    )
    assert "demo complete" in text


@pytest.mark.slow
def test_the_refusal_is_kept_with_its_exit_code_when_only_stdout_is_captured(tmp_path: Path) -> None:
    """Issue 31, point 10: the refusal went to stderr and its exit code to stdout, so a transcript of
    stdout alone showed "exit code: 1" with no reason. Fails on the old demo."""
    r = subprocess.run(["bash", "scripts/demo.sh"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       text=True, check=False)  # fmt: skip
    assert r.returncode == 0, r.stdout
    step4 = r.stdout.split("== 4.", 1)[1].split("== 5.", 1)[0]
    assert re.search(
        r"\nerror: attestation does not verify: \S+ hashes to [0-9a-f]{64}, .*\nexit code: 1\n", step4
    )
