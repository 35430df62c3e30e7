"""`kchaos plan` on the default campaign, without a cluster: what a user reads before a run
starts says how much work the run will have, how its faults are paced and what they must hit."""

from __future__ import annotations

from kchaos.cli.plan import plan, render_plan
from kchaos.faults.schedule import generate_schedule
from kchaos.harness.campaign import load_campaign


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
