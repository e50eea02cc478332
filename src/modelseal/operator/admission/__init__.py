"""Admission: the decision for Pods and InferenceServices, the webhook that serves it, eviction on revoke."""
