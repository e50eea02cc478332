"""Command-line flags and environment variables with which a serving runtime loads weights.

An InferenceService passes ``spec.extraArgs`` (every runtime), ``spec.args``
(the ``generic`` runtime) and ``spec.env`` to the serving container as they
are. Any of them can make the runtime load weights from a path, a URL or a
Hugging Face repository that no Model names, so the gate counts them as
unattested weights (:mod:`modelseal.operator.admission.served_weights`).

The tables are what the runtimes LLMKube v0.9.19 runs document for loading
weights (llama.cpp's ``llama-server``, vLLM, SGLang and TGI), and the variables
with which the dynamic loader or Python loads code from a path (a file beside
the checked one on a ``pvc://`` Model's claim, or left in the shared model cache
by a download whose check failed, would run inside the runtime). They cannot be
complete (a runtime grows flags; ``spec.command`` can run anything, and is
refused on its own), so they close the common doors, not every one. A long
flag is matched as vLLM and argparse read it (underscores, ``--flag.key``, a
prefix), not only as written.
"""

from __future__ import annotations

__all__ = [
    "CODE_ENV",
    "RUNTIME_LOADING_ENV",
    "WEIGHT_ENV",
    "WEIGHT_FLAGS",
    "remote_code_flag",
    "weight_flag",
    "weight_variable",
]

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
    "--rpc": "the model's layers computed on RPC servers, which can compute anything",
    # vLLM
    "--speculative-model": "a draft model",
    "--speculative-config": "a draft model (its JSON names one)",
    "--lora-modules": "LoRA adapters",
    "--qlora-adapter-name-or-path": "a QLoRA adapter",
    "--tokenizer": "a tokenizer from another repository or path (with --trust-remote-code, its code)",
    "--hf-config-path": "a model configuration from another repository (with --trust-remote-code, its code)",
    "--model-loader-extra-config": "weight loader options (tensorizer_uri: where weights come from)",
    "--tool-parser-plugin": "Python code from a file, run by the server",
    "--reasoning-parser-plugin": "Python code from a file, run by the server",
    # vLLM and SGLang
    "--config": "a YAML file of further flags (weight flags among them)",
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
    "LLAMA_ARG_RPC": "the model's layers computed on RPC servers, which can compute anything",
}

#: variables with which the dynamic loader or the interpreter loads code from a path: a library or a
#: module there (a file on the Model's claim beside the checked one, or left in the shared model
#: cache by a download whose check failed) runs inside the runtime and can serve anything
CODE_ENV: dict[str, str] = {
    "LD_PRELOAD": "the dynamic loader loads a library it names into the runtime",
    "LD_AUDIT": "the dynamic loader loads a library it names into the runtime",
    "LD_LIBRARY_PATH": "the dynamic loader looks for the runtime's libraries in the folders it names",
    "PYTHONPATH": "Python imports modules (sitecustomize among them) from the folders it names",
    "PYTHONHOME": "Python loads its standard library from the folder it names",
    "PYTHONUSERBASE": "Python imports modules (usercustomize among them) from the folder it names",
    "VLLM_CACHE_ROOT": "vLLM loads compiled graphs (Python code) cached in the folder it names",
    "TORCHINDUCTOR_CACHE_DIR": "PyTorch loads compiled kernels (code) cached in the folder it names",
    "TRITON_CACHE_DIR": "Triton loads compiled kernels (shared libraries) cached in the folder it names",
    "XDG_CACHE_HOME": "vLLM, PyTorch and Triton load compiled code cached in the folder it names",
}

#: variables that let the running server load weights a client names, after admission
RUNTIME_LOADING_ENV: dict[str, str] = {
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "lets any client of the vLLM server load a LoRA adapter at run time",
}

_LONG = sorted(f for f in WEIGHT_FLAGS if f.startswith("--"))


def remote_code_flag(arg: str) -> bool:
    """Whether ``arg`` turns on ``--trust-remote-code`` as vLLM and SGLang read it: underscores for
    dashes, and any prefix of it argparse would take (``--trust-remote``; a shorter one that is
    ambiguous makes argparse exit, so counting it refuses nothing that would run)."""
    flag = arg.partition("=")[0].replace("_", "-")
    return len(flag) > len("--tr") and "--trust-remote-code".startswith(flag)


def weight_variable(name: str) -> str | None:
    """What setting the environment variable ``name`` makes a runtime load (None: nothing modelseal
    knows of), as a clause: "llama.cpp loads a draft model from it"."""
    if name in WEIGHT_ENV:
        return f"llama.cpp loads {WEIGHT_ENV[name]} from it"
    return RUNTIME_LOADING_ENV.get(name) or CODE_ENV.get(name)


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
