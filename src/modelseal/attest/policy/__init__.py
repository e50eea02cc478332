"""Trust policies: the keys, certificate roots and Sigstore identities a verification accepts."""
