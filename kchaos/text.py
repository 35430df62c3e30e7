"""Values as a person reads them: the console and the report never print a dict or a repr.

``human`` turns any recorded value into one line of prose-like text; ``counts`` reads a
``{outcome: n}`` map as "committed 3001, aborted 133"; ``cells`` turns a value into a small
table (headers, rows of text) for evidence that is naturally tabular.
"""

from __future__ import annotations

from typing import Any

MAX_ITEMS = 40  # a list longer than this is cut, with the count of what was left out


def human(value: Any) -> str:
    if value is None or value == "None":  # Kafka's admin tools print "None" for an absent value
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if abs(value) < 1e6 else f"{value:.0f}"
    if isinstance(value, dict):
        if not value:
            return "none"
        return ", ".join(f"{k} {_nested(v)}" for k, v in list(value.items())[:MAX_ITEMS]) + _more(len(value))
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        if not items:
            return "none"
        return ", ".join(_nested(v) for v in items[:MAX_ITEMS]) + _more(len(items))
    return str(value)


def _nested(value: Any) -> str:
    text = human(value)
    return f"({text})" if isinstance(value, (dict, list, tuple)) and len(value) > 1 else text


def _more(n: int) -> str:
    return f" and {n - MAX_ITEMS} more" if n > MAX_ITEMS else ""


def counts(value: dict[str, Any] | None) -> str:
    """``{"committed": 3001, "aborted": 133}`` as "committed 3001, aborted 133"."""
    return human(value or {})


def durations(timings: dict[str, Any] | None) -> str:
    """``{"checks_s": 10.73, "ingest_s": 4.2}`` as "checks 10.7 s, ingest 4.2 s"."""
    parts = []
    for key, seconds in (timings or {}).items():
        name = key[:-2] if key.endswith("_s") else key
        parts.append(f"{name.replace('_', ' ')} {seconds:.1f} s" if isinstance(seconds, (int, float))
                     else f"{name.replace('_', ' ')} {human(seconds)}")
    return ", ".join(parts) or "-"


def cells(value: Any) -> tuple[list[str], list[list[str]]] | None:
    """A list of records, or a map of records, as (headers, rows); None when the value is not tabular."""
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        records = [{"": k, **v} for k, v in value.items()]
    elif isinstance(value, (list, tuple)) and value and all(isinstance(v, dict) for v in value):
        records = list(value)
    else:
        return None
    headers: list[str] = []
    for record in records:
        headers += [k for k in record if k not in headers]
    rows = [[human(r.get(h)) if h in r else "" for h in headers] for r in records[:MAX_ITEMS]]
    if len(records) > MAX_ITEMS:
        rows.append([f"and {len(records) - MAX_ITEMS} more"] + [""] * (len(headers) - 1))
    return headers, rows


def by_version(value: dict[str, Any] | None) -> str:
    """``{"0": 80, "2": 12}`` (counts by client transaction version) as "TV 0: 80, TV 2: 12"."""
    return ", ".join(f"TV {k}: {v}" for k, v in sorted((value or {}).items())) or "-"


def properties(value: dict[str, Any] | None) -> str:
    """Client or broker properties as "request.timeout.ms=3000, acks=all"."""
    return ", ".join(f"{k}={human(v)}" for k, v in (value or {}).items()) or "none"
