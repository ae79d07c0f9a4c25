"""Framing between the guard and its workers: JSON headers plus raw tensor bytes.

Nothing a worker sends is ever unpickled: the worker runs hostile code, and a pickle
from it would run code in the parent. Tensors travel as dtype, shape and raw bytes.
"""

from __future__ import annotations

import json
from multiprocessing.connection import Connection
from typing import Any, cast

import torch

MAX_MESSAGE_BYTES = 1 << 31  # per frame; larger replies are treated as hostile

_DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64,
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
        torch.complex64,
        torch.complex128,
    )
}


class ProtocolError(Exception):
    """A malformed, oversized or unexpected message from a worker."""


def _pack(obj: Any, blobs: list[bytes]) -> Any:
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        # reshape first: a 0-dim tensor (a loss) has no byte view; the shape travels separately
        blobs.append(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        return {"__tensor__": len(blobs) - 1, "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)}
    if isinstance(obj, dict):
        return {str(k): _pack(v, blobs) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_pack(v, blobs) for v in obj]
    return obj


def _unpack(obj: Any, blobs: list[bytes]) -> Any:
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return _tensor(obj, blobs)
        return {k: _unpack(v, blobs) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_unpack(v, blobs) for v in obj]
    return obj


def _tensor(spec: dict[str, Any], blobs: list[bytes]) -> torch.Tensor:
    try:
        dtype = _DTYPES[spec["dtype"]]
        shape = [int(s) for s in spec["shape"]]
        blob = blobs[int(spec["__tensor__"])]
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ProtocolError(f"bad tensor frame: {exc}") from None
    numel = 1
    for s in shape:
        if s < 0:
            raise ProtocolError("negative dimension in tensor frame")
        numel *= s
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(blob) != numel * itemsize:
        raise ProtocolError(f"tensor frame holds {len(blob)} bytes, shape {shape} needs {numel * itemsize}")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(blob), dtype=torch.uint8).view(dtype).reshape(shape)


def send(conn: Connection, message: dict[str, Any]) -> None:
    """Send one message; tensors anywhere inside it travel as raw bytes."""
    blobs: list[bytes] = []
    header = _pack(message, blobs)
    conn.send_bytes(json.dumps({"body": header, "blobs": len(blobs)}).encode())
    for blob in blobs:
        conn.send_bytes(blob)


def recv(conn: Connection, max_bytes: int = MAX_MESSAGE_BYTES) -> dict[str, Any]:
    """Receive one message. Raises EOFError if the peer is gone, ProtocolError if it is malformed."""
    try:
        raw = conn.recv_bytes(max_bytes)
        header = json.loads(raw)
        count = int(header["blobs"])
        body = header["body"]
    except OSError as exc:  # recv_bytes raises OSError past maxlength
        raise ProtocolError(f"oversized or broken message: {exc}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ProtocolError(f"malformed message: {exc}") from None
    if not 0 <= count <= 4096 or not isinstance(body, dict):
        raise ProtocolError("malformed message header")
    blobs = []
    for _ in range(count):
        try:
            blobs.append(conn.recv_bytes(max_bytes))
        except OSError as exc:
            raise ProtocolError(f"oversized or broken message: {exc}") from None
    return cast(dict[str, Any], _unpack(body, blobs))  # body is a dict, so its unpacking is one
