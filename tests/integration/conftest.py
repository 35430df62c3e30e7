import os
import re
import shutil
import time
from pathlib import Path

import pytest

from kchaos.clusters import ClusterSpec
from kchaos.clusters.local import LocalJvmCluster
from kchaos.runtime.processes import processes_with_marker
from kchaos.runtime.reaper import start_reaper

@pytest.hookimpl(tryfirst=True)  # before `-m` selects: the long mark below must be seen
def pytest_collection_modifyitems(config, items):
    """The unit checker tests marked ``one_engine`` (a rule both engines share) are not collected
    again for the Spark job (tests/unit/test_checkers.py and tests/unit/test_share.py say why).
    Those marked ``spark_long`` are, in the long tier: variants of a query that another Spark
    copy in `make test` already runs."""
    keep, dropped = [], []
    for item in items:
        spark_copy = item.nodeid.startswith(("tests/integration/test_checkers_spark.py",
                                             "tests/integration/test_share_checks_spark.py"))
        if spark_copy and item.get_closest_marker("spark_long"):
            item.add_marker(pytest.mark.long)
        (dropped if spark_copy and item.get_closest_marker("one_engine") else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


# Faster failure detection than the slow-machine defaults, so ISR changes show within seconds.
FAST_ISR = {"replica.lag.time.max.ms": "8000"}


def start_local(tmp_path, **spec) -> LocalJvmCluster:
    start_reaper(tmp_path)  # if the test process dies, its cluster dies with it
    cluster = LocalJvmCluster(ClusterSpec.load(spec), tmp_path)
    cluster.start()
    return cluster


def restore(cluster: LocalJvmCluster) -> None:
    """Put a shared cluster back as a test may have left it: links up, every node running."""
    if cluster.toxiproxy is not None:
        cluster.network.heal()
    if cluster.messages is not None:
        cluster.messages.reset()
    for node in cluster.nodes:
        if node.is_paused:
            node.resume()
        if not node.is_running:
            node.start()
    cluster._close_admin()
    cluster.wait_healthy(180)


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium (Debian's, installed by `kchaos setup --browser`, which make test runs)."""
    from kchaos.reports.browser import find_browser

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


# What a dict, a list or a Python value looks like printed raw: '{"', "{'", '": ', "': ", '[{', '["',
# '[[', True/False/None, '{}', '[]', an object's repr
RAW_DUMP = re.compile(r"""\{\s*["']|["']\s*:\s|\[\s*[\[{"']|\b(True|False|None)\b|object at 0x|\{\}|\[\]""")


def read_report_in_browser(driver, page: Path, shot: Path) -> str:
    """Open a report from disk, take a screenshot, and return the text a person sees (every
    <details> opened first, so evidence counts too); fails on console errors or raw dumps."""
    driver.get(page.as_uri())
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
    driver.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
    assert driver.save_screenshot(str(shot)) and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = driver.execute_script("return document.body.innerText")
    dumps = [text[max(0, m.start() - 60):m.end() + 40] for m in RAW_DUMP.finditer(text)]
    assert dumps == [], f"raw JSON or repr text in {page}: {dumps[:5]}"
    return text


def overlapping_band_keys(driver) -> list[tuple[str, str]]:
    """Pairs of fault-band keys whose rendered boxes intersect, in any plot."""
    return driver.execute_script("""
        const out = [];
        for (const svg of document.querySelectorAll('svg.plot')) {
          const boxes = [...svg.querySelectorAll('g.fault text')].map(t => [t.textContent, t.getBoundingClientRect()]);
          for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
            const [a, r] = boxes[i], [b, s] = boxes[j];
            if (r.left < s.right && s.left < r.right && r.top < s.bottom && s.top < r.bottom) out.push([a, b]);
          }
        }
        return out;""")


@pytest.fixture(scope="session")
def _cluster3_session(tmp_path_factory):
    work = tmp_path_factory.mktemp("cluster3")
    # the message proxy sits on every client link of the shared cluster, so the tests that use
    # it for message faults cost no cluster of their own and every other test runs through it;
    # it records every KIP-848 heartbeat and share fetch, as a campaign's cluster.record_apis does
    cluster = start_local(work, nodes=3, broker=FAST_ISR, proxy_messages=True,
                          record_apis=("ConsumerGroupHeartbeat", "ShareFetch"))
    yield cluster
    cluster.stop()
    assert processes_with_marker(str(cluster.work_dir)) == [], "cluster3 leaked processes"


@pytest.fixture
def cluster3(_cluster3_session):
    """One 3-node combined-mode cluster shared by many tests; healthy at the start of each."""
    restore(_cluster3_session)
    return _cluster3_session


# A failed real-broker test keeps its run directories: CI's temporary directories are gone when
# it ends, and a rare anomaly (a duplicate seen once in a full run) needs its evidence.
EVIDENCE = Path(os.environ.get("KCHAOS_TEST_EVIDENCE")
                or Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "kchaos-test-evidence")
EVIDENCE_MAX_BYTES = 200 * 1024 * 1024  # per failed test
EVIDENCE_KEEP = 20  # failed tests kept, newest first


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    tmp_path = item.funcargs.get("tmp_path") if hasattr(item, "funcargs") else None
    if report.when != "call" or not report.failed or tmp_path is None:
        return
    runs = [p.parent for p in Path(tmp_path).rglob("campaign.json")]
    if not runs:
        return
    target = EVIDENCE / f"{time.strftime('%Y%m%dT%H%M%S')}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', item.name)[:80]}"
    kept, size = [], 0
    for run in runs:
        try:  # files of processes still running may change or vanish meanwhile: keep what can be
            run_size = sum(f.stat().st_size for f in run.rglob("*") if f.is_file())
            if size + run_size > EVIDENCE_MAX_BYTES:
                continue
            shutil.copytree(run, target / run.name, symlinks=True, ignore_dangling_symlinks=True)
        except (OSError, shutil.Error) as exc:
            kept.append(f"{run.name} (partly: {str(exc)[:200]})")
            continue
        kept.append(run.name)
        size += run_size
    if kept:
        report.sections.append(("kchaos evidence", f"run directories kept in {target}: {', '.join(kept)}"))
    for old in sorted(EVIDENCE.iterdir() if EVIDENCE.is_dir() else [])[:-EVIDENCE_KEEP]:  # names start with the time
        shutil.rmtree(old, ignore_errors=True)
