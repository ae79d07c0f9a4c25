"""The ``kiln`` command line."""
