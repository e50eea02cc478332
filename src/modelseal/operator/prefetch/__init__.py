"""spec.prefetchOCI: the rules, the publication Job that runs it, and the result it reports."""
