"""The sampler's former home: ``python -m rewards.generation`` still runs ``rewards.sampling`` (job folders and
scripts written before the move call it by this name)."""
