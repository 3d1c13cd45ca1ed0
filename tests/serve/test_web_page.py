"""The web page of `tfm serve` in a real browser: Debian's chromium, driven through
chromedriver by Selenium (python3-selenium, chromium-driver; scripts/install-deps.sh).
The page must show what the API answers: the translation of /v1/translate, and each
heatmap cell the weight /v1/attention returns. A screenshot goes to $TFM_SCREENSHOT."""
import json
import os

import pytest
from selenium import webdriver
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from test_serve import BERT, LM, MT, VIT, Server, fashion_images, png


@pytest.fixture(scope="module")
def server():
    s = Server("--model", MT, "--model", f"lm={LM}", "--model", BERT, "--model", VIT)
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,1600"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path="/usr/bin/chromedriver"))
    yield driver
    driver.quit()


def open_page(browser, server, model):
    browser.get(f"http://127.0.0.1:{server.port}/")
    WebDriverWait(browser, 30).until(lambda d: len(Select(d.find_element(By.ID, "model")).options) == 4)
    Select(browser.find_element(By.ID, "model")).select_by_value(model)


def run(browser):
    browser.find_element(By.ID, "run").click()
    WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "table.heatmap") or d.find_element(By.ID, "error").text)
    assert browser.find_element(By.ID, "error").text == ""


def cells(browser, layer, head):
    """The heatmap of (layer, head) as the page shows it: [query][key] weights."""
    table = browser.find_element(By.CSS_SELECTOR, f'table.heatmap[data-layer="{layer}"][data-head="{head}"]')
    rows = browser.execute_script(
        "return [...arguments[0].rows].map(r => [...r.cells].map(c => Number(c.dataset.weight)))", table)
    return rows


def close(a, b, tolerance=1e-6):
    return len(a) == len(b) and all(len(x) == len(y) and all(abs(p - q) <= tolerance for p, q in zip(x, y)) for x, y in zip(a, b))


def test_a_translation_and_its_attention_as_the_api_gives_them(server, browser):
    sentence = "Ein Mann fährt Fahrrad auf der Straße."
    open_page(browser, server, "mt")
    text = browser.find_element(By.ID, "text")
    text.clear()
    text.send_keys(sentence)
    run(browser)
    shown = browser.find_element(By.ID, "output").text
    assert shown == server.post("/v1/translate", {"sentences": [sentence]})[2]["translations"][0]["text"]
    api = server.post("/v1/attention", {"model": "mt", "text": sentence})[2]
    assert api["translation"] == shown
    last = len(api["cross"]) - 1
    heads = len(api["cross"][last])
    for head in range(heads):  # the page opens on the last layer's encoder-decoder attention
        assert close(cells(browser, last, head), api["cross"][last][head])
    Select(browser.find_element(By.ID, "kind")).select_by_visible_text("encoder self-attention")
    Select(browser.find_element(By.ID, "layer")).select_by_value("0")
    assert close(cells(browser, 0, 1), api["encoder"][0][1])
    # hovering a query token shades the key tokens by what it attends to
    query = browser.find_elements(By.CSS_SELECTOR, '.tokens[data-side="query"] .token')[1]
    ActionChains(browser).move_to_element(query).perform()
    shaded = [k.value_of_css_property("background-color") for k in browser.find_elements(By.CSS_SELECTOR, '.tokens[data-side="key"] .token')]
    assert len(shaded) == len(api["source_tokens"]) and any(c != "rgba(0, 0, 0, 0)" for c in shaded)
    browser.save_screenshot(os.environ.get("TFM_SCREENSHOT", "web_page.png"))


def test_a_continuation_and_an_encoders_attention(server, browser):
    open_page(browser, server, "lm")
    text = browser.find_element(By.ID, "text")
    text.clear()
    text.send_keys("ROMEO:")
    run(browser)
    api = server.post("/v1/attention", {"model": "lm", "text": "ROMEO:", "max_new_tokens": 20})[2]
    assert browser.find_element(By.ID, "output").text == api["text"].strip() or browser.find_element(By.ID, "output").get_attribute("textContent") == api["text"]
    assert close(cells(browser, len(api["decoder"]) - 1, 0), api["decoder"][-1][0])
    # the review's F4: a character LM's 26 tokens are drawn at most ~440 px tall, each token on its line's row
    svg = browser.find_element(By.CSS_SELECTOR, "#lines svg")
    assert int(svg.get_attribute("height")) <= 450
    tokens = browser.find_elements(By.CSS_SELECTOR, '.tokens[data-side="query"] .token')
    assert abs(tokens[-1].rect["y"] + tokens[-1].rect["height"] - (svg.rect["y"] + svg.rect["height"])) <= 1
    # and the API key's placeholder fits its field
    fits = browser.execute_script(
        "const i = document.getElementById('key'), c = document.createElement('canvas').getContext('2d');"
        "const s = getComputedStyle(i); c.font = s.font;"
        "return c.measureText(i.placeholder).width <= i.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);")
    assert fits
    open_page(browser, server, "bert")
    run(browser)
    api = server.post("/v1/attention", {"model": "bert", "text": "Ein Mann fährt Fahrrad."})[2]
    assert close(cells(browser, len(api["encoder"]) - 1, 1), api["encoder"][-1][1])


def test_an_images_class_and_where_cls_looks(server, browser, tmp_path):
    image = tmp_path / "shirt.png"
    image.write_bytes(png(fashion_images(1)[0], 28, 28))
    open_page(browser, server, "vit")
    browser.find_element(By.ID, "file").send_keys(str(image))
    run(browser)
    status, _, api = server.post("/v1/classify", image.read_bytes(), {"Content-Type": "image/png"})
    assert browser.find_element(By.ID, "output").text == str(api["results"][0]["label"])
    assert browser.find_element(By.ID, "image").is_displayed()
    attention = server.post("/v1/attention", image.read_bytes(), {"Content-Type": "image/png"})
    assert attention[0] == 400  # several models are served: an image body names its model in the query
    attention = server.post("/v1/attention?model=vit", image.read_bytes(), {"Content-Type": "image/png"})[2]
    assert close(cells(browser, len(attention["encoder"]) - 1, 0), attention["encoder"][-1][0])


def test_the_page_loads_nothing_from_elsewhere(server):
    status, response, page = server.request("GET", "/")
    assert status == 200 and response.getheader("Content-Type").startswith("text/html")
    assert "default-src 'self'" in response.getheader("Content-Security-Policy")
    assert "https://" not in page and "src=\"http" not in page and "href=\"http" not in page
