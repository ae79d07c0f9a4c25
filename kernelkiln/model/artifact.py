"""``OUT/model/``: the spliced kernels saved with their binaries, in a folder ``load.load_model`` reads.

The folder holds each kernel's source (``kernels/<key>.py``), the shared libraries it was
built into (their C source beside them), each declared shape's example inputs and
``manifest.json``: which regions each kernel serves, where it came from, and the machine it
was built and verified on (its CPU's identity and vector features, the compiler).
``served`` hands the saved libraries to ``native.prebuilt`` on the machine they were built
for (no compiler needed); on any other it refuses in one line, unless asked to rebuild them from source for
this CPU, and never opens a binary built for another one.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from kernelkiln import native
from kernelkiln.atomic import write_atomic
from kernelkiln.errors import UserError, described
from kernelkiln.model.compilers import COMPILERS
from kernelkiln.model.shapes import Shape
from kernelkiln.model.splice import Kernel, load
from kernelkiln.model.taskfile import structure_key
from kernelkiln.native.toolchain import CompilerNotFound, cpu_identity, find_compiler
from kernelkiln.platforms.host import cpu_flags

FORMAT = 1
FOLDER = "model"
# The vector features a kernel's binary may use, as /proc/cpuinfo names them (x86, then Arm).
VECTOR_FEATURES = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
    "amx_tile", "asimd", "sve", "sve2",
)  # fmt: skip


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Machine(_Frozen):
    """What a binary was built for: the CPU (model and every feature flag), its vector features, the compiler."""

    cpu: str
    vector: list[str]
    compiler: str

    @staticmethod
    def here() -> Machine:
        try:
            compiler = find_compiler("c").version.splitlines()[0]
        except CompilerNotFound:
            compiler = ""
        flags = cpu_flags()
        return Machine(cpu=cpu_identity(), vector=[f for f in VECTOR_FEATURES if f in flags], compiler=compiler)

    def describe(self) -> str:
        name = next((p.partition("=")[2] for p in self.cpu.split("|") if p.startswith("model name=")), "")
        return f"{name or self.cpu.split('|')[0]} ({', '.join(self.vector) or 'no vector features'})"


class Library(_Frozen):
    """One shared library a kernel opens: the build request it answers (its source saved beside it) and the binary."""

    lang: str
    flags: list[str]
    source: str  # the C/C++ source file, relative to the folder
    file: str  # the binary, relative to the folder
    sha256: str  # the binary's


class SavedKernel(_Frozen):
    key: str  # its task's key
    origin: str  # "generated" or "model-written"
    file: str  # the candidate's source, relative to the folder
    libraries: list[Library]


class SavedRegion(_Frozen):
    """The regions of one structure at one shape, and the kernel that serves them."""

    structure: str  # ``structure_key`` of the region at this shape
    kernel: str  # the kernel's key
    places: int  # how many times the region occurs in the model


class SavedShape(_Frozen):
    label: str  # "seq=128"; "" for the example inputs alone
    example: str  # the inputs, saved with torch.save, relative to the folder
    inputs: list[str]
    regions: list[SavedRegion]


class Manifest(_Frozen):
    format: int
    model: str
    capture: Literal["export", "dynamo"] = "export"  # dynamo: the kernels run under torch.compile (``backend``)
    form: str = "eager"  # export: the spliced model runs compiled with this configuration unless "eager"
    torch: str
    threads: int
    machine: Machine
    kernels: list[SavedKernel]
    shapes: list[SavedShape]  # where the kernels run; a call at any other shape runs the model in torch

    @field_validator("form")
    @classmethod
    def _known_form(cls, form: str) -> str:
        if form != "eager" and form not in COMPILERS:
            raise ValueError(f"unknown form {form!r}: eager or one of {', '.join(COMPILERS)}")
        return form


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _libraries(module: Any) -> list[native.NativeLibrary]:
    return [v for v in vars(module).values() if isinstance(v, native.NativeLibrary)]


def save(
    out: Path,
    name: str,
    shapes: Sequence[Shape],
    threads: int,
    kernels: dict[str, Kernel],
    capture: str = "export",
    form: str = "eager",
) -> Path:
    """Write ``out/model/`` for ``kernels`` at ``shapes`` (replacing an earlier one whole); returns the folder."""
    folder = out / FOLDER
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".model.", dir=out))
    try:
        saved = [_save_kernel(staging, kernel) for _, kernel in sorted(kernels.items())]
        at = []
        for w, shape in enumerate(shapes):
            torch.save(shape.declared.example, staging / f"example-{w}.pt")
            regions = [
                SavedRegion(structure=structure_key(shape.regions[key][0]), kernel=key, places=len(shape.regions[key]))
                for key in sorted(kernels)
                if shape.regions.get(key)
            ]
            label, inputs = shape.declared.label, shape.declared.inputs()
            at.append(SavedShape(label=label, example=f"example-{w}.pt", inputs=inputs, regions=regions))
        manifest = Manifest(
            format=FORMAT,
            model=name,
            capture="dynamo" if capture == "dynamo" else "export",
            form=form,
            torch=torch.__version__,
            threads=threads,
            machine=Machine.here(),
            kernels=saved,
            shapes=at,
        )
        write_atomic(staging / "manifest.json", manifest.model_dump_json(indent=2) + "\n")
        old = out / ".model-old"
        shutil.rmtree(old, ignore_errors=True)
        if folder.exists():
            folder.rename(old)
        staging.rename(folder)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _save_kernel(staging: Path, kernel: Kernel) -> SavedKernel:
    """The candidate's source, and each library it opens (built already: the loader's memo serves it)."""
    write_atomic(staging / "kernels" / f"{kernel.key}.py", kernel.source)
    libraries = []
    for k, lib in enumerate(_libraries(load(kernel))):
        binary = Path(lib.path).read_bytes()
        request = lib.request
        stem = f"kernels/{kernel.key}-{k}"
        source = f"{stem}{Path(request.filename).suffix}"
        write_atomic(staging / f"{stem}.so", binary, mode=0o755)
        write_atomic(staging / source, request.source)
        libraries.append(
            Library(lang=request.lang, flags=list(request.flags), source=source, file=f"{stem}.so",
                    sha256=_sha256(binary))
        )  # fmt: skip
    return SavedKernel(key=kernel.key, origin=kernel.origin, file=f"kernels/{kernel.key}.py", libraries=libraries)


def discard(out: Path) -> None:
    """Remove an earlier run's ``out/model/`` (this run kept no kernel)."""
    shutil.rmtree(out / FOLDER, ignore_errors=True)


def read(out: Path) -> Manifest:
    """``out/model/manifest.json``; a one-line ``UserError`` when it is missing or not one this version reads."""
    path = Path(out) / FOLDER / "manifest.json"
    if not path.is_file():
        why = (
            f"{out}/model.md says why no kernel was kept"
            if (Path(out) / "model.json").is_file()
            else "is it a `kiln model` output folder?"
        )
        raise UserError(f"{out} holds no saved model ({path} is missing): {why}")
    try:
        manifest = Manifest.model_validate_json(path.read_text())
    except ValidationError as exc:  # the first field that is wrong, by name: one line
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        field = f"{loc}: " if loc else ""  # a file that is not JSON at all names no field
        raise UserError(f"{path} is not a saved model's manifest ({field}{first['msg']})"[:300]) from None
    except (ValueError, OSError) as exc:
        raise UserError(f"{path} is not a saved model's manifest ({described(exc)[:200]})") from None
    if manifest.format != FORMAT:
        raise UserError(f"{path} has format {manifest.format}; this kernelkiln reads format {FORMAT}")
    return manifest


def served(folder: Path, manifest: Manifest, rebuild: bool) -> dict[native.BuildRequest, str]:
    """The saved libraries by the build request each answers (for ``native.prebuilt``), on the machine they were
    built for, each checked against its hash; elsewhere, with ``rebuild``, none (they are built for this CPU, the
    native cache keyed by it), and without, a one-line refusal."""
    here = Machine.here()
    if here.cpu != manifest.machine.cpu:
        if not rebuild:
            raise UserError(
                f"{folder}'s kernels were built for {manifest.machine.describe()}, this machine is "
                f"{here.describe()}: load_model(..., rebuild=True) rebuilds them from source here and checks "
                "the model against eager"
            )
        return {}
    found: dict[native.BuildRequest, str] = {}
    for kernel in manifest.kernels:
        for lib in kernel.libraries:
            path = folder / lib.file
            if not path.is_file() or _sha256(path.read_bytes()) != lib.sha256:
                raise UserError(f"{path} is missing or changed since it was saved: rerun `kiln model`")
            source = (folder / lib.source).read_text()
            found[native.BuildRequest(source, lib.lang, tuple(lib.flags))] = str(path.resolve())
    return found


def saved_kernels(out: str | Path, splice_model_kernels: bool) -> tuple[Path, Manifest, dict[str, Kernel]]:
    """The saved folder, its manifest and its kernels by key; kernels an LLM wrote refused unless allowed."""
    folder = Path(out) / FOLDER
    manifest = read(Path(out))
    written = [k.key for k in manifest.kernels if k.origin != "generated"]
    if written and not splice_model_kernels:
        raise UserError(
            f"{len(written)} of {folder}'s kernels were written by a model and would run in this process: "
            "pass splice_model_kernels=True to run them"
        )
    return folder, manifest, {k.key: Kernel(k.key, (folder / k.file).read_text(), k.origin) for k in manifest.kernels}
