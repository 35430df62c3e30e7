"""One root exception with narrow subclasses.

Every error kchaos raises on purpose is a :class:`KchaosError`. Its ``str()`` is a
single line naming the cause and, where there is one, the fix, so that the CLI can
print it as is and exit with :attr:`KchaosError.exit_code` (3: harness error).
"""

from __future__ import annotations

#: kchaos' exit codes: a CI job reads them (docs/ci.md)
EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN, EXIT_HARNESS_ERROR = 0, 1, 2, 3
VERDICT_EXIT = {"valid": EXIT_VALID, "invalid": EXIT_INVALID, "unknown": EXIT_UNKNOWN}


class KchaosError(Exception):
    """Root of every error kchaos raises deliberately."""

    exit_code = 3

    def __init__(self, cause: str, fix: str | None = None, detail: str | None = None):
        self.cause = cause
        self.fix = fix
        #: Longer context (e.g. the tail of a broker log); printed after the one-liner.
        self.detail = detail
        super().__init__(self.one_line())

    def one_line(self) -> str:
        return f"{self.cause} (fix: {self.fix})" if self.fix else self.cause


class ConfigError(KchaosError):
    """A campaign, cluster spec or override is invalid. Raised before anything starts."""


class SetupError(KchaosError):
    """A prerequisite is missing or could not be installed (Java, Maven, Go, jars)."""


class ClusterError(KchaosError):
    """A cluster could not be started, reached or stopped."""


class CapabilityError(KchaosError):
    """The cluster backend cannot do what was asked (e.g. kill a node of an external cluster)."""
