import pytest
import torch

import ember
import ember.testing


@pytest.fixture(autouse=True)
def _fresh_ember():
    ember.reset()
    ember.testing.reset_counters()
    torch.manual_seed(0)
    yield
    ember.reset()
