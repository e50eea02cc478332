import importlib
import io

import pytest

import modelseal.attest
from modelseal import errors
from modelseal.cli.progress import ProgressBar, human_bytes


@pytest.mark.parametrize(
    ("cls", "code"),
    [
        (errors.UsageError, 2),
        (errors.InputError, 1),
        (errors.EnvelopeError, 1),
        (errors.KeyFileError, 1),
        (errors.PolicyFileError, 1),
        (errors.VerificationError, 1),
        (errors.PolicyError, 1),
        (errors.OperationalError, 3),
        (errors.RegistryError, 3),
        (errors.KubeError, 3),
    ],
)
def test_every_family_has_its_exit_code(cls: type[errors.Error], code: int) -> None:
    assert issubclass(cls, errors.Error) and cls.exit_code == code


def test_messages_are_one_line() -> None:
    assert str(errors.InputError("a\nb")) == "a b"
    assert errors.VerificationError("x", reason="signature_invalid").reason == "signature_invalid"


@pytest.mark.parametrize("module", ["modelseal.errors", "modelseal.attest"])
def test_all_is_honest(module: str) -> None:
    mod = importlib.import_module(module)
    for name in mod.__all__:
        assert hasattr(mod, name), name
    assert sorted(mod.__all__) == list(mod.__all__)


def test_public_api_evaluates() -> None:
    assert callable(modelseal.attest.evaluate)


def test_progress_bar_draws_only_when_enabled() -> None:
    quiet = io.StringIO()
    with ProgressBar("x", 10, stream=quiet, enabled=False) as bar:
        bar.advance(10)
    assert quiet.getvalue() == ""
    shown = io.StringIO()
    with ProgressBar("hashing", 2048, stream=shown, enabled=True) as bar:
        bar.advance(1024)
        bar.advance(1024)
    assert "hashing [" in shown.getvalue() and "100.0%" in shown.getvalue()
    assert shown.getvalue().endswith("\n")
    unknown = io.StringIO()
    with ProgressBar("staging", stream=unknown, enabled=True) as bar:  # total unknown: bytes and rate
        bar.advance(2048)
    assert unknown.getvalue().startswith("\rstaging 2.0 KiB ") and "%" not in unknown.getvalue()
    assert human_bytes(1536) == "1.5 KiB" and human_bytes(3) == "3 B"
