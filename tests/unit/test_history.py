"""The history writer's descriptor: closed once, never written after close."""

from __future__ import annotations

import os

import pytest

from kchaos.workloads.history import HistoryWriter, read_lines


def test_a_second_close_leaves_a_reused_descriptor_alone(tmp_path):
    writer = HistoryWriter(tmp_path / "h" / "a.jsonl", "a")
    writer.event("x")
    number = writer._fd
    writer.close()
    # another file takes the number just released, as the next open() in the process would
    opened = os.open(tmp_path / "other", os.O_WRONLY | os.O_CREAT)
    other = os.dup2(opened, number) if opened != number else opened
    if opened != number:
        os.close(opened)
    try:
        writer.close()
        os.fstat(other)  # raises EBADF if the second close closed it
        assert os.write(other, b"still open") == 10
    finally:
        os.close(other)
    assert [line["f"] for line in read_lines(tmp_path / "h" / "a.jsonl")] == ["x", "x"]


def test_a_write_after_close_raises_instead_of_landing_elsewhere(tmp_path):
    writer = HistoryWriter(tmp_path / "a.jsonl", "a")
    writer.close()
    other = os.open(tmp_path / "other", os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(RuntimeError, match="closed"):
            writer.event("late")
        assert os.fstat(other).st_size == 0
    finally:
        os.close(other)
