"""``python -m kernelkiln`` is ``kiln``."""

from kernelkiln.cli.app import main

main()
