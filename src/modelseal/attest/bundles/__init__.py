"""Sigstore bundles: certificates, keyless identities, OpenSSF Model Signing predicates and signing."""
