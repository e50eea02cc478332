"""DSSE envelopes: reading them strictly, the in-toto Statement, public keys and signature checks."""
