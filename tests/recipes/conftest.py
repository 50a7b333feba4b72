"""The preset sweep's fixture, shared by the recipe tests."""

import pytest

from tiny_configs import presets_under_test


@pytest.fixture(params=presets_under_test())
def preset_name(request):
    """Each registered preset under test (see `presets_under_test`)."""
    return request.param
