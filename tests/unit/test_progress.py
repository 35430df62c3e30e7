"""Live progress: log lines where the console is not a terminal (CI, JSON lines), one redrawn
line on a terminal, and every line in the run's kchaos.log either way."""

from __future__ import annotations

import io
import json
import sys

import pytest

import kchaos.harness.progress as progress
from kchaos import log
from kchaos.harness.progress import Progress
from tests.clocks import module_time


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def stderr(monkeypatch):
    def use(stream, fmt="text"):
        monkeypatch.setattr(sys, "stderr", stream)
        log.configure(0, fmt)
        return stream
    yield use
    log.configure(0, "text")


def test_plain_lines_when_not_a_tty(stderr, tmp_path):
    out = stderr(io.StringIO())
    with log.copied_to(tmp_path / "kchaos.log"):
        p = Progress(5.0)
        p.show("faults: 5s elapsed")
        p.show("faults: 10s elapsed")
        p.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("[kchaos ") and "\r" not in out.getvalue()
    assert not p.due()  # next line only after the interval
    assert (tmp_path / "kchaos.log").read_text().count("elapsed") == 2


def test_one_redrawn_line_on_a_tty_and_every_line_in_the_run_log(stderr, tmp_path):
    out = stderr(FakeTty())
    with log.copied_to(tmp_path / "kchaos.log"):
        p = Progress(5.0)
        p.show("a")
        p.show("b")
        p.close()
    assert out.getvalue() == "\r\033[Ka\r\033[Kb\n"
    assert [line.rsplit("] ", 1)[1] for line in (tmp_path / "kchaos.log").read_text().splitlines()] == ["a", "b"]


def test_json_lines_never_redraw(stderr):
    out = stderr(FakeTty(), "json")
    p = Progress(5.0)
    p.show("draining")
    assert json.loads(out.getvalue())["message"] == "draining"


def test_throughput_from_processed_counts(monkeypatch):
    clock = iter([10.0, 12.0])
    monkeypatch.setattr(progress, "time", module_time(monotonic=lambda: next(clock)))
    p = Progress(1.0)
    assert p.throughput(100) is None
    assert p.throughput(300) == 100.0


def test_processed_text_carries_units_and_the_last_figure_while_offsets_are_unreadable(monkeypatch):
    clock = iter([5.0, 8.0, 20.0])
    monkeypatch.setattr(progress, "time", module_time(monotonic=lambda: next(clock)))
    p = Progress(1.0)
    assert p.processed_text(None) == "consumed: the group's offsets not readable yet"  # no clock read: nothing to age
    assert p.processed_text(100) == "consumed 100 input offsets (rate: first sample)"
    assert p.processed_text(400) == "consumed 400 input offsets (100 offsets/s)"
    assert p.processed_text(None) == "consumed 400 input offsets 12s ago (the group's offsets not readable since)"
