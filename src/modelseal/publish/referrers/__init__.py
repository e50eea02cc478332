"""Attestations beside an image: attached as OCI referrers, read back, signed and verified by digest."""
