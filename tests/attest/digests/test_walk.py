"""socair's walk rules, what they leave out, and symlinks that lead out of the folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from modelseal.attest.digests.digest import modeldir_digest
from modelseal.attest.digests.walk import Skipped, walk_model_dir
from modelseal.errors import InputError
from tests.attest.helpers import hf_snapshot


def test_what_the_walk_leaves_out_is_reported(tmp_path: Path) -> None:
    (tmp_path / "model.bin").write_bytes(b"w")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "evil.cpython-311.pyc").write_bytes(b"planted")
    (tmp_path / "sub" / ".cache" / "deep").mkdir(parents=True)
    (tmp_path / "sub" / ".cache" / "a").write_text("x")
    (tmp_path / "sub" / ".cache" / "deep" / "b").write_text("x")
    (tmp_path / "linkdir").symlink_to(tmp_path / "sub")
    (tmp_path / "sub" / "__pycache__").symlink_to("/")  # not counted: that would walk the whole disk
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    os.mkfifo(tmp_path / "fifo")
    walked = walk_model_dir(tmp_path)
    assert [f.path for f in walked.files] == ["model.bin"]
    assert walked.skipped == (
        Skipped("__pycache__/", "skipped folder", 1),
        Skipped("dangling", "dangling link"),
        Skipped("fifo", "not a regular file"),
        Skipped("linkdir", "symlinked folder"),
        Skipped("sub/.cache/", "skipped folder", 2),
        Skipped("sub/__pycache__", "symlinked folder"),
    )
    assert walked.skip_summary() == (
        f"{tmp_path}: 7 file(s) left out of the digest (socair's rules): __pycache__/ (1 file),"
        " dangling (dangling link), fifo (not a regular file), linkdir (symlinked folder),"
        " sub/.cache/ (2 files), and 1 more place(s)"
    )
    d = modeldir_digest(tmp_path)
    assert d.skipped == walked.skipped and d.skip_summary == walked.skip_summary()


def test_a_summary_names_five_places_at_most(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    for i in range(7):
        (tmp_path / f"d{i}" / "__pycache__").mkdir(parents=True)
        (tmp_path / f"d{i}" / "__pycache__" / "x.pyc").write_text("x")
    summary = walk_model_dir(tmp_path).skip_summary("the image")
    assert summary is not None and summary.endswith("d4/__pycache__/ (1 file), and 2 more place(s)")
    assert "7 file(s) left out of the image" in summary


def test_nothing_left_out_says_nothing(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert walk_model_dir(tmp_path).skip_summary() is None


def test_links_out_of_the_folder_are_refused_unless_allowed(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.bin").write_bytes(b"w")
    (model / "same.bin").symlink_to("model.bin")  # inside: always fine
    (tmp_path / "secret").write_text("root:x")
    (model / "vocab.txt").symlink_to(tmp_path / "secret")
    with pytest.raises(InputError) as caught:
        walk_model_dir(model, outside_links=False)
    assert str(caught.value) == (
        f"{model / 'vocab.txt'} is a symlink to {tmp_path / 'secret'}, outside {model}; refusing to follow it"
        " (--follow-symlinks follows links that leave the folder)"
    )
    walked = walk_model_dir(model)  # a digest follows it, as socair does
    assert [(f.path, f.source.name, f.outside) for f in walked.files] == [
        ("model.bin", "model.bin", False),
        ("same.bin", "model.bin", False),
        ("vocab.txt", "secret", True),
    ]
    (model / "vocab.txt").unlink()
    assert len(walk_model_dir(model, outside_links=False).files) == 2
    snapshot = hf_snapshot(tmp_path)
    with pytest.raises(InputError, match=r"config\.json is a symlink to .*blobs/0a1b, outside"):
        walk_model_dir(snapshot, outside_links=False)
    assert walk_model_dir(snapshot).files[0].source == (snapshot / "config.json").resolve()
