"""kernelkiln: experience-driven kernel optimization with a hack-resistant guard."""

__version__ = "0.1.0"

from kernelkiln import threadsafe_ast

threadsafe_ast.install()
