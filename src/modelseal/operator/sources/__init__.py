"""What an oci:// source serves: its bytes checked, the files a signature binds, attached attestations."""
