"""Task and seed files (data: loaded by path, never imported as modules)."""
