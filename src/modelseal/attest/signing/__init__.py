"""Signing: private keys, signers (key files and signer URIs) and the envelopes they sign."""
