"""The rendered report in a real headless browser (Debian's Chromium, installed by
`kchaos setup --browser`, which `make test` runs): it loads from disk with no console errors,
the verdict banner and the plots are visible, and a screenshot is taken."""

from __future__ import annotations

import pytest

from kchaos.reports.browser import find_browser
from kchaos.reports.run_report import render_run_report

from tests.unit.test_checkers import RunBuilder, _out
from tests.unit.test_reports import _finish


@pytest.fixture(scope="module")
def browser():
    found = find_browser()
    assert found, "Chromium/ChromeDriver missing: run `kchaos setup --browser` (make test does)"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,2000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=found[1]), options=options)
    yield driver
    driver.quit()


@pytest.mark.parametrize("kind", ["valid", "invalid"])
def test_report_loads_without_console_errors_and_shows_verdict_and_plots(browser, tmp_path, kind):
    from selenium.webdriver.common.by import By

    b = RunBuilder()
    if kind == "invalid":
        b.committed["a"].append(_out(0, 2, 0))
    page = render_run_report(_finish(b.write(tmp_path / f"20261122T010000Z-{kind}-seed5")))
    browser.get(page.as_uri())
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
    banner = browser.find_element(By.ID, "verdict")
    assert banner.is_displayed() and banner.text.startswith(kind.upper())
    plots = browser.find_elements(By.CSS_SELECTOR, "svg.plot")
    assert len(plots) == 3 and all(p.is_displayed() and p.size["width"] > 500 and p.size["height"] > 100 for p in plots)
    assert browser.find_elements(By.CSS_SELECTOR, "svg.plot polyline"), "the plots have no lines"
    shot = tmp_path / f"report-{kind}.png"
    assert browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
