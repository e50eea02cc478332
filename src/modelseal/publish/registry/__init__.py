"""The OCI distribution client: references, sessions, authentication, TLS trust, blobs and uploads."""
