"""The message proxy's hand-kept protocol tables (kchaos/protocol/api.py) against kio, Aiven's
classes generated from Kafka's own message schemas: API keys, the first flexible version of
each request, error codes. kio is the oracle, not a runtime dependency (docs/faults.md says why)."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest
from kio.schema.errors import ErrorCode  # the test extra installs it: a missing oracle fails, never skips

from kchaos.protocol.api import API_KEYS, ERROR_CODES, FLEXIBLE_FROM


def _module(api: str) -> str:
    return "kio.schema." + re.sub(r"(?<!^)(?=[A-Z])", "_", api).lower()


@pytest.mark.parametrize("api", sorted(API_KEYS))
def test_api_key_and_first_flexible_version_match_kafkas_schemas(api):
    package = importlib.import_module(_module(api))
    versions = sorted(int(m.name[1:]) for m in pkgutil.iter_modules(package.__path__) if m.name[1:].isdigit())
    requests = {v: importlib.import_module(f"{package.__name__}.v{v}.request") for v in versions}
    classes = {v: next(c for name, c in vars(mod).items() if name.endswith("Request") and hasattr(c, "__api_key__"))
               for v, mod in requests.items()}
    assert {int(c.__api_key__) for c in classes.values()} == {API_KEYS[api]}
    flexible = [v for v, c in classes.items() if c.__flexible__]
    if flexible == versions and FLEXIBLE_FROM[API_KEYS[api]] < versions[0]:
        # kio carries the versions Kafka still ships: KIP-932's v0 (4.0's early access, flexible
        # from 0) is gone from it, and every version it has is flexible
        return
    assert min(flexible) == FLEXIBLE_FROM[API_KEYS[api]], (api, flexible)


@pytest.mark.parametrize("name", sorted(ERROR_CODES))
def test_error_codes_match_kafkas_errors(name):
    assert ErrorCode[name.lower()].value == ERROR_CODES[name]
