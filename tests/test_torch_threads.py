import pytest
import torch

from kernelkiln.torch_threads import one_torch_thread


def test_torch_runs_on_one_thread_inside_and_on_its_own_count_after_even_when_the_block_raises():
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(RuntimeError), one_torch_thread():
            assert torch.get_num_threads() == 1
            raise RuntimeError("inside")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(saved)
