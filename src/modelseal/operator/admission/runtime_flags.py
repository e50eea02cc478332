"""Command-line flags and environment variables with which a serving runtime loads weights.

An InferenceService passes ``spec.extraArgs`` (every runtime), ``spec.args``
(the ``generic`` runtime) and ``spec.env`` to the serving container as they
are. Any of them can make the runtime load weights from a path, a URL or a
Hugging Face repository that no Model names, so the gate counts them as
unattested weights (:mod:`modelseal.operator.admission.served_weights`).

The tables are what the runtimes LLMKube v0.9.19 runs document for loading
weights (llama.cpp's ``llama-server``, vLLM, SGLang and TGI). They cannot be
complete (a runtime grows flags; ``spec.command`` can run anything, and is
refused on its own), so they close the common doors, not every one.
"""

from __future__ import annotations

__all__ = ["WEIGHT_ENV", "WEIGHT_FLAGS", "weight_flag"]

#: flag -> what it loads; a flag matches as ``--flag value`` or ``--flag=value``
WEIGHT_FLAGS: dict[str, str] = {
    # llama.cpp (llama-server)
    **dict.fromkeys(("-m", "--model"), "the model to serve"),
    **dict.fromkeys(("-mu", "--model-url"), "a model downloaded from a URL"),
    **dict.fromkeys(("-md", "--model-draft"), "a draft model"),
    **dict.fromkeys(("-hf", "-hfr", "--hf-repo", "-hff", "--hf-file"), "a Hugging Face model"),
    **dict.fromkeys(("-hfd", "-hfrd", "--hf-repo-draft"), "a Hugging Face draft model"),
    **dict.fromkeys(("-hfv", "-hfrv", "--hf-repo-v", "-hffv", "--hf-file-v"), "a Hugging Face vocoder"),
    **dict.fromkeys(("-mv", "--model-vocoder"), "a vocoder model"),
    **dict.fromkeys(("-dr", "--docker-repo"), "a model from a Docker Hub repository"),
    **dict.fromkeys(("--lora", "--lora-scaled"), "a LoRA adapter"),
    **dict.fromkeys(("--control-vector", "--control-vector-scaled"), "a control vector"),
    **dict.fromkeys(("-mm", "--mmproj", "-mmu", "--mmproj-url"), "a multimodal projector"),
    **dict.fromkeys(("--models-dir", "--models-preset"), "a folder of models"),
    # vLLM
    "--speculative-model": "a draft model",
    "--speculative-config": "a draft model (its JSON names one)",
    "--lora-modules": "LoRA adapters",
    "--qlora-adapter-name-or-path": "a QLoRA adapter",
    # SGLang
    "--model-path": "the model to serve",
    "--lora-paths": "LoRA adapters",
    "--speculative-draft-model-path": "a draft model",
    # TGI
    "--model-id": "the model to serve",
    "--lora-adapters": "LoRA adapters",
}

#: llama.cpp reads every flag above from an ``LLAMA_ARG_*`` variable too
WEIGHT_ENV: dict[str, str] = {
    "LLAMA_ARG_MODEL": "the model to serve",
    "LLAMA_ARG_MODEL_URL": "a model downloaded from a URL",
    "LLAMA_ARG_MODEL_DRAFT": "a draft model",
    "LLAMA_ARG_HF_REPO": "a Hugging Face model",
    "LLAMA_ARG_HF_FILE": "a Hugging Face model",
    "LLAMA_ARG_HFD_REPO": "a Hugging Face draft model",
    "LLAMA_ARG_HF_REPO_V": "a Hugging Face vocoder",
    "LLAMA_ARG_HF_FILE_V": "a Hugging Face vocoder",
    "LLAMA_ARG_DOCKER_REPO": "a model from a Docker Hub repository",
    "LLAMA_ARG_MMPROJ": "a multimodal projector",
    "LLAMA_ARG_MMPROJ_URL": "a multimodal projector",
    "LLAMA_ARG_MODELS_DIR": "a folder of models",
    "LLAMA_ARG_MODELS_PRESET": "a folder of models",
}


def weight_flag(arg: str) -> tuple[str, str] | None:
    """(the flag, what it loads) when ``arg`` is a weight-loading flag, alone or as ``flag=value``."""
    flag = arg.partition("=")[0]
    what = WEIGHT_FLAGS.get(flag)
    return None if what is None else (flag, what)
