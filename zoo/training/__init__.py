"""Training: the loop (`loop`), its checkpoints and its distribution over devices."""
