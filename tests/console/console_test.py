"""The operator console in headless Chromium, driven by Selenium: one browser session through
every page. Run by tests/console.rs against a real gateway, Redis and backend; the tenant named
by CONSOLE_REFUSED has just been refused (its burst spent), CONSOLE_RETRY_AFTER is the
Retry-After of that refusal.

Environment: CONSOLE_ADMIN (http://127.0.0.1:P of the admin listener), CONSOLE_TOKEN,
CONSOLE_PROXY (http://127.0.0.1:P of the proxy), CONSOLE_API_KEY (the refused tenant's key),
CONSOLE_REFUSED, CONSOLE_RETRY_AFTER, CONSOLE_BURST, CONSOLE_XSS_ID (a tenant id full of markup
and quotes), CONSOLE_SHOTS (where the screenshots go). Exit status 0 when every check passed;
on failure the message and a screenshot of the page at the time (failure.png).
"""

import os
import shutil
import sys
import tempfile
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

ENV = os.environ
ADMIN = ENV["CONSOLE_ADMIN"]
SHOTS = ENV["CONSOLE_SHOTS"]
PROFILE = tempfile.mkdtemp(prefix="console-chromium-")  # removed on exit
WAIT_S = 30  # generous: the machine may be loaded; the checks are on content, not timing


def log(msg):
    print(f"console: {msg}", flush=True)


def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = ENV.get("CONSOLE_CHROMIUM", "/usr/bin/chromium")
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in CI
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,1000",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        f"--user-data-dir={PROFILE}",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=ENV.get("CONSOLE_CHROMEDRIVER", "/usr/bin/chromedriver"))
    return webdriver.Chrome(service=service, options=opts)


class Console:
    def __init__(self, driver):
        self.d = driver

    def wait(self, condition):
        return WebDriverWait(self.d, WAIT_S).until(condition)

    def find(self, css):
        return self.wait(EC.visibility_of_element_located((By.CSS_SELECTOR, css)))

    def shot(self, name):
        path = os.path.join(SHOTS, f"console-{name}.png")
        # The whole page: grow the window to the document's height first.
        height = self.d.execute_script("return document.documentElement.scrollHeight")
        self.d.set_window_size(1280, max(700, min(int(height) + 200, 2600)))
        self.d.save_screenshot(path)
        self.d.set_window_size(1280, 1000)
        log(f"screenshot {path}")

    def cells(self, table_css, column):
        """The text of column `column` (its heading) in every row of the table."""
        table = self.find(table_css)
        heads = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
        i = heads.index(column)
        return [
            row.find_elements(By.CSS_SELECTOR, "td")[i].text
            for row in table.find_elements(By.CSS_SELECTOR, "tbody tr")
        ]

    def no_alert(self):
        try:
            WebDriverWait(self.d, 1).until(EC.alert_is_present())
        except TimeoutException:
            return
        text = self.d.switch_to.alert.text
        raise AssertionError(f"a script ran: alert({text!r})")

    def nav(self, title):
        self.d.find_element(By.LINK_TEXT, title).click()


def proxy_get(path, key):
    req = urllib.request.Request(ENV["CONSOLE_PROXY"] + path, headers={"x-api-key": key})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def main(c):
    d = c.d
    refused, burst = ENV["CONSOLE_REFUSED"], int(ENV["CONSOLE_BURST"])
    retry_after = int(ENV["CONSOLE_RETRY_AFTER"])

    # Sign in: the token is asked once and kept for the tab.
    d.get(ADMIN + "/ui")
    c.find("#login input[name=token]").send_keys(ENV["CONSOLE_TOKEN"])
    c.shot("login")
    c.find("#login button").click()
    c.find("#tiers")
    assert d.execute_script("return sessionStorage.length") == 1, "token not kept for the tab"
    assert "token scope: write" in c.find("#who").text

    # Overview: the refused tenant is listed; follow it.
    link = c.wait(
        EC.element_to_be_clickable(
            (By.XPATH, f"//*[@id='refused-tenants']//a[normalize-space()='{refused}']")
        )
    )
    # The markup tenant is listed too, as text (its link text is the id, character for character).
    listed = [a.text for a in d.find_elements(By.CSS_SELECTOR, "#refused-tenants a")]
    assert ENV["CONSOLE_XSS_ID"] in listed and refused in listed, listed
    c.no_alert()
    assert c.find("#breaker").text == "closed"
    assert c.find("#reload-result").text == "succeeded"
    c.shot("overview")
    link.click()

    # Tenant: the main policy refuses, with the Retry-After the proxy gave.
    c.find("#policies")
    assert c.find("#tenant-id").text == refused
    states = c.cells("#policies", "state")
    assert states[0] == "refusing", states
    shown = int(c.cells("#policies", "Retry-After")[0].split()[0])
    # The same wait, less the seconds since the refusal (wide margin: a loaded machine).
    assert retry_after - 600 < shown <= retry_after + 1, (shown, retry_after)
    assert c.cells("#policies", "remaining")[0] == "0"
    # A page view debits nothing: two more views, the same remaining.
    d.refresh()
    c.find("#policies")
    assert c.cells("#policies", "remaining")[0] == "0"
    c.shot("tenant")

    # Reset (two clicks), then the tenant is admitted again.
    c.find("#reset-button").click()
    c.find("#reset-confirm").click()
    c.find("#reset-done")
    assert c.cells("#policies", "state")[0] == "admits"
    assert c.cells("#policies", "remaining")[0] == str(burst)
    status = proxy_get("/orders/1", ENV["CONSOLE_API_KEY"])
    assert status == 200, f"after the reset the proxy answered {status}"
    d.refresh()
    c.find("#policies")
    assert c.cells("#policies", "remaining")[0] == str(burst - 1)

    # Explain: a request with the tenant's key, layer by layer.
    c.nav("Explain")
    form = c.find("#explain-form")
    form.find_element(By.NAME, "path").clear()
    form.find_element(By.NAME, "path").send_keys("/orders/1")
    form.find_element(By.NAME, "host").send_keys("api.example.com")
    form.find_element(By.NAME, "client_ip").send_keys("203.0.113.7")
    form.find_element(By.NAME, "headers").send_keys("x-api-key: " + ENV["CONSOLE_API_KEY"])
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    outcome = c.find("#explain-outcome").text
    assert outcome.endswith("→ 200"), outcome
    layers = [e.get_attribute("data-layer") for e in d.find_elements(By.CSS_SELECTOR, "[data-layer]")]
    assert layers == ["edge", "route", "identity", "tenant", "upstream"], layers
    c.shot("explain")

    # A tenant id of markup and quotes is shown as text: no script runs, the text is there.
    xss = ENV["CONSOLE_XSS_ID"]
    c.nav("Tenant")
    field = c.find("#tenant-search input[name=id]")
    field.clear()
    field.send_keys(xss)
    c.find("#tenant-search button").click()
    c.wait(EC.text_to_be_present_in_element((By.ID, "tenant-id"), xss))
    c.find("#policies")
    c.no_alert()
    assert c.find("#tenant-id").text == xss
    assert c.cells("#policies", "state")[0] == "refusing"
    assert xss in d.find_element(By.TAG_NAME, "body").text
    scripts = d.find_elements(By.TAG_NAME, "script")
    assert len(scripts) == 1, f"{len(scripts)} script elements"
    c.shot("tenant-escaping")

    # The Content-Security-Policy was never violated (nothing inline, nothing remote).
    violations = [
        e["message"] for e in d.get_log("browser") if "Content Security Policy" in e["message"]
    ]
    assert not violations, violations
    log("every check passed")


if __name__ == "__main__":
    os.makedirs(SHOTS, exist_ok=True)
    driver = browser()
    try:
        main(Console(driver))
    except Exception as e:  # noqa: BLE001 - report any failure with a screenshot
        log(f"FAILED: {type(e).__name__}: {e}")
        try:
            driver.save_screenshot(os.path.join(SHOTS, "failure.png"))
            log("page text: " + driver.find_element(By.TAG_NAME, "body").text[:2000])
        except Exception:  # noqa: BLE001
            pass
        sys.exit(1)
    finally:
        driver.quit()
        shutil.rmtree(PROFILE, ignore_errors=True)
