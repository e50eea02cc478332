"""The gate and the one place a Model is judged: admitted, refused or waiting, and never a crash."""
