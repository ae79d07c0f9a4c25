"""Task files (data: loaded by path, never imported as modules)."""
