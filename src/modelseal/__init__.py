"""modelseal: verify, sign and publish open-weight AI models for Kubernetes."""

__version__ = "0.1.0"
