"""The interface an engine implements: one query per registered check, made from the registry.

verifier/checks.py holds what every check means (its anomaly, requirements, explanations); each
check's query is a method of :class:`Engine` named after it (``check.query``), abstract here. An
engine (the single-process reference, verifier/pychecker.py; the Spark job,
verifier/spark/checks.py) registers one function per check (``checks.implements``) and is made by
:func:`engine_class`. An engine that misses one cannot be made (``abc``), so a check added to the
registry is a check both engines must answer, which the differential suite then compares.
"""

from __future__ import annotations

import abc
from typing import Any

from kchaos.verifier.checks import CHECKS, engine_queries
from kchaos.verifier.results import CheckResult


def _query(name: str) -> Any:
    def query(self: Any, data: Any) -> CheckResult: ...

    query.__name__ = query.__qualname__ = name
    return abc.abstractmethod(query)


#: One query per check; ``data`` is the engine's own run object (run_data.RunData,
#: spark.run.SparkRun), which exposes what verifier/evidence.py and the driver-side checks read.
Engine: Any = abc.ABCMeta("Engine", (abc.ABC,), {
    "__doc__": "One query per registered check (verifier/checks.py), each named after its check.",
    "__module__": __name__, "__annotations__": {"name": "str"},
    **{c.query.__name__: _query(c.query.__name__) for c in CHECKS}})


def engine_class(name: str, doc: str, module: str) -> type:
    """The engine ``name`` (of ``module``): every function registered for it (``checks.implements``)
    as the query of its check. Made once its implementations are imported (at the end of its module)."""
    return type(f"{name.title()}Engine", (Engine,), {"__doc__": doc, "__module__": module, "name": name,
                                                   **engine_queries(name)})
