import base64
import struct

from kchaos.clusters.base import coordinator_partition, java_string_hash, topic_id_string


def test_java_string_hash_matches_java():
    # Values printed by java.lang.String.hashCode on OpenJDK 17.
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Hello, World!") == 1498789909
    assert java_string_hash("polygenelubricants") == -2147483648
    assert java_string_hash("\u00e9t\u00e9") == 227742    # non-ASCII: UTF-16 code units
    assert java_string_hash("\U0001F600") == 1772899      # surrogate pair counts as two units


def test_coordinator_partition_uses_kafka_abs():
    # Utils.abs(Integer.MIN_VALUE) is 0 in Kafka, not MIN_VALUE.
    assert coordinator_partition("polygenelubricants", 50) == 0
    assert coordinator_partition("hello", 50) == 99162322 % 50
    assert coordinator_partition("Hello, World!", 3) == 1498789909 % 3
    # a negative hash: abs first, then modulo
    h = java_string_hash("kchaos-tx-7")
    assert coordinator_partition("kchaos-tx-7", 7) == abs(h) % 7


class _ClientUuid:
    """The two accessors confluent-kafka's Uuid offers (its ``str()`` is standard base64)."""

    def __init__(self, raw: bytes):
        self.msb, self.lsb = struct.unpack(">qq", raw)

    def get_most_significant_bits(self) -> int:
        return self.msb

    def get_least_significant_bits(self) -> int:
        return self.lsb


def test_topic_id_string_is_kafkas_url_safe_form():
    # 0xfb 0xff 0xbf encodes to "+/+/" in standard base64 and "-_-_" in the URL-safe alphabet
    raw = bytes([0xFB, 0xFF, 0xBF]) + bytes(range(13))
    printed = topic_id_string(_ClientUuid(raw))
    assert printed.startswith("-_-_") and len(printed) == 22 and "=" not in printed
    assert base64.urlsafe_b64decode(printed + "==") == raw
    # negative halves (high bit set) round-trip through the signed accessors
    assert topic_id_string(_ClientUuid(b"\xff" * 16)) == "_____________________w"
