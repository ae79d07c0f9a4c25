"""Worker messages: tensors as raw bytes, and nothing a worker sends is unpickled."""

from __future__ import annotations

import json
from multiprocessing import Pipe

import pytest
import torch

from kernelkiln.guard.worker import protocol


def test_tensors_of_every_dtype_round_trip_inside_nested_messages():
    a, b = Pipe()
    tensors = [
        torch.randn(3, 4),
        torch.arange(6, dtype=torch.int64).reshape(2, 3),
        torch.zeros(0, 5),
        torch.randn(5).to(torch.bfloat16),
        torch.tensor([True, False]),
    ]
    protocol.send(a, {"ok": True, "outputs": tensors, "meta": {"x": tensors[0]}})
    got = protocol.recv(b)
    for sent, back in zip(tensors, got["outputs"], strict=False):
        assert back.dtype == sent.dtype and torch.equal(back, sent)
    assert torch.equal(got["meta"]["x"], tensors[0])


def test_a_pickle_from_a_worker_is_refused_not_executed():
    a, b = Pipe()
    a.send({"op": "compile"})  # Connection.send pickles
    with pytest.raises(protocol.ProtocolError):
        protocol.recv(b)


@pytest.mark.parametrize(
    "header, blobs",
    [
        ({"body": {"x": {"__tensor__": 0, "dtype": "float32", "shape": [4]}}, "blobs": 1}, [b"\0" * 3]),
        ({"body": {"x": {"__tensor__": 0, "dtype": "object", "shape": [1]}}, "blobs": 1}, [b"\0" * 8]),
        ({"body": {"x": {"__tensor__": 5, "dtype": "float32", "shape": [1]}}, "blobs": 0}, []),
        ({"body": [], "blobs": 0}, []),
    ],
)
def test_malformed_frames_are_protocol_errors(header, blobs):
    a, b = Pipe()
    a.send_bytes(json.dumps(header).encode())
    for blob in blobs:
        a.send_bytes(blob)
    with pytest.raises(protocol.ProtocolError):
        protocol.recv(b)


def test_oversized_messages_are_refused():
    a, b = Pipe()
    a.send_bytes(b"x" * 1000)
    with pytest.raises(protocol.ProtocolError, match="oversized"):
        protocol.recv(b, max_bytes=100)


def test_a_zero_dim_tensor_such_as_a_loss_round_trips():
    a, b = Pipe()
    loss = torch.tensor(0.625)
    protocol.send(a, {"out": [loss, torch.tensor(3, dtype=torch.int64)]})
    got = protocol.recv(b)["out"]
    assert got[0].shape == () and got[0].item() == 0.625
    assert got[1].shape == () and got[1].item() == 3
