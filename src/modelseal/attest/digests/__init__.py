"""File and directory digests, and the tree walk that decides which files a model holds."""
