"""Binding the bytes where they are loaded: the verifier init container a serving Pod runs, where it
looks, and the checks that keep it there (added by ``/mutate-pods``, required by ``/validate-pods``)."""
