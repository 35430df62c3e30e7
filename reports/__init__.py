"""HTML run reports (issue: reports and CI). Not implemented yet."""
