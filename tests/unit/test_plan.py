"""`kchaos plan` on the default campaign, without a cluster: what a user reads before a run
starts says how much work the run will have, how its faults are paced and what they must hit."""

from __future__ import annotations

from kchaos.cli.plan import plan, render_plan
from kchaos.faults.schedule import generate_schedule
from kchaos.harness.campaign import load_campaign, planned_schedule, resolve_campaign_path


def test_the_default_campaigns_plan_names_its_inputs_pacing_exposure_and_faults():
    campaign = load_campaign(None)
    schedule = generate_schedule(campaign.faults, campaign.run.duration_s, 7)
    text = render_plan(plan(campaign, 7, False, schedule))
    # inputs follow the workload phase: the estimate is rate x duration
    assert f"about {round(campaign.workload.rate * campaign.run.duration_s)} inputs" in text
    assert "paced by the work" in text
    assert "required exposure (else the verdict is unknown)" in text and "kill 50, latency 50, partition 50" in text
    assert f"faults    {len(schedule)} scheduled" in text
    assert "clients=cut" in text  # the second isolation's parameter is shown


def test_the_certifications_plan_shows_each_phase_planned_from_its_step():
    """certify-tv-flip plans its faults per phase (faults.per_phase): the plan says so and marks
    where each step's phase begins, each phase starting at the step's time with the order's first entry."""
    campaign = load_campaign(resolve_campaign_path("certify-tv-flip"))
    schedule = planned_schedule(campaign, 28)
    text = render_plan(plan(campaign, 28, False, schedule))
    assert "planned per phase" in text and "-- after step 0 begins --" in text and "-- after step 1 begins --" in text
    firsts = {f.phase: f for f in reversed(schedule)}
    assert [firsts[p].at_s for p in (1, 2)] == [s.at_s for s in campaign.steps]
    assert len({(f.kind, f.target) for f in firsts.values()}) == 1  # every phase from the same first entry
