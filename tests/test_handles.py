"""The handle counter the leak tests use sees one handle opened and closed."""

import os

import pytest

from handles import CAN_COUNT, NO_COUNT, open_handles


@pytest.mark.skipif(not CAN_COUNT, reason=NO_COUNT)
def test_a_handle_opened_and_closed_is_counted(tmp_path):
    before = open_handles()
    fd = os.open(tmp_path / "f", os.O_CREAT | os.O_WRONLY)
    try:
        assert open_handles() == before + 1
    finally:
        os.close(fd)
    assert open_handles() == before
