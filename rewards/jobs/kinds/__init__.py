"""Every kind of job, one module each, each declaring one ``registry.JobKind``; ``registry.kinds()`` imports
them all on first use (no list of them to keep). The readers are listed in ``registry``'s docstring."""
