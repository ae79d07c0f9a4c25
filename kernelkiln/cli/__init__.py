"""The ``kiln`` command line.

``app`` registers one module per command; a command imports only the floor beneath the
commands (``options``, ``settings``, ``sizing``, ``paths``, ``progress``, ``output``), never
another command (tests/test_layering.py holds it to that).
"""
