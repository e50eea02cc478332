"""The first day (issue 21, part 3): what a newcomer tripped over, each point checked as they met it.

Every test here fails on the code before its fix (checked by restoring the old source).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import Run
from tests.conftest import TESTDATA
from tests.publish.servers import Registry

SAMPLE = TESTDATA / "sample-model"
REPORT = TESTDATA / "reports" / "sample.report.json"
REVIEW = "https://example.com/model-review/v1"


def _keys(cli: Run, tmp_path: Path) -> Path:
    assert cli("key", "gen", "--out", tmp_path / "me", "--issuer", "me").code == 0
    return tmp_path / "me"


def _model(tmp_path: Path) -> Path:
    model = tmp_path / "mymodel"
    model.mkdir()
    for f in SAMPLE.iterdir():
        (model / f.name).write_bytes(f.read_bytes())
    return model


def _tamper(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[100] ^= 1
    path.write_bytes(bytes(data))


# 2. sign of a folder points to attest, with a command that works


def test_sign_of_a_model_without_a_report_shows_an_attest_command_that_works(
    cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the command shown writes model.dsse.json here
    me, model = _keys(cli, tmp_path), _model(tmp_path)
    r = cli("sign", "--key", f"{me}.key", model)
    assert r.code == 2
    line = r.err.splitlines()[0]
    assert "to attest your own model without socair: modelseal attest" in line
    shown = shlex.split(line.split("without socair: ", 1)[1])
    assert shown[:2] == ["modelseal", "attest"]
    assert cli(*shown[1:]).code == 0  # the command shown works as it is
    out = Path(shown[shown.index("--out") + 1])
    ok = cli("verify", out, "--trusted", f"{me}.pub", "--predicate-type", REVIEW, "--artifact", model)
    assert ok.code == 0, ok.err


# 3. attest of a folder without --predicate-type shows a value to use


def test_attest_without_predicate_type_shows_a_value(cli: Run, tmp_path: Path) -> None:
    me, model = _keys(cli, tmp_path), _model(tmp_path)
    r = cli("attest", "--key", f"{me}.key", model)
    assert r.code == 2
    assert "files need --predicate-type URI" in r.err and f"--predicate-type {REVIEW}" in r.err


# 4. one wording for a tampered file and a tampered folder, the changed file named


def test_a_tampered_folder_and_file_are_refused_in_one_wording(cli: Run, tmp_path: Path) -> None:
    me, model = _keys(cli, tmp_path), _model(tmp_path)
    folder, file = tmp_path / "folder.dsse.json", tmp_path / "file.dsse.json"
    weights = model / "model.safetensors"
    key = f"{me}.key"
    assert cli("attest", "--key", key, "--predicate-type", REVIEW, "--out", folder, model).code == 0
    assert cli("attest", "--key", key, "--predicate-type", REVIEW, "--out", file, weights).code == 0
    before = hashlib.sha256(weights.read_bytes()).hexdigest()
    _tamper(weights)
    after = hashlib.sha256(weights.read_bytes()).hexdigest()
    trust = ("--trusted", f"{me}.pub", "--predicate-type", REVIEW)
    r = cli("verify", file, *trust, "--artifact", weights)
    assert r.code == 1
    assert r.err.splitlines() == [
        f"error: attestation does not verify: {weights} hashes to {after}, but the attestation is for {before}"
    ]
    r = cli("verify", folder, *trust, "--artifact", model)
    assert r.code == 1
    [line] = r.err.splitlines()
    assert line.startswith(f"error: attestation does not verify: directory {model} has manifest digest ")
    assert line.endswith(": changed: model.safetensors")


# 5. a folder given for one file's attestation says which file to pass


@pytest.mark.parametrize("signed_by", ["attest", "socair sign"])
def test_a_folder_given_for_a_file_attestation_names_the_file(
    cli: Run, tmp_path: Path, signed_by: str
) -> None:
    me, model = _keys(cli, tmp_path), _model(tmp_path)
    envelope = tmp_path / "file.dsse.json"
    if signed_by == "attest":
        args = ("--predicate-type", REVIEW, "--out", envelope, model / "model.safetensors")
        assert cli("attest", "--key", f"{me}.key", *args).code == 0
        types: tuple[str, ...] = ("--predicate-type", REVIEW)
    else:
        report = tmp_path / "file.json"
        report.write_bytes(REPORT.read_bytes())
        assert cli("sign", "--key", f"{me}.key", "--report", report).code == 0
        types = ()
    r = cli("verify", envelope, "--trusted", f"{me}.pub", *types, "--artifact", model)
    assert r.code == 1
    [line] = r.err.splitlines()
    assert "added:" not in line
    assert line.endswith(
        f": the attestation is for one file, model.safetensors; pass that file: --artifact {model}/model.safetensors"
    )


# 6, 7, 8 and 9: images


def _publish(cli: Run, registry: Registry, tag: str, model: Path = SAMPLE) -> str:
    r = cli("publish", "--image", f"{registry.host}/models/s:{tag}", "--plain-http", "--from", model,
            "--primary", "model.safetensors")  # fmt: skip
    assert r.code == 0, r.err
    return r.out.strip()


def test_a_moved_tag_is_not_called_verified_before_its_refusal(
    cli: Run, registry: Registry, tmp_path: Path
) -> None:
    me = _keys(cli, tmp_path)
    image = _publish(cli, registry, "v1")
    assert cli("attest", "--key", f"{me}.key", "--attach", "--plain-http", image).code == 0
    changed = _model(tmp_path)
    (changed / "config.json").write_text("{}")
    _publish(cli, registry, "v1", changed)  # the tag moves
    r = cli(
        "verify", "--image", f"oci://{registry.host}/models/s:v1", "--trusted", f"{me}.pub", "--plain-http"
    )
    assert r.code == 1
    warning, error = r.err.splitlines()
    assert "verified" not in warning and "checked that digest" in warning
    assert error.startswith("error: attestation does not verify: no attestation is attached")


def test_verify_image_says_no_layer_was_downloaded(cli: Run, registry: Registry, tmp_path: Path) -> None:
    me = _keys(cli, tmp_path)
    image = _publish(cli, registry, "v1")
    assert cli("attest", "--key", f"{me}.key", "--attach", "--plain-http", image).code == 0
    r = cli("verify", "--image", image, "--trusted", f"{me}.pub", "--plain-http")
    assert r.code == 0, r.err
    assert "  binds 3 file(s) as its manifest records them (no layer was downloaded;" in r.out


def test_inspect_of_a_layer_served_with_other_bytes_exits_3_as_documented(
    cli: Run, registry: Registry
) -> None:
    image = _publish(cli, registry, "v1")
    sha = hashlib.sha256((SAMPLE / "model.safetensors").read_bytes()).hexdigest()
    layer = json.loads(cli("publish", "inspect", image, "--plain-http", "--json").out)["files"][0]["layer"]
    hexd = layer.removeprefix("sha256:")
    blob = (
        registry.root / "data" / "docker" / "registry" / "v2" / "blobs" / "sha256" / hexd[:2] / hexd / "data"
    )
    data = bytearray(blob.read_bytes())
    data[-1] ^= 1  # the registry now serves other bytes under the layer's digest
    blob.write_bytes(bytes(data))
    r = cli("publish", "inspect", image, "--plain-http", "--sha256", sha)
    assert r.code == 3
    assert "the registry served sha256:" in r.err
    # the words agree: the option's help and the docs say which failure is 1 and which 3
    help_text = subprocess.run(
        [sys.executable, "-m", "modelseal", "publish", "inspect", "--help"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    assert "exit 3" in " ".join(help_text.split())


def test_a_socair_envelope_checked_against_an_image_gets_a_hint(
    cli: Run, registry: Registry, tmp_path: Path
) -> None:
    me = _keys(cli, tmp_path)
    report = tmp_path / "report.json"
    report.write_bytes(REPORT.read_bytes())
    assert cli("sign", "--key", f"{me}.key", "--report", report).code == 0
    image = _publish(cli, registry, "v1")
    r = cli(
        "verify", tmp_path / "report.dsse.json", "--image", image, "--trusted", f"{me}.pub", "--plain-http"
    )
    assert r.code == 1
    [line] = r.err.splitlines()
    sha = hashlib.sha256((SAMPLE / "model.safetensors").read_bytes()).hexdigest()
    assert (
        f"a Socair report is for a file, not an image: check the image's file with modelseal publish inspect {image} --sha256 {sha}"
        in line
    )
    # the commands it names do what it says
    assert cli("publish", "inspect", image, "--plain-http", "--sha256", sha).code == 0
    assert cli("verify", tmp_path / "report.dsse.json", "--trusted", f"{me}.pub", "--sha256", sha).code == 0


def test_a_new_tag_in_the_same_repository_uploads_nothing_again(cli: Run, registry: Registry) -> None:
    _publish(cli, registry, "v1")
    r = cli("publish", "--image", f"{registry.host}/models/s:v2", "--plain-http", "--from", SAMPLE,
            "--primary", "model.safetensors")  # fmt: skip
    assert r.code == 0, r.err
    assert "(0 uploaded, 3 already there)" in r.err


# 11. did you mean; a flag before the command


def test_a_mistyped_command_gets_a_did_you_mean(cli: Run) -> None:
    r = cli("verfy", "x.dsse.json")
    assert r.code == 2 and "invalid choice: 'verfy'; did you mean 'verify'?" in r.err


def test_a_flag_before_the_command_is_named_as_such(cli: Run) -> None:  # and the line says what to type
    r = cli("--trusted", "k.pub", "verify", "x.dsse.json")
    assert r.code == 2
    assert r.err.splitlines() == ["error: --trusted goes after the command: modelseal verify --trusted ..."]
    assert "invalid choice" not in cli("--trusted=k.pub", "verify").err


# 12. a private key given as --trusted


def test_a_private_key_as_trusted_says_so_and_where_the_public_one_is(cli: Run, tmp_path: Path) -> None:
    me = _keys(cli, tmp_path)
    envelope = tmp_path / "r.dsse.json"
    report = tmp_path / "r.json"
    report.write_bytes(REPORT.read_bytes())
    assert cli("sign", "--key", f"{me}.key", "--report", report).code == 0
    r = cli("verify", envelope, "--trusted", f"{me}.key")
    assert r.code == 1
    assert r.err.splitlines() == [
        f"error: {me}.key is a private key, not a public key: trust its public key ({me}.pub, beside it)"
    ]
    assert "PRIVATE" not in r.err


# 13. an environment variable's name given as a key


def test_a_variable_name_as_key_suggests_envvar(
    cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    r = cli("sign", "--key", "MODELSEAL_SIGNING_KEY", "--report", REPORT)
    assert r.code == 1
    assert "pass envvar:MODELSEAL_SIGNING_KEY" in r.err
    r = cli(
        "publish",
        "--image",
        "127.0.0.1:1/m:v1",
        "--sign-key",
        "MODELSEAL_SIGNING_KEY",
        SAMPLE / "config.json",
    )
    assert r.code == 1 and "pass envvar:MODELSEAL_SIGNING_KEY" in r.err


# 14. the operator extra's hint names what pip can install here


def test_the_operator_extra_hint_names_an_installable_thing(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['kopf'] = None\n"
        "from modelseal.cli import main\n"
        "sys.exit(main(['operator', 'run']))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert r.returncode == 3
    [line] = r.stderr.splitlines()
    assert "'modelseal[operator]'" not in line
    root = Path(__file__).resolve().parents[2]
    assert f"pip install '{root}[operator]'" in line and "pip install '.[operator]'" in line


# 16. modelseal operator alone


def test_a_group_alone_prints_its_help_and_exits_0(cli: Run) -> None:
    r = cli("operator")
    assert r.code == 0
    assert r.out.startswith("usage: modelseal operator ") and "    run " in r.out
    assert r.err == ""


@pytest.mark.parametrize(
    ("args", "line"),
    [
        # a value joined to a short option is never echoed
        (("-kS3CRET", "verify", "x.dsse.json"), "unrecognized option -k: modelseal verify does not take it"),
        (("-vkS3CRET", "verify"), "unrecognized option -k: modelseal verify does not take it"),
        (("--key=S3CRET", "verify"), "unrecognized option --key: modelseal verify does not take it"),
        # a flag the command does not take is not sent after it
        (
            ("--bogus", "verify", "x.dsse.json"),
            "unrecognized option --bogus: modelseal verify does not take it",
        ),
        # a group's command is named in full
        (("--out", "k", "key", "gen"), "--out goes after the command: modelseal key gen --out ..."),
        (("--json", "x", "publish", "inspect"), "--json goes after the command: modelseal publish inspect"),
        (("--out", "k", "key"), "unrecognized option --out (a command's options go after it: modelseal key"),
    ],
)
def test_a_flag_before_the_command_names_the_flag_alone_and_only_where_it_is_taken(
    cli: Run, args: tuple[str, ...], line: str
) -> None:
    r = cli(*args)
    assert r.code == 2 and r.err.startswith(f"error: {line}"), r.err
    assert "S3CRET" not in r.err


def test_a_prefix_of_a_top_level_flag_is_left_to_argparse(cli: Run) -> None:
    r = cli("--verb", "verify", "x.dsse.json")  # argparse reads --verbose
    assert r.code == 2 and "goes after the command" not in r.err and "say whom to trust: --trusted" in r.err
