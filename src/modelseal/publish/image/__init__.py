"""The image an ImageVolume mounts: its layout, layer streams, what its layers serve, the publisher."""
