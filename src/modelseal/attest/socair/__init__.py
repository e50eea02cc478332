"""Socair's attestation report and socair-compatible verification of an envelope."""
