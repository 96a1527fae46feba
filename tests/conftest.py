import pytest
import torch

import ember
import ember.testing


@pytest.fixture(autouse=True)
def _fresh_ember(request):
    ember.reset()
    ember.testing.reset_counters()
    torch.manual_seed(0)
    yield
    ember.reset()
    # an internal error of ember's runs the frame as plain Python (right values, so a test of
    # values passes): every test fails on one, unless it provokes one on purpose
    if request.node.get_closest_marker("internal_error") is None:
        assert ember.testing.counters()["internal"] == 0, "ember had an internal error (EMBER_LOGS=breaks)"
