"""bpflow services around the pure engine: command line (and later store, worker, API)."""
