"""kernelkiln: experience-driven kernel optimization with a hack-resistant guard."""

__version__ = "0.1.0"

from kernelkiln import threadsafe_ast

threadsafe_ast.install()


def __getattr__(name: str) -> object:
    # The public API for whole models, loaded on first use: `import kernelkiln` stays light (no torch).
    if name in ("optimize_model", "load_model", "backend"):
        import kernelkiln.model

        return getattr(kernelkiln.model, name)
    raise AttributeError(f"module 'kernelkiln' has no attribute {name!r}")
