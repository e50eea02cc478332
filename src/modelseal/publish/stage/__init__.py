"""Staging a Model's files into a folder: where each comes from, downloads, partial files."""
