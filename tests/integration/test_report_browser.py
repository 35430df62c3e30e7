"""The rendered report in a real headless browser (Debian's Chromium, installed by
`kchaos setup --browser`, which `make test` runs): it loads from disk with no console errors,
the verdict banner and the plots are visible, a screenshot is taken, and the text a person
reads holds no JSON or Python repr. A real default run's report gets the same reading in
test_cli's end-to-end test."""

from __future__ import annotations

import json

import pytest

from kchaos.reports.run_report import render_run_report

from tests.unit.test_checkers import OFFSETS, OUTPUTS, _out, _second_transaction
from tests.unit.test_reports import T0, ReportRun, _finish

from .conftest import overlapping_band_keys, read_report_in_browser


@pytest.mark.parametrize("kind", ["valid", "invalid"])
def test_report_loads_without_console_errors_and_shows_verdict_and_plots(browser, tmp_path, kind):
    from selenium.webdriver.common.by import By

    b = ReportRun()
    if kind == "invalid":
        b.committed["a"].append(_out(0, 2, 0))
    page = render_run_report(_finish(b.write(tmp_path / f"20261122T010000Z-{kind}-seed5")))
    read_report_in_browser(browser, page, tmp_path / f"report-{kind}.png")
    banner = browser.find_element(By.ID, "verdict")
    assert banner.is_displayed() and banner.text.startswith(kind.upper())
    plots = browser.find_elements(By.CSS_SELECTOR, "svg.plot")
    assert len(plots) == 4 and all(p.is_displayed() and p.size["width"] > 500 and p.size["height"] > 100 for p in plots)
    assert browser.find_elements(By.CSS_SELECTOR, "svg.plot polyline"), "the plots have no lines"
    assert (tmp_path / f"report-{kind}.png").stat().st_size > 20_000


def _hunt_like(run_dir):
    """A hunt's report at its densest: a split transaction and an aborted read named by the
    checker (evidence with nested records), 40 message faults 30 ms apart (a few pixels), the
    brokers' transaction list."""
    b = ReportRun()
    _second_transaction(b, end="abort")
    both = {**OUTPUTS, **OFFSETS}
    b.coordinator[("w0.1", 2)] = [("Ongoing", both, 1, None), ("PrepareCommit", both, 30, None),
                                  ("CompleteCommit", {}, 31, None)]
    for topic in ("a", "b"):
        b.committed[topic] += b.raw_extra[topic]
    run = b.write(run_dir)
    lines = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    for i in range(40):
        at = T0 + 0.2 + 0.03 * i
        lines += [{"time": at, "process": "harness", "op": 2000 + i, "type": "invoke", "f": "fault:delay-request",
                   "value": {"kind": "delay-request", "target": "txn-coordinator"}},
                  {"time": at + 0.05, "process": "harness", "op": 2000 + i, "type": "ok", "f": "fault:delay-request",
                   "value": {"resolved": {"nodes": [1 + i % 3], "role": "transaction coordinator"}}}]
    (run / "history.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    final = json.loads((run / "final.json").read_text())
    final["broker_transactions"] = {"hanging": [], "list_error": None, "transactions": [
        {"Coordinator": "1", "ProducerId": "7", "TransactionState": "CompleteCommit", "TransactionalId": "tx-w0"}]}
    (run / "final.json").write_text(json.dumps(final))
    return _finish(run)


def test_a_hunt_like_report_reads_as_tables_and_its_fault_keys_never_overprint(browser, tmp_path):
    from selenium.webdriver.common.by import By

    run = _hunt_like(tmp_path / "20261122T030000Z-hunt-seed5")
    results = json.loads((run / "results.json").read_text())
    assert {"split-transaction", "aborted-read"} <= set(results["anomaly_types"]), results["anomaly_types"]
    text = read_report_in_browser(browser, render_run_report(run), tmp_path / "report-hunt.png")
    assert "coordinator transactions" in text and "CompleteCommit" in text  # the evidence and the broker list, as tables
    assert browser.find_elements(By.CSS_SELECTOR, "table.evidence table.records"), "nested evidence is not a table"
    keys = browser.find_elements(By.CSS_SELECTOR, "svg.plot g.fault text")
    assert keys and overlapping_band_keys(browser) == []
    bands = browser.find_elements(By.CSS_SELECTOR, "svg.plot g.fault rect")
    assert len(bands) == 4 * 41  # every fault is drawn even where its key found no room
