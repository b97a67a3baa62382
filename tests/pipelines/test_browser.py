"""The Dagster UI in a real browser: a round of the toy topic is materialised (fake LLM) into a
DAGSTER_HOME, `make ui`'s entry point serves it, and headless Chromium (Debian's chromium +
chromium-driver through Selenium; nothing is downloaded) opens the asset graph and the
feedback_summary partition: the verdict table shows every idea's verdict and every image in the
metadata (the progress plot) renders. Screenshots go to tests/artifacts/browser/, also on failure."""
import os
import shutil
import urllib.parse
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pytest

from assets import ROUND_ASSETS, TOPIC_ASSETS
from resources.paths import REPO_ROOT
from resources.store import Store
from schemas.frames import from_frame
from schemas.records import Feedback
from tests.support import paths
from tests.support.resources import make_resources
from tests.support.rounds import TOPIC, materialize_round, materialize_topic
from tests.support.system_deps import apt_install_or_skip
from tests.support.ui import _graphql, running_ui

ARTIFACTS = paths.TESTS / "artifacts" / "browser"
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
PARTITION = f"r1|{TOPIC}"
WAIT_S = 150  # dagster dev + chromium on 2 busy cores: a page can take a minute


def image_entries(metadata: dict) -> list[str]:
    """Labels of metadata entries that hold an image (Markdown with ![..](..))."""
    return [k for k, v in metadata.items() if isinstance(v, dg.MarkdownMetadataValue) and "![" in (v.md_str or "")]


def start_chromium():
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        apt_install_or_skip("chromium", "chromium-driver")
    pytest.importorskip("selenium", reason="selenium is in the test extra of pyproject.toml")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never fetch a browser or driver
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run",
                "--disable-extensions", "--disable-background-networking", "--window-size=1920,1200"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    driver.set_page_load_timeout(WAIT_S)
    return driver


class Pages:
    """Opens UI pages, waits for them to render, saves screenshots."""

    def __init__(self, driver, base_url: str):
        self.driver, self.base, self.step = driver, base_url, "start"

    def wait(self, condition, what: str):
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        # an element the condition found can leave the page before the condition reads it (the UI
        # re-renders; a closing dialog's backdrop goes): that poll counts as not yet, the next one looks again
        return WebDriverWait(self.driver, WAIT_S, poll_frequency=2,
                             ignored_exceptions=(StaleElementReferenceException,)).until(condition,
                                                                                          f"{self.step}: {what}")

    def open(self, step: str, path: str, texts: list[str], absent: tuple[str, ...] = ()) -> None:
        """Go to `path` and wait until every one of `texts` and none of `absent` is in the visible page text."""
        from selenium.webdriver.common.by import By

        self.step = step
        self.driver.get(self.base + path)
        body = lambda d: d.find_element(By.TAG_NAME, "body").text  # noqa: E731
        self.wait(lambda d: (lambda b: all(t in b for t in texts) and not any(t in b for t in absent))(body(d)),
                  f"never showed all of {texts} without {list(absent)}; page text: {body(self.driver)[-1500:]!r}")

    def shot(self, name: str) -> None:
        self.driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))

    @contextmanager
    def recording_failures(self):
        try:
            yield
        except BaseException:
            self.shot(f"FAILED-{self.step}")
            (ARTIFACTS / f"FAILED-{self.step}.html").write_text(self.driver.page_source)
            raise


def metadata_row(driver, label: str):
    from selenium.webdriver.common.by import By

    return driver.find_element(By.XPATH, f"//tr[td[1][normalize-space()='{label}']]")


@pytest.mark.slow
def test_ui_shows_asset_graph_verdicts_and_plot_in_chromium(home, fake_llm):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    dh = home / "dagster_home"
    (dh / "dagster.yaml").write_text((REPO_ROOT / "dagster_home" / "dagster.yaml").read_text())
    resources = make_resources(fake_llm.base_url)
    with dg.DagsterInstance.get() as instance:
        materialize_topic(instance, resources)
        assert materialize_round(instance, resources, "r1").success
        meta = instance.get_latest_materialization_event(dg.AssetKey("feedback_summary")).asset_materialization.metadata
    feedback = from_frame(Store().read("feedback_summary", TOPIC, "r1"), Feedback)
    assert feedback
    images = image_entries(meta)
    assert "progress_plot" in images, list(meta)

    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    no_topics = home / "no_topics"  # the sensors find nothing to start while the UI is up
    no_topics.mkdir()
    driver = start_chromium()
    try:
        with running_ui(dh, no_topics, env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1",  # nothing may call an LLM
                                            "OPENAI_API_KEY": "unused"}) as (_, port, _data):
            assert _graphql(port, "mutation { setNuxSeen }")["data"]["setNuxSeen"]  # no "join us" dialog
            pages = Pages(driver, f"http://127.0.0.1:{port}")
            with pages.recording_failures():
                pages.open("01-global-lineage", "/asset-groups", ["Global asset lineage", "topic", "round"],
                           absent=("fetching statuses",))
                pages.shot("01-global-lineage")

                names = [a.key.to_user_string() for a in ROUND_ASSETS + TOPIC_ASSETS]
                pages.open("02-round-asset-graph", "/locations/researchloop/asset-groups/round", names,
                           absent=("fetching statuses",))
                pages.shot("02-round-asset-graph")

                pages.open("03-feedback-partition",
                           "/assets/feedback_summary?view=partitions&partition=" + urllib.parse.quote(PARTITION),
                           [PARTITION, "verdicts", *[f.idea_id for f in feedback]])
                row = metadata_row(driver, "verdicts")
                driver.execute_script("arguments[0].scrollIntoView({block: 'center', inline: 'start'})",
                                      row.find_element(By.XPATH, "./td[1]"))  # the label column stays in view
                if not row.find_elements(By.TAG_NAME, "table"):  # a wide table is behind its "Show Markdown" link
                    row.find_element(By.XPATH, ".//a[contains(., 'Show Markdown')]").click()

                def verdict_table(d):
                    return next((t for t in d.find_elements(By.TAG_NAME, "table") if t.is_displayed()
                                 and [th.text for th in t.find_elements(By.XPATH, "./thead/tr/th")][:2]
                                 == ["idea_id", "verdict"]), False)
                table = pages.wait(verdict_table, "the verdict table never rendered")
                header = [th.text for th in table.find_elements(By.XPATH, "./thead/tr/th")]
                assert header[:2] == ["idea_id", "verdict"], header
                cells = [[td.text for td in tr.find_elements(By.XPATH, "./td")]
                         for tr in table.find_elements(By.XPATH, "./tbody/tr")]
                shown = {c[0]: c[1] for c in cells}
                assert shown == {f.idea_id: f.verdict for f in feedback}
                pages.shot("03-feedback-partition")
                driver.switch_to.active_element.send_keys(Keys.ESCAPE)  # close the dialog, if one opened
                pages.wait(lambda d: not [b for b in d.find_elements(By.CSS_SELECTOR, ".bp5-overlay-backdrop")
                                          if b.is_displayed()], "the verdict table's dialog never closed")

                for label in images:  # each image entry renders as a loaded <img> (inline or in its dialog)
                    pages.step = f"04-{label}"
                    row = metadata_row(driver, label)
                    if not row.find_elements(By.CSS_SELECTOR, "img[src^='data:image']"):
                        row.find_element(By.XPATH, ".//a[contains(., 'Show Markdown')]").click()
                    def rendered(d):
                        return next((i for i in d.find_elements(By.CSS_SELECTOR, "img[src^='data:image']")
                                     if i.is_displayed() and int(i.get_attribute("naturalWidth") or 0) > 0), False)
                    img = pages.wait(rendered, f"the image of {label} never rendered")
                    assert int(img.get_attribute("naturalHeight")) > 100
                    pages.shot(f"04-{label}")
                    driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
    finally:
        driver.quit()
        if (dh / "ui.log").exists():
            shutil.copy(dh / "ui.log", ARTIFACTS / "ui.log")
    assert sorted(p.name for p in ARTIFACTS.glob("*.png")) == sorted(
        ["01-global-lineage.png", "02-round-asset-graph.png", "03-feedback-partition.png",
         *[f"04-{label}.png" for label in images]])
