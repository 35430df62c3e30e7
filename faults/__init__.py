"""Faults aimed at roles: the kinds (kinds/, one module per family), the seeded schedule
(schedule.py), the nemesis that injects and always heals them (nemesis.py), planned steps such as
feature flips and rolling upgrades on one timeline (steps.py, timeline.py). The cluster contract
they build on (capabilities, role look-ups, the proxies) is in clusters/."""
