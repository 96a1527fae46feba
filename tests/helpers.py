"""Helpers shared by the tests. `from tests.helpers import randn`."""
import torch


def randn(*shape, seed=0, dtype=torch.float32, requires_grad=False):
    """A tensor of this shape drawn from its own generator seeded with `seed` (the same values
    whatever ran before). randn(2, 3) and randn((2, 3)) are the same."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
        shape = tuple(shape[0])
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=dtype).requires_grad_(requires_grad)
