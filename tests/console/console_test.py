"""The operator console in headless Chromium, driven by Selenium: one browser session through
every page. Run by tests/console.rs against a real gateway, Redis and backend; the tenant named
by CONSOLE_REFUSED has just been refused (its burst spent), CONSOLE_RETRY_AFTER is the
Retry-After of that refusal.

Environment: CONSOLE_ADMIN (http://127.0.0.1:P of the admin listener), CONSOLE_TOKEN,
CONSOLE_PROXY (http://127.0.0.1:P of the proxy), CONSOLE_API_KEY (the refused tenant's key),
CONSOLE_REFUSED, CONSOLE_RETRY_AFTER, CONSOLE_BURST, CONSOLE_XSS_ID (a tenant id full of markup
and quotes), CONSOLE_READ_TOKEN (a read-scoped token), CONSOLE_KEY_TENANT and CONSOLE_KEY_TIER
(of the keys the test issues), CONSOLE_SHOTS (where the screenshots go). Exit status 0 when every check passed;
on failure the message and a screenshot of the page at the time (failure.png).
"""

import json
import os
import shutil
import sys
import tempfile
import time
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

ENV = os.environ
ADMIN = ENV["CONSOLE_ADMIN"]
SHOTS = ENV["CONSOLE_SHOTS"]
PROFILE = tempfile.mkdtemp(prefix="console-chromium-")  # removed on exit
WAIT_S = 30  # generous: the machine may be loaded; the checks are on content, not timing
# Any element that writes: every write control carries data-write; the ids and actions are named
# too, so a control made without the marker is still found.
WRITE_CONTROLS = (
    "[data-write], #reset-button, #reset-confirm, #key-create, #block-add, #limits-set, [data-action]"
)


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

    def search(self, form, name, tenant, shown_id):
        """Types `tenant` into input `name` of the search form `form` (a CSS selector), submits
        it, and waits until the element `shown_id` shows that tenant."""
        field = self.find(f"{form} input[name={name}]")
        field.clear()
        field.send_keys(tenant)
        self.find(f"{form} button").click()
        self.wait(EC.text_to_be_present_in_element((By.ID, shown_id), tenant))

    def nav(self, title):
        self.d.find_element(By.LINK_TEXT, title).click()

    def write_controls(self):
        return self.d.find_elements(By.CSS_SELECTOR, WRITE_CONTROLS)

    def minute_sums(self):
        """{(tier, outcome): sum over the minutes} of the overview's last-minutes table."""
        out = {}
        for row in self.find("#per-minute").find_elements(By.CSS_SELECTOR, "tbody tr"):
            cells = [td.text for td in row.find_elements(By.CSS_SELECTOR, "td")]
            key = (row.get_attribute("data-tier"), row.get_attribute("data-outcome"))
            out[key] = sum(int(x) for x in cells[2:])
        return out

    def key_row(self, name):
        rows = self.d.find_elements(By.CSS_SELECTOR, f"#keys tr[data-key-name='{name}']")
        return rows[0] if rows else None

    def block_row(self, kind, value):
        for row in self.d.find_elements(By.CSS_SELECTOR, "#blocks tr[data-block-type]"):
            if row.get_attribute("data-block-type") == kind and row.get_attribute("data-block-value") == value:
                return row
        return None

    def create_key(self, tenant, tier, name, expires=None):
        """Creates a key through the form; its secret, read from the shown-once field."""
        form = self.find("#key-create")
        field = form.find_element(By.NAME, "tenant")
        field.clear()
        field.send_keys(tenant)
        Select(form.find_element(By.NAME, "tier")).select_by_value(tier)
        form.find_element(By.NAME, "name").send_keys(name)
        if expires:
            Select(form.find_element(By.NAME, "expires")).select_by_visible_text(expires)
        form.find_element(By.ID, "key-create-button").click()
        self.wait(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#key-secret-box h2"), name))
        note = self.find("#key-secret-note").text
        assert note.startswith("Shown once"), note
        secret = self.find("#key-secret").get_attribute("value")
        assert secret.startswith("tg_") and len(secret) == 46, secret
        assert self.key_row(name) is not None, f"{name} not listed"
        return secret


def proxy_get(path, key):
    req = urllib.request.Request(ENV["CONSOLE_PROXY"] + path, headers={"x-api-key": key})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def proxy_becomes(key, status):
    """Polls the proxy with `key` until it answers `status` (a change reaches the instance
    within store.propagation; a generous deadline); whether it did."""
    deadline = time.monotonic() + 20
    while True:
        if proxy_get("/orders/1", key) == status:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def api(method, path, token, body=None):
    """The admin API, outside the browser: (status, JSON body)."""
    req = urllib.request.Request(ADMIN + path, method=method, headers={"Authorization": "Bearer " + token})
    if body is not None:
        req.data = json.dumps(body).encode()
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, None


def page_fetch(d, method, path, body=None):
    """A call from the page's own script context with the tab's token: the status."""
    return d.execute_async_script(
        """
        const [method, path, body, done] = arguments;
        const headers = { Authorization: 'Bearer ' + sessionStorage.getItem('tollgate-admin-token') };
        const init = { method, headers };
        if (body !== null) { headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
        fetch(path, init).then((r) => done(r.status), (e) => done(String(e)));
        """,
        method,
        path,
        body,
    )


def check_minutes(c, token):
    """The overview's last minutes are the API's: the same sums, and the sum of the refusals
    is the counter's total (the process is younger than the window)."""
    status, s = api("GET", "/v1/status", token)
    assert status == 200, status
    shown = c.minute_sums()
    for tier in s["tiers"]:
        for outcome in ("decisions", "limited", "fallback", "failed_open", "failed_closed"):
            want = sum(m[outcome] for m in tier["last_minutes"])
            assert shown[(tier["name"], outcome)] == want, (tier["name"], outcome, shown, want)
        limited = tier["decisions"].get("tenant", {}).get("limited", 0)
        assert shown[(tier["name"], "limited")] == limited, (tier["name"], shown, limited)
    return shown


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
    # Refusals per tier over the last minutes: both refused free tenants, as the API counts them.
    shown = check_minutes(c, ENV["CONSOLE_TOKEN"])
    assert shown[("free", "limited")] == 2, shown
    # A refresh reads again and debits nothing: the same numbers.
    d.find_element(By.XPATH, "//button[normalize-space()='Refresh']").click()
    c.find("#tiers")
    assert check_minutes(c, ENV["CONSOLE_TOKEN"]) == shown
    c.shot("overview")
    link = c.wait(
        EC.element_to_be_clickable(
            (By.XPATH, f"//*[@id='refused-tenants']//a[normalize-space()='{refused}']")
        )
    )
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
    c.search("#tenant-search", "id", xss, "tenant-id")
    c.find("#policies")
    c.no_alert()
    assert c.find("#tenant-id").text == xss
    assert c.cells("#policies", "state")[0] == "refusing"
    assert xss in d.find_element(By.TAG_NAME, "body").text
    scripts = d.find_elements(By.TAG_NAME, "script")
    assert len(scripts) == 1, f"{len(scripts)} script elements"
    c.shot("tenant-escaping")

    spare = keys(c)
    blocks(c, spare)
    limits(c)
    read_only(c)

    # The Content-Security-Policy was never violated (nothing inline, nothing remote).
    violations = [
        e["message"] for e in d.get_log("browser") if "Content Security Policy" in e["message"]
    ]
    assert not violations, violations
    log("every check passed")


def keys(c):
    """The keys page: create (secret shown once), use, rotate with grace, revoke; paging; an id
    of markup."""
    d = c.d
    tenant, tier = ENV["CONSOLE_KEY_TENANT"], ENV["CONSOLE_KEY_TIER"]
    c.nav("Keys")
    search = c.find("#keys-search")
    search.find_element(By.NAME, "tenant").send_keys(tenant)
    search.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    c.wait(EC.text_to_be_present_in_element((By.ID, "keys-tenant"), tenant))
    assert c.find("#keys").text.startswith("No keys"), c.find("#keys").text
    assert c.write_controls(), "a write token sees the create form"

    # Create: the secret is in a field of its own, with the note; the list has the key, not it.
    spare = c.create_key(tenant, tier, "deploy", expires="30 days")
    c.find("#key-secret-done").click()
    secret = c.create_key(tenant, tier, "ci")
    assert secret != spare
    row = c.key_row("ci")
    assert secret not in row.text and "active" in row.text, row.text
    assert "never" in row.text and "never" not in c.key_row("deploy").text
    c.shot("keys")
    assert proxy_becomes(secret, 200), "the new key was not admitted"
    # Shown once: kept nowhere (the tab's storage holds the token only); gone with Done, and not
    # shown again on a return to the page or a reload.
    assert d.execute_script("return sessionStorage.length + localStorage.length") == 1
    assert d.execute_script("return document.cookie") == ""
    c.find("#key-secret-done").click()
    c.wait(EC.invisibility_of_element_located((By.ID, "key-secret")))
    assert not d.find_elements(By.ID, "key-secret") and secret not in d.page_source
    c.nav("Overview")
    c.find("#tiers")
    d.back()
    c.find("#keys")
    assert not d.find_elements(By.ID, "key-secret"), "the secret was shown again"
    d.refresh()
    c.find("#keys")
    assert not d.find_elements(By.ID, "key-secret") and secret not in d.page_source

    # Rotate with a grace period: a new secret, shown once; both work during the grace.
    c.key_row("ci").find_element(By.CSS_SELECTOR, "[data-action=rotate]").click()
    grace = c.key_row("ci").find_element(By.NAME, "grace")
    grace.clear()
    grace.send_keys("600")
    c.key_row("ci").find_element(By.CSS_SELECTOR, "[data-action=rotate-confirm]").click()
    c.wait(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#key-secret-box h2"), "New secret"))
    rotated = c.find("#key-secret").get_attribute("value")
    assert rotated.startswith("tg_") and rotated != secret
    assert c.cells("#keys", "old secret until")[c.cells("#keys", "name").index("ci")] != "—"
    assert proxy_becomes(rotated, 200), "the rotated secret was not admitted"
    assert proxy_get("/orders/1", secret) == 200, "the old secret within its grace"

    # Revoke (two clicks): gone from the list, and both secrets are refused.
    c.key_row("ci").find_element(By.CSS_SELECTOR, "[data-action=revoke]").click()
    c.key_row("ci").find_element(By.CSS_SELECTOR, "[data-action=revoke-confirm]").click()
    assert "Revoked key ci" in c.find("#keys-notice").text
    assert c.key_row("ci") is None and c.key_row("deploy") is not None
    assert rotated not in d.page_source
    assert proxy_becomes(rotated, 401), "the revoked key is still admitted"
    assert proxy_becomes(secret, 401), "the revoked key's old secret is still admitted"

    # An id of markup and quotes: shown as text; two keys, one a page.
    xss = ENV["CONSOLE_XSS_ID"]
    search = c.find("#keys-search")
    field = search.find_element(By.NAME, "tenant")
    field.clear()
    field.send_keys(xss)
    limit = search.find_element(By.NAME, "limit")
    limit.clear()
    limit.send_keys("1")
    search.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    c.wait(EC.text_to_be_present_in_element((By.ID, "keys-tenant"), xss))
    c.create_key(xss, "free", "b")
    c.find("#key-secret-done").click()
    c.create_key(xss, "free", "a")
    c.no_alert()
    assert c.find("#keys-tenant").text == xss
    # A name of markup is refused by the API; its problem is text too.
    form = c.find("#key-create")
    form.find_element(By.NAME, "name").send_keys(xss)
    form.find_element(By.ID, "key-create-button").click()
    error = c.find("#key-create-result .error").text
    assert error.startswith("HTTP 400: name:"), error
    c.no_alert()
    assert len(d.find_elements(By.TAG_NAME, "script")) == 1
    c.shot("keys-escaping")
    # Paging: the per-page limit survives the secret's re-render only through the hash.
    d.get(ADMIN + "/ui#/keys/" + urllib.parse.quote(xss, safe="") + "?limit=1")
    d.refresh()
    c.wait(EC.text_to_be_present_in_element((By.ID, "keys-tenant"), xss))
    assert c.cells("#keys", "name") == ["a"], c.cells("#keys", "name")
    c.find("#keys-next").click()
    c.wait(EC.presence_of_element_located((By.ID, "keys-first")))
    assert c.cells("#keys", "name") == ["b"], c.cells("#keys", "name")
    assert not d.find_elements(By.ID, "keys-next")
    c.no_alert()
    return spare


def blocks(c, key):
    """The blocks page: block the test's own network (a CIDR, sent percent-encoded) with a reason
    of markup; the proxy refuses `key` (403), and admits it once the block is removed."""
    d = c.d
    xss = ENV["CONSOLE_XSS_ID"]
    assert proxy_get("/orders/1", key) == 200
    c.nav("Blocks")
    c.find("#blocks")
    assert c.write_controls(), "a write token sees the block form"
    form = c.find("#block-add")
    Select(form.find_element(By.NAME, "type")).select_by_value("ip")
    form.find_element(By.NAME, "value").send_keys("127.0.0.0/8")
    form.find_element(By.NAME, "reason").send_keys(xss)
    Select(form.find_element(By.NAME, "expires")).select_by_visible_text("1 hour")
    form.find_element(By.ID, "block-add-button").click()
    assert "Blocked ip 127.0.0.0/8" in c.find("#blocks-notice").text
    row = c.block_row("ip", "127.0.0.0/8")
    assert row is not None, "the block is not listed"
    assert c.cells("#blocks", "reason") == [xss], c.cells("#blocks", "reason")
    c.no_alert()
    assert len(d.find_elements(By.TAG_NAME, "script")) == 1
    status, listed = api("GET", "/v1/blocks?type=ip", ENV["CONSOLE_TOKEN"])
    assert status == 200 and [b["reason"] for b in listed["blocks"]] == [xss], listed
    assert proxy_becomes(key, 403), "the blocked network is still admitted"
    # The type filter: no tenant blocks.
    Select(c.find("#blocks-filter select")).select_by_value("tenant")
    c.find("#blocks-filter button").click()
    c.wait(EC.text_to_be_present_in_element((By.ID, "blocks"), "No blocks"))
    Select(c.find("#blocks-filter select")).select_by_value("ip")
    c.find("#blocks-filter button").click()
    c.wait(EC.presence_of_element_located((By.CSS_SELECTOR, "#blocks tr[data-block-type=ip]")))
    c.shot("blocks")

    # Remove (two clicks): gone from the list and admitted again.
    c.block_row("ip", "127.0.0.0/8").find_element(By.CSS_SELECTOR, "[data-action=unblock]").click()
    c.block_row("ip", "127.0.0.0/8").find_element(By.CSS_SELECTOR, "[data-action=unblock-confirm]").click()
    assert "Removed the block" in c.find("#blocks-notice").text
    assert c.find("#blocks").text.startswith("No blocks"), c.find("#blocks").text
    assert proxy_becomes(key, 200), "the removed block still refuses"


def limits(c):
    """The limits page: set a tenant's override, see the API return it, clear it; a tenant id of
    markup as text."""
    d = c.d
    tenant, token = ENV["CONSOLE_KEY_TENANT"], ENV["CONSOLE_TOKEN"]
    c.nav("Limits")
    c.search("#limits-search", "tenant", tenant, "limits-tenant")
    assert c.find("#limits-override").text.startswith("None"), c.find("#limits-override").text
    form = c.find("#limits-set")
    for name, value in [("limit", "600"), ("per", "1m"), ("burst", "600"), ("quotas", "month=200000")]:
        form.find_element(By.NAME, name).send_keys(value)
    Select(form.find_element(By.NAME, "expires")).select_by_visible_text("1 hour")
    form.find_element(By.ID, "limits-set-button").click()
    assert c.find("#limits-notice").text.startswith("Override set"), c.find("#limits-notice").text
    c.wait(EC.presence_of_element_located((By.CSS_SELECTOR, "#limits-override dl")))
    assert "600" in c.find("#limits-override").text and "month 200000" in c.find("#limits-override").text
    status, got = api("GET", "/v1/tenants/" + tenant + "/limits", token)
    assert status == 200, status
    o = got["override"]
    assert (o["limit"], o["per"], o["burst"], o["quotas"]) == (600, "1m", 600, {"month": 200000}), o
    assert o["expires_at"], o
    c.shot("limits")
    # A bad value: the API's problem, as text; the override in force is unchanged.
    form = c.find("#limits-set")
    form.find_element(By.NAME, "per").clear()
    form.find_element(By.NAME, "per").send_keys("2d")
    form.find_element(By.ID, "limits-set-button").click()
    error = c.find("#limits-set-result .error").text
    assert error.startswith("HTTP 400"), error
    assert api("GET", "/v1/tenants/" + tenant + "/limits", token)[1]["override"]["per"] == "1m"

    # Clear (two clicks): none in force.
    c.find("[data-action=limits-clear]").click()
    c.find("[data-action=limits-clear-confirm]").click()
    c.wait(EC.text_to_be_present_in_element((By.ID, "limits-notice"), "Override cleared"))
    assert c.find("#limits-override").text.startswith("None")
    status, got = api("GET", "/v1/tenants/" + tenant + "/limits", token)
    assert status == 200 and got["override"] is None, got

    # A tenant id of markup and quotes: shown as text, sent percent-encoded.
    xss = ENV["CONSOLE_XSS_ID"]
    c.search("#limits-search", "tenant", xss, "limits-tenant")
    c.find("#limits-override")
    c.no_alert()
    assert c.find("#limits-tenant").text == xss
    assert len(d.find_elements(By.TAG_NAME, "script")) == 1


def read_only(c):
    """With a read token: no write control on any page; the API refuses its writes (403)."""
    d = c.d
    c.find("#logout").click()
    c.find("#login input[name=token]").send_keys(ENV["CONSOLE_READ_TOKEN"])
    c.find("#login button").click()
    # Signed in again on the page that was shown.
    c.wait(EC.text_to_be_present_in_element((By.ID, "who"), "token scope: read"))
    pages = [
        ("overview", "#tiers"),
        ("tenant/" + ENV["CONSOLE_REFUSED"], "#policies"),
        ("explain", "#explain-form"),
        ("blocks", "#blocks"),
        ("limits/" + ENV["CONSOLE_KEY_TENANT"], "#limits-override"),
        ("keys/" + ENV["CONSOLE_KEY_TENANT"], "#keys"),  # last: the checks below are on it
    ]
    for page, ready in pages:
        d.get(ADMIN + "/ui#/" + page)
        d.refresh()  # a fresh load: the scope is asked again
        c.find(ready)
        assert "token scope: read" in c.find("#who").text
        found = [e.get_attribute("outerHTML")[:120] for e in c.write_controls()]
        assert not found, (page, found)
        assert not d.find_elements(By.CSS_SELECTOR, "button.danger"), page
    # The list is there, without its actions.
    assert c.key_row("deploy") is not None
    assert "" not in [th.text for th in d.find_elements(By.CSS_SELECTOR, "#keys thead th")]
    c.shot("keys-read-only")
    # The server refuses writes all the same.
    key_id = c.key_row("deploy").get_attribute("data-key-id")
    for method, path, body in [
        ("POST", "/v1/keys", {"tenant": ENV["CONSOLE_KEY_TENANT"], "tier": ENV["CONSOLE_KEY_TIER"], "name": "nope"}),
        ("DELETE", "/v1/keys/" + key_id, None),
        ("POST", "/v1/keys/" + key_id + "/rotate", {"grace_s": 0}),
        ("POST", "/v1/tenants/" + ENV["CONSOLE_REFUSED"] + "/reset", None),
        ("PUT", "/v1/blocks/ip/127.0.0.0%2F8", {"reason": "read token"}),
        ("PUT", "/v1/tenants/" + ENV["CONSOLE_KEY_TENANT"] + "/limits", {"limit": 1, "per": "1h"}),
        ("DELETE", "/v1/tenants/" + ENV["CONSOLE_KEY_TENANT"] + "/limits", None),
    ]:
        status = page_fetch(d, method, path, body)
        assert status == 403, (method, path, status)
    status, k = api("GET", "/v1/keys/" + key_id, ENV["CONSOLE_TOKEN"])
    assert status == 200 and k["status"] == "active" and k["rotated_at"] is None, k
    status, listed = api("GET", "/v1/blocks", ENV["CONSOLE_TOKEN"])
    assert status == 200 and listed["blocks"] == [], listed
    status, got = api("GET", "/v1/tenants/" + ENV["CONSOLE_KEY_TENANT"] + "/limits", ENV["CONSOLE_TOKEN"])
    assert status == 200 and got["override"] is None, got


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
