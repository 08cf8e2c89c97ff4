#!/usr/bin/python3
"""End-to-end test of the web page at / in headless Chromium.

Speaks the W3C WebDriver protocol to chromedriver over loopback with urllib only (no
selenium), so it runs on a fresh Debian with just `chromium` and `chromium-driver`.
Flow: load / -> upload a PDF through the file input -> wait until the page shows the ingest
done -> ask a question -> wait for the streamed answer -> click the first citation -> the
page image with the highlighted box loads -> screenshot.

Usage: web_e2e.py --url http://127.0.0.1:PORT --pdf FILE --out DIR [--copy PNG]
Prints one "ok"/"FAIL" line per step and "N passed, N failed" last; exit 1 on failure.
"""
import argparse
import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # W3C WebDriver element key


class WebDriverError(Exception):
    pass


class Session:
    """A minimal W3C WebDriver client: just the commands this test needs."""

    def __init__(self, base, caps):
        self.base = base
        v = self._call("POST", "/session", {"capabilities": {"alwaysMatch": caps}})
        self.sid = v["sessionId"]

    def _call(self, method, path, body=None, timeout=60):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read() or b"{}").get("value")
        except urllib.error.HTTPError as e:
            try:
                v = json.loads(e.read()).get("value", {})
                msg = "%s: %s" % (v.get("error"), (v.get("message") or "").splitlines()[0])
            except (ValueError, AttributeError, IndexError):
                msg = str(e)
            raise WebDriverError("%s %s -> %s" % (method, path, msg)) from None

    def cmd(self, method, path, body=None):
        return self._call(method, "/session/%s%s" % (self.sid, path), body)

    def get(self, url):
        self.cmd("POST", "/url", {"url": url})

    def find(self, css):
        return self.cmd("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]

    def send_keys(self, eid, text):
        self.cmd("POST", "/element/%s/value" % eid, {"text": text})

    def click(self, eid):
        self.cmd("POST", "/element/%s/click" % eid, {})

    def js(self, script, *args):
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def js_async(self, script, *args):
        return self.cmd("POST", "/execute/async", {"script": script, "args": list(args)})

    def screenshot(self):
        return base64.b64decode(self.cmd("GET", "/screenshot"))

    def quit(self):
        try:
            self.cmd("DELETE", "")
        except (WebDriverError, OSError):
            pass


def wait_for(sess, script, timeout, what):
    """Poll a JS expression until it returns something truthy; return that value."""
    end = time.monotonic() + timeout
    while True:
        v = sess.js("return (" + script + ");")
        if v:
            return v
        if time.monotonic() > end:
            raise TimeoutError("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(0.2)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_chromedriver(driver, logpath):
    port = free_port()
    log = open(logpath, "wb")
    proc = subprocess.Popen([driver, "--port=%d" % port, "--allowed-ips=127.0.0.1"],
                            stdout=log, stderr=subprocess.STDOUT)
    base = "http://127.0.0.1:%d" % port
    end = time.monotonic() + 15
    while time.monotonic() < end:
        if proc.poll() is not None:
            break
        try:
            with urllib.request.urlopen(base + "/status", timeout=2) as r:
                if json.loads(r.read())["value"].get("ready"):
                    return proc, base
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("chromedriver did not become ready (log: %s)" % logpath)


# Counts strongly red pixels (the server draws the box outline in rgb(230,26,26)) inside the
# box and outside it, by drawing the loaded image onto a canvas. Blob URLs are same-origin,
# so the canvas is readable.
RED_PIXELS_JS = """
const img = document.getElementById("pageimg"), box = arguments[0];
const c = document.createElement("canvas");
c.width = img.naturalWidth; c.height = img.naturalHeight;
const g = c.getContext("2d"); g.drawImage(img, 0, 0);
const d = g.getImageData(0, 0, c.width, c.height).data;
const x0 = box[0] * c.width - 4, y0 = box[1] * c.height - 4;
const x1 = box[2] * c.width + 4, y1 = box[3] * c.height + 4;
let inside = 0, outside = 0;
for (let y = 0; y < c.height; y++) for (let x = 0; x < c.width; x++) {
  const i = 4 * (y * c.width + x);
  if (d[i] > 200 && d[i + 1] < 70 && d[i + 2] < 70) {
    if (x >= x0 && x <= x1 && y >= y0 && y <= y1) inside++; else outside++;
  }
}
return [inside, outside];
"""


def run(args):
    results = []

    def step(name, fn):
        try:
            detail = fn()
            results.append(True)
            print("ok   %s%s" % (name, " (%s)" % detail if detail else ""), flush=True)
            return True
        except Exception as e:  # any failure of a step is reported, then we stop
            results.append(False)
            print("FAIL %s: %s" % (name, e), flush=True)
            return False

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or (
        "/usr/lib/chromium/chromedriver" if os.path.exists("/usr/lib/chromium/chromedriver") else None)
    if not chromium or not driver:
        print("FAIL chromium/chromedriver not installed: install the Debian packages "
              "'chromium' and 'chromium-driver' (scripts/deps.sh does)")
        print("0 passed, 1 failed")
        return 1

    profile = tempfile.mkdtemp(prefix="chrome-profile.", dir=args.out)
    drv_proc, drv_base = None, None
    sess = None
    state = {}
    try:
        def start():
            nonlocal drv_proc, drv_base, sess
            drv_proc, drv_base = start_chromedriver(driver, os.path.join(args.out, "chromedriver.log"))
            caps = {"browserName": "chrome", "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless", "--no-sandbox", "--disable-gpu",
                         "--disable-background-networking", "--disable-dev-shm-usage",
                         "--user-data-dir=" + profile, "--window-size=1400,1000",
                         "--force-device-scale-factor=1", "--no-first-run"]}}
            sess = Session(drv_base, caps)
            return "chromium " + sess.js("return navigator.userAgent;").split("Chrome/")[-1].split()[0]

        if not step("start headless chromium via chromedriver", start):
            raise StopIteration

        def load():
            sess.get(args.url + "/")
            title = wait_for(sess, "document.readyState === 'complete' && document.title", 10, "page load")
            if title != "mmrag":
                raise AssertionError("title is %r" % title)
            wait_for(sess, "document.querySelector('#docs li')", 10, "document list")
            return None

        def upload():
            sess.send_keys(sess.find("#file"), os.path.abspath(args.pdf))
            n = sess.js("return document.getElementById('file').files.length;")
            if n != 1:
                raise AssertionError("file input holds %r files" % n)
            sess.click(sess.find("#upbtn"))
            # the page shows the job, polls it, and on success lists the document
            st = wait_for(sess, """(() => {
                const j = document.querySelector('#jobs li[data-status]');
                if (j && (j.dataset.status === 'failed' || j.dataset.status === 'cancelled'))
                  return 'job ' + j.dataset.status + ': ' + j.textContent;
                const d = document.querySelector('#docs li[data-id]');
                return d ? 'ok' : '';
              })()""", 60, "ingest to finish")
            if st != "ok":
                raise AssertionError(st)
            return sess.js("return document.querySelector('#docs li[data-id]').innerText.replace(/\\s+/g, ' ');")

        def ask():
            q = sess.find("#question")
            sess.click(q)
            sess.send_keys(q, args.question)
            # count DOM updates of the answer: one per token event rendered as it arrives
            sess.js("window.__answerUpdates = 0; new MutationObserver((m) => { window.__answerUpdates += m.length; })"
                    ".observe(document.getElementById('answer'), {childList: true, characterData: true, subtree: true});")
            sess.click(sess.find("#askbtn"))
            wait_for(sess, "document.getElementById('answer').textContent.trim().length > 0", 30,
                     "first streamed token")
            first = sess.js("return document.getElementById('answer').textContent;")
            # the stream is finished when the button is enabled again and status shows timings
            wait_for(sess, "!document.getElementById('askbtn').disabled", 60, "answer to finish")
            ans = sess.js("return document.getElementById('answer').textContent;")
            if sess.js("return !!document.querySelector('#answer .err');"):
                raise AssertionError("page shows an error: " + ans)
            if len(ans.strip()) < 2:
                raise AssertionError("empty answer")
            ncite = sess.js("return document.querySelectorAll('#citations .cite').length;")
            if not ncite:
                raise AssertionError("no citations rendered")
            status = sess.js("return document.getElementById('status').textContent;")
            if " ms" not in status or not any(m in status for m in ("generative", "extractive")):
                raise AssertionError("no done event shown, status line is %r" % status)  # written on "done"
            # checked answers stream a sentence (or a quote) at a time, not a token at a time
            updates = sess.js("return window.__answerUpdates;")
            if updates < 1:
                raise AssertionError("answer was rendered in %d update(s), not streamed" % updates)
            state["streamed"] = len(first) < len(ans)
            return "%d chars in %d updates, %d citations, %s; first seen %d chars" % (
                len(ans), updates, ncite, status, len(first))

        def cite():
            sess.click(sess.find("#citations .cite"))
            wait_for(sess, "(() => { const i = document.getElementById('pageimg');"
                           " return i.src.startsWith('blob:') && i.complete && i.naturalWidth > 0; })()",
                     20, "page image to load")
            src = sess.js("return document.getElementById('pageimg').dataset.src;")
            m = re.fullmatch(r"/v1/documents/(\d+)/pages/(\d+)\.png\?(?:.*&)?box=([0-9.]+),([0-9.]+),"
                             r"([0-9.]+),([0-9.]+)(?:&.*)?", src or "")
            if not m:
                raise AssertionError("image URL %r is not /v1/documents/ID/pages/N.png?box=..." % src)
            box = [float(v) for v in m.group(3, 4, 5, 6)]
            if not (box[0] < box[2] and box[1] < box[3]):
                raise AssertionError("degenerate box %r" % box)
            if "active" not in sess.js("return document.querySelector('#citations .cite').className;"):
                raise AssertionError("clicked citation is not marked active")
            w, h = sess.js("const i = document.getElementById('pageimg');"
                           " return [i.naturalWidth, i.naturalHeight];")
            inside, outside = sess.js(RED_PIXELS_JS, box)
            # the outline is 3 px around the box: plenty of red pixels there, (almost) none elsewhere
            if inside < 50 or outside > inside // 4:
                raise AssertionError("highlight not found: %d red pixels at the box, %d elsewhere"
                                     % (inside, outside))
            return "%s, %dx%d, %d red outline px" % (src, w, h, inside)

        def figures():
            q = sess.find("#question")
            sess.js("document.getElementById('question').value = '';")
            sess.send_keys(q, "a wiring diagram")
            sess.click(sess.find("#figbtn"))
            wait_for(sess, "/^(\\d+ figures|no figure)/.test(document.getElementById('status').textContent)"
                           " || !!document.querySelector('#answer .err')", 30, "figure search")
            first = sess.js("const c = document.querySelector('#citations .cite');"
                            " return c ? c.textContent : '';")
            if "Wiring diagram" not in first:
                raise AssertionError("first figure hit is %r, status %r" % (
                    first, sess.js("return document.getElementById('status').textContent;")))
            return first[:80]

        def shot():
            png = sess.screenshot()
            if png[:8] != b"\x89PNG\r\n\x1a\n":
                raise AssertionError("screenshot is not a PNG")
            path = os.path.join(args.out, "screenshot-citation.png")
            with open(path, "wb") as f:
                f.write(png)
            if args.copy:
                shutil.copyfile(path, args.copy)
            return "%s, %d bytes%s" % (path, len(png), ", copied to " + args.copy if args.copy else "")

        for name, fn in [("page / loads", load), ("upload PDF through the file input, ingest done", upload),
                         ("ask: streamed answer with citations", ask),
                         ("first citation shows the page with its highlighted box", cite),
                         ("screenshot", shot),
                         ("find figures by appearance: 'a wiring diagram' -> Figure 1", figures)]:
            if not step(name, fn):
                break
        if state.get("streamed") is not None:
            # informational: a short answer can legitimately arrive in one read
            print("info answer grew while streaming: %s" % state["streamed"])
    except StopIteration:
        pass
    finally:
        if sess:
            if not all(results):
                try:
                    with open(os.path.join(args.out, "failure.png"), "wb") as f:
                        f.write(sess.screenshot())
                    print("info failure screenshot: %s" % os.path.join(args.out, "failure.png"))
                except (WebDriverError, OSError):
                    pass
            sess.quit()
        if drv_proc:
            drv_proc.terminate()
            try:
                drv_proc.wait(5)
            except subprocess.TimeoutExpired:
                drv_proc.kill()
        shutil.rmtree(profile, ignore_errors=True)
    npass = sum(results)
    nfail = len(results) - npass
    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--pdf", required=True)
    ap.add_argument("--out", required=True, help="scratch dir (profile, logs, screenshot)")
    ap.add_argument("--copy", help="also write the screenshot here")
    ap.add_argument("--question", default="What does error E07 mean?")
    sys.exit(run(ap.parse_args()))


if __name__ == "__main__":
    main()
