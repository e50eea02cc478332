"""Command-line flags and environment variables with which a serving runtime loads weights.

An InferenceService passes ``spec.extraArgs`` (every runtime), ``spec.args``
(the ``generic`` runtime) and ``spec.env`` to the serving container as they
are. Any of them can make the runtime load weights from a path, a URL or a
Hugging Face repository that no Model names, so the gate counts them as
unattested weights (:mod:`modelseal.operator.admission.served_weights`).

The tables are what the runtimes LLMKube v0.9.19 runs document for loading
weights (llama.cpp's ``llama-server``, vLLM, SGLang and TGI). They cannot be
complete (a runtime grows flags; ``spec.command`` can run anything, and is
refused on its own), so they close the common doors, not every one. A long
flag is matched as vLLM and argparse read it (underscores, ``--flag.key``, a
prefix), not only as written.
"""

from __future__ import annotations

__all__ = ["RUNTIME_LOADING_ENV", "WEIGHT_ENV", "WEIGHT_FLAGS", "weight_flag"]

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
    "--tokenizer": "a tokenizer from another repository or path (with --trust-remote-code, its code)",
    "--hf-config-path": "a model configuration from another repository (with --trust-remote-code, its code)",
    # SGLang
    "--model-path": "the model to serve",
    "--lora-paths": "LoRA adapters",
    "--speculative-draft-model-path": "a draft model",
    "--tokenizer-path": "a tokenizer from another repository or path (with --trust-remote-code, its code)",
    # TGI
    "--model-id": "the model to serve",
    "--lora-adapters": "LoRA adapters",
    "--tokenizer-config-path": "a tokenizer configuration from another path",
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

#: variables that let the running server load weights a client names, after admission
RUNTIME_LOADING_ENV: dict[str, str] = {
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "lets any client of the vLLM server load a LoRA adapter at run time",
}

_LONG = sorted(f for f in WEIGHT_FLAGS if f.startswith("--"))


def weight_flag(arg: str) -> tuple[str, str] | None:
    """(the flag, what it loads) when ``arg`` is a weight-loading flag, alone or as ``flag=value``.

    A long flag is read as the Python runtimes read it: vLLM takes ``--a_b`` for
    ``--a-b`` and ``--a.key`` for a key of ``--a``'s JSON, and argparse (vLLM,
    SGLang) any unambiguous prefix of a long flag, so a prefix of one of
    :data:`WEIGHT_FLAGS` counts as that flag (a harmless flag that happened to be
    one would be refused, never a weight flag passed).
    """
    flag = arg.partition("=")[0]
    what = WEIGHT_FLAGS.get(flag)
    if what is not None:
        return flag, what
    if not flag.startswith("--") or len(flag) < 3:
        return None
    spelled = "--" + flag[2:].partition(".")[0].replace("_", "-")
    if spelled in WEIGHT_FLAGS:
        return spelled, WEIGHT_FLAGS[spelled]
    long = next((f for f in _LONG if f.startswith(spelled)), None)
    return None if long is None else (long, WEIGHT_FLAGS[long])
