"""Faults with setup/invoke/heal on a seeded schedule (issue: faults). Not implemented yet;
the cluster contract they build on (capabilities, role look-ups, ProxyNetwork) is in clusters/."""
