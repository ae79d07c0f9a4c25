"""Fast compile-and-load of C/C++ CPU kernels and CUDA kernels called with torch tensors.

``load`` builds source into a cached shared library (keyed by everything that
affects the binary) and binds its functions with ctypes; ``build`` is the trusted,
confined compile step the guard can run on a sandboxed worker's behalf. ``load_inline`` takes
torch's ``load_inline`` call (a C++ torch extension) and builds it the same way.
"""

from .build import build, cache_key, default_cache_dir
from .flags import FlagError, check_flags
from .inline import InlineError, load_inline
from .loader import BuildError, NativeFunction, NativeLibrary, load, prebuilt, set_builder
from .records import BuildRequest, BuildResult, Diagnostic
from .signature import SignatureError

__all__ = [
    "BuildError",
    "BuildRequest",
    "BuildResult",
    "Diagnostic",
    "FlagError",
    "InlineError",
    "NativeFunction",
    "NativeLibrary",
    "SignatureError",
    "build",
    "cache_key",
    "check_flags",
    "default_cache_dir",
    "load",
    "load_inline",
    "prebuilt",
    "set_builder",
]
