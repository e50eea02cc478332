"""Many replicas, one writer: leader election by a Lease, and readiness once the watches have synced."""
