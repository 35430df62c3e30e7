"""kchaos' log: one logger (``kchaos``), on stderr as text lines (``[kchaos 12:00:00] ...``) or
JSON lines (``--log-format json``), at the level ``-v``/``-q`` choose; and a copy of every line,
progress included, in the run directory's ``kchaos.log`` while a run executes.

Command output that is the command's result (a report's path, ``plan``, the run directory at the
end of ``kchaos run``) goes to stdout, never here.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

LOGGER = logging.getLogger("kchaos")
LOGGER.setLevel(logging.DEBUG)  # the handlers choose what they show
LOGGER.propagate = False

#: librdkafka's own lines from the clients the harness process holds (the seeder, the observers,
#: the admin client, the dumps): never on the console, where they came between kchaos' progress
#: lines; a run keeps them in its ``clients.log`` (copied_to), and elsewhere they are dropped
CLIENT_LOGGER = logging.getLogger("kchaos-clients")
CLIENT_LOGGER.setLevel(logging.DEBUG)
CLIENT_LOGGER.propagate = False
CLIENT_LOGGER.addHandler(logging.NullHandler())


def client_log(conf: dict) -> dict:
    """A confluent-kafka configuration whose client logs to CLIENT_LOGGER instead of stderr
    (librdkafka hands the lines over when the client is polled)."""
    return {**conf, "logger": CLIENT_LOGGER}


class TextFormatter(logging.Formatter):
    def __init__(self, dated: bool = False):
        super().__init__()
        self.dated = dated

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S" if self.dated else "%H:%M:%S", time.localtime(record.created))
        level = f"{record.levelname.lower()}: " if record.levelno >= logging.WARNING else ""
        line = f"[kchaos {stamp}] {level}{record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {"time": round(record.created, 3), "level": record.levelname.lower(), "message": record.getMessage()}
        if record.exc_info:
            out["traceback"] = self.formatException(record.exc_info)
        return json.dumps(out)


_console: logging.Handler | None = None


def configure(verbosity: int = 0, fmt: str = "text") -> None:
    """The console handler: ``verbosity`` -1 (quiet: warnings and errors), 0 (progress and
    results), 1 (debug detail)."""
    global _console
    if _console is not None:
        LOGGER.removeHandler(_console)
    _console = logging.StreamHandler(sys.stderr)
    _console.setLevel(logging.WARNING if verbosity < 0 else logging.DEBUG if verbosity > 0 else logging.INFO)
    _console.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    LOGGER.addHandler(_console)


def console_is_text_tty() -> bool:
    """Whether progress may redraw one line in place (a terminal reading text lines)."""
    return (_console is None or isinstance(_console.formatter, TextFormatter)) and sys.stderr.isatty()


@contextmanager
def copied_to(path: Path) -> Iterator[None]:
    """Every line logged meanwhile, debug included, also goes to ``path`` (a run's kchaos.log), and
    the harness's own clients' lines to ``clients.log`` beside it."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(TextFormatter(dated=True))
    clients = logging.FileHandler(path.with_name("clients.log"), encoding="utf-8", delay=True)
    clients.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    LOGGER.addHandler(handler)
    CLIENT_LOGGER.addHandler(clients)
    try:
        yield
    finally:
        LOGGER.removeHandler(handler)
        CLIENT_LOGGER.removeHandler(clients)
        handler.close()
        clients.close()


def say(message: str) -> None:
    """A line of progress or result for the person running kchaos."""
    LOGGER.info(message)
