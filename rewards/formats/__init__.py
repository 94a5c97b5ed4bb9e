"""Every dataset format, one module each, each declaring one ``registry.Format``; ``registry.formats()`` imports
them all on first use. The readers are listed in ``registry``'s docstring."""
