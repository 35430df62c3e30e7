"""Nightly CI entry points (issue: reports and CI). Not implemented yet."""
