"""The lineage contract: what every output record carries so that a verifier can trace it.

An output record's **key** is the input id (UTF-8). Its **value** is a JSON object:

| field | meaning |
| --- | --- |
| ``in_id`` | the input record's unique id (the input key) |
| ``in_topic``, ``in_partition``, ``in_offset`` | where the input was read |
| ``slot``, ``slots`` | this output is slot ``j`` of ``K`` outputs made from the input |
| ``worker`` | the worker slot that wrote it (``w0``, ``w1`` ...) |
| ``incarnation`` | the worker process's incarnation (restarts and replacements count up) |
| ``txid`` | the producer's ``transactional.id`` (null when not transactional) |
| ``txn_seq`` | the writing process's transaction sequence number (1, 2, ...), unique per (worker, incarnation) |

Slot ``j`` goes to output topic ``j % T``. Any application that writes these fields can be
verified by kchaos (docs/workload.md, "Bring your own pipeline").

**Identity lineage** (``workload.lineage = "id"``) is for applications that cannot write these
fields: each output only has to carry its input's id somewhere (``workload.lineage_id``: the
key, the whole value, a JSON pointer into the value, or a regex over it). The verifier maps the
id back to the input's position; the output's slot is its topic's index. The seeder then marks
the ids of the input copies it aborts on purpose (``ABORTED_MARK``), so an output made from one
maps to the aborted copy's position and is an aborted read.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Lineage:
    in_id: str
    in_topic: str
    in_partition: int
    in_offset: int
    slot: int
    slots: int
    worker: str
    incarnation: int
    txid: str | None
    txn_seq: int

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, value: bytes) -> "Lineage":
        data = json.loads(value)
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__})


#: appended (with the aborted batch's number) to the id of an input copy the seeder aborts on
#: purpose, under identity lineage
ABORTED_MARK = "~aborted"


@dataclass(frozen=True)
class IdLocator:
    """Where an output carries its input's id: ``key``, ``value``, ``json:/a/0/b`` (a JSON
    pointer into the value, RFC 6901) or ``regex:PATTERN`` over the value (group 1 if the
    pattern has one, else the whole match; Python and Java must read the pattern alike, since
    the Spark engine runs it as a Java regex)."""

    kind: str
    arg: str = ""

    @classmethod
    def parse(cls, text: str) -> "IdLocator":
        import re

        if text in ("key", "value"):
            return cls(text)
        kind, _, arg = text.partition(":")
        if kind == "json" and arg.startswith("/"):
            return cls("json", arg)
        if kind == "regex" and arg:
            try:
                re.compile(arg)
            except re.error as exc:
                raise ValueError(f"lineage_id {text!r}: not a regular expression ({exc})") from None
            return cls("regex", arg)
        raise ValueError(f"lineage_id {text!r}: use 'key', 'value', 'json:/pointer' or 'regex:PATTERN'")

    def pointer(self) -> list[str]:
        """The JSON pointer's reference tokens, unescaped."""
        return [t.replace("~1", "/").replace("~0", "~") for t in self.arg.split("/")[1:]]

    def json_path(self) -> str:
        """The pointer as the JSONPath Spark's ``get_json_object`` reads (``$['a'][0]``)."""
        return "$" + "".join(f"[{t}]" if t.isdigit() else "['" + t.replace("'", "\\'") + "']"
                             for t in self.pointer())

    def extract(self, key: bytes | None, value: bytes | None) -> str | None:
        """The input id an output carries, or None when it has none where the locator says."""
        import re

        if self.kind == "key":
            return key.decode("utf-8", "replace") if key is not None else None
        text = value.decode("utf-8", "replace") if value is not None else None
        if text is None or self.kind == "value":
            return text
        if self.kind == "regex":
            m = re.search(self.arg, text)
            return None if m is None else (m.group(1) if m.re.groups else m.group(0))
        try:
            node: object = json.loads(text)
        except ValueError:
            return None
        for token in self.pointer():
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return None
        return node if isinstance(node, str) else (None if node is None or isinstance(node, (dict, list))
                                                    else json.dumps(node))


def input_id(seed: int, index: int) -> str:
    """Unique, seeded id of the ``index``-th input record."""
    import hashlib

    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=6).hexdigest()
    return f"in-{index:09d}-{digest}"


def input_value(seed: int, index: int, mark: str = "") -> bytes:
    return json.dumps({"id": input_id(seed, index) + mark, "n": index}, separators=(",", ":")).encode()
