"""What the webhook answers from: the reconciler's verdict on each Model, and how it is looked up.

Every replica keeps these in memory from its own watches (the reconciler writes
them, the webhook only reads them), so admission needs no API call. A verdict
carries, for an admitted Model, every file its runtime loads with the digest
the attestation attests: the serving Pod's verifier checks exactly those.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from modelseal.operator.admission.served_weights import ServedWeights
from modelseal.operator.decide.loaded_files import LoadedFiles

__all__ = ["MODEL_LABEL", "SERVICE_LABEL", "ModelVerdict", "ServiceLookup", "VerdictLookup"]

MODEL_LABEL = "inference.llmkube.dev/model"
SERVICE_LABEL = "inference.llmkube.dev/service"


@dataclass(frozen=True)
class ModelVerdict:
    """What the reconciler last decided for a Model: at which generation, and why; ``uid`` is the
    ``metadata.uid`` of the object judged, so a Model deleted and created again under the same name
    is never answered with its predecessor's verdict."""

    generation: int
    admitted: bool
    message: str
    uid: str = ""
    #: an admission's files, each with its attested digest: what the serving Pod's verifier checks
    loaded: LoadedFiles | None = None
    #: the annotation ``modelseal.dev/attestation`` judged (a change of it bumps no generation)
    basis: str | None = None


#: (namespace, name) -> (the Model's current generation, the reconciler's latest verdict); None: unknown
VerdictLookup = Callable[[str, str], tuple[int, ModelVerdict | None] | None]
#: (namespace, name) -> what that InferenceService brings (None: the operator has not seen it)
ServiceLookup = Callable[[str, str], ServedWeights | None]
