"""A policy's invalid field in one line a person can act on (issue 31, point 3).

Before, a misspelt key of a requirement (``predicatetype:``) was reported as the field it was meant to
be, missing (``require.1.predicateType: Field required``), without the requirement's name; an unknown
key read ``Extra inputs are not permitted``. Each case here fails on that code.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modelseal.attest.policy.admission_policy import load_any_policy
from modelseal.errors import PolicyFileError
from tests.conftest import SOCAIR

KEY = SOCAIR / "operator.pub"
HEAD = "apiVersion: modelseal.dev/v1\nkind: AdmissionPolicy\nrequire:\n"
RELEASE = f"  - name: release\n    predicateType: https://example.com/r/v1\n    trust: {{keys: [{{file: {KEY}}}]}}\n"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (HEAD + RELEASE + f"  - name: intake-signature\n    predicatetype: https://socair.ai/attestation/v1\n"
         f"    trust: {{keys: [{{file: {KEY}, name: model-ci}}]}}\n",
         "require.1 ('intake-signature'): unknown key 'predicatetype'; did you mean predicateType?"),
        (HEAD + RELEASE.replace("]}\n", "], maxage: 1h}\n"),
         "require.0 ('release'): trust: unknown key 'maxage'; did you mean maxAge?"),
        (HEAD + RELEASE.replace("file:", "flie:"),
         "require.0 ('release'): trust: keys.0: unknown key 'flie'; did you mean file?"),
        (HEAD + "  - name: unnamed-type\n    trust: {keys: []}\n",
         "require.0 ('unnamed-type'): predicateType: Field required"),
        ("apiVersion: modelseal.dev/v1\nkind: AdmissionPolicy\nrequires: []\n",
         "unknown key 'requires'; did you mean require?"),
        (f"apiVersion: modelseal.dev/v1\nkind: TrustPolicy\nkeys: [{{file: {KEY}}}]\nMaxAge: 1h\n",
         "unknown key 'MaxAge'; did you mean maxAge?"),
    ],
)  # fmt: skip
def test_an_unknown_key_is_named_with_its_requirement_and_the_key_meant(
    tmp_path: Path, text: str, line: str
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(PolicyFileError) as caught:
        load_any_policy(path)
    assert str(caught.value) == f"{path}: {line}"
