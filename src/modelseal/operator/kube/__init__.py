"""The Kubernetes API: the connection, the few calls the operator makes, object names, finding a cluster."""
