"""Live progress degrades to plain lines when the output is not a terminal."""

from __future__ import annotations

import io

from kchaos.harness.progress import Progress


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_when_not_a_tty():
    out = io.StringIO()
    p = Progress(5.0, out)
    p.show("faults: 5s elapsed")
    p.show("faults: 10s elapsed")
    p.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("[kchaos ") and "\r" not in out.getvalue()
    assert not p.due()  # next line only after the interval


def test_one_redrawn_line_on_a_tty():
    out = FakeTty()
    p = Progress(5.0, out)
    p.show("a")
    p.show("b")
    p.close()
    assert out.getvalue() == "\r\033[Ka\r\033[Kb\n"


def test_throughput_from_processed_counts(monkeypatch):
    import kchaos.harness.progress as progress

    clock = iter([10.0, 12.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    p = Progress(1.0, io.StringIO())
    assert p.throughput(100) is None
    assert p.throughput(300) == 100.0
