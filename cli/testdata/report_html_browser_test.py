#!/usr/bin/python3
"""The HTML report in a real headless browser (Debian's chromium, driven over the
DevTools protocol with python3-websocket).

For a generated 64-process job (with junk lines) and a generated 4096-process job whose
every process forks 200 times (a DataLoader forking its workers every epoch):
  - the page loads with no console error, no uncaught exception, no log error, and
    makes no request other than its own file (self-contained);
  - the numbers it shows equal `forkguard report --format json`'s: summary cards,
    findings and their counts; after "Expand all", one timeline row and one tree
    entry per process, one fork mark per fork (hazard marks = hazardous forks),
    one made-safe mark per fork fix mode made safe, one SIGSEGV mark per child death (a process with more forks than are listed draws its
    listed forks as marks and counts every fork in bars);
  - the 4096-process page is under 20 MB;
  - a screenshot of each (expanded) page is saved in $TEST_UNDECLARED_OUTPUTS_DIR
    (bazel-testlogs/cli/report_html_browser_test/test.outputs/) and its path printed.

Usage: report_html_browser_test.py FORKGUARD JOB_GENERATOR [LOG_DIR...]
  LOG_DIR...: also check (and screenshot) the report of these real logs.
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import websocket

MAX_HTML_BYTES = 20 * 1000 * 1000
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


class Browser:
    """One headless chromium with a DevTools connection to its page."""

    def __init__(self, exe, tmp):
        self.profile = tempfile.mkdtemp(prefix="chromium-", dir=tmp)
        env = dict(os.environ, HOME=self.profile, XDG_CONFIG_HOME=self.profile,
                   XDG_CACHE_HOME=self.profile)
        # As root chromium needs --no-sandbox; port 0 picks a free port and writes
        # it to DevToolsActivePort in the profile.
        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--disable-background-networking",
             "--remote-debugging-port=0", "--user-data-dir=" + self.profile,
             "--window-size=1400,1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "chromium.log"), "w"),
            env=env)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.time() + 60
        while not os.path.exists(port_file) or os.path.getsize(port_file) == 0:
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError("chromium did not start (see chromium.log)")
            time.sleep(0.1)
        port = int(open(port_file).read().split()[0])
        for _ in range(100):
            targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                break
            time.sleep(0.1)
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=120)
        self.next_id = 0
        self.events = []
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.call(domain + ".enable")

    def call(self, method, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for i, e in enumerate(self.events):
                if e["method"] == method:
                    return self.events.pop(i)
            self.ws.settimeout(max(0.1, deadline - time.time()))
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
        raise RuntimeError("timed out waiting for " + method)

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"page script failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    def close(self):
        try:
            self.ws.close()
        finally:
            self.proc.kill()
            self.proc.wait()


def problems(events, page_url):
    """Console errors, uncaught exceptions, log errors, requests leaving the file."""
    out = []
    for e in events:
        m, p = e["method"], e.get("params", {})
        if m == "Runtime.exceptionThrown":
            out.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:400])
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
            out.append("console." + p["type"] + ": " + json.dumps(p.get("args", []))[:400])
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append("log error: " + p["entry"].get("text", "")[:400])
        elif m == "Network.requestWillBeSent":
            url = p.get("request", {}).get("url", "")
            if url != page_url and not url.startswith("data:"):
                out.append("request outside the page: " + url)
    return out


COUNT_JS = r"""(() => {
  const cards = {};
  document.querySelectorAll('#cards .card').forEach(c => cards[c.dataset.key] = Number(c.querySelector('b').textContent));
  const findings = [...document.querySelectorAll('#findings .finding')].map(f => ({
      count: Number(f.dataset.count), heading: f.querySelector('h3 code').textContent}));
  // Each host's summary line: "host h: N processes, F forks (H hazardous)".
  let hostForks = 0, hostHazard = 0;
  document.querySelectorAll('#hosts > details.host > summary').forEach(s => {
    const m = s.textContent.match(/, (\d+) forks? \((\d+) hazardous\)/);
    if (m) { hostForks += Number(m[1]); hostHazard += Number(m[2]); }
  });
  return {ready: document.body.dataset.ready === '1', cards, findings,
          hosts: document.querySelectorAll('#hosts > details.host').length, hostForks, hostHazard};
})()"""

EXPANDED_JS = r"""(() => {
  document.getElementById('expand-all').click();
  const q = (s) => document.querySelectorAll(s).length;
  // A row with bins (data-binned: its forks, every one counted) draws only its listed forks as marks.
  let forks = 0, hazard = 0, marks = 0;
  document.querySelectorAll('#hosts .prow').forEach(r => {
    const m = r.querySelectorAll('.m-fork').length;
    marks += m;
    if (r.dataset.binned !== undefined) {
      forks += Number(r.dataset.binned); hazard += Number(r.dataset.binnedHazard);
    } else {
      forks += m; hazard += r.querySelectorAll('.m-fork.hazard').length;
    }
  });
  return {rows: q('#hosts .prow'), tree: q('#tree li[data-proc]'), forks, hazard, marks,
          segv: q('#hosts .m-segv'), inits: q('#hosts .m-init'), fixed: q('#hosts .m-fork.fixed'),
          height: document.documentElement.scrollHeight};
})()"""


def check_page(browser, name, html_path, report, out_dir, expand=True, shot_height=None):
    size = os.path.getsize(html_path)
    print(f"--- {name}: {html_path} ({size} bytes)", flush=True)
    url = "file://" + os.path.abspath(html_path)
    browser.events.clear()
    t = time.time()
    browser.call("Page.navigate", url=url)
    browser.wait_event("Page.loadEventFired")
    load_s = time.time() - t
    got = browser.eval(COUNT_JS)
    print(f"     loaded in {load_s:.1f} s", flush=True)
    check(got["ready"], f"{name}: the page script ran to the end")
    s = report["summary"]
    want = {"processes": s["processes"], "hosts": len(s["hosts"]), "ranks": len(s["ranks"]),
            "forks": s["forks"], "hazard_forks": s["hazard_forks"],
            "clean_forks": s["clean_forks"], "hazard_sites": s["hazard_sites"],
            "spawns": s["spawns"], "children_segv": s["children_segv"],
            "notes": len(report["notes"])}
    if "fixed_forks" in s:  # fix mode made forks safe: a card of its own
        want["fixed_forks"] = s["fixed_forks"]
    for k, v in want.items():
        check(got["cards"].get(k) == v, f"{name}: card {k} shows {got['cards'].get(k)}, JSON says {v}")
    check(len(got["findings"]) == len(report["findings"]),
          f"{name}: {len(got['findings'])} findings shown, JSON has {len(report['findings'])}")
    for shown, f in zip(got["findings"], report["findings"]):
        check(shown["count"] == f["count"], f"{name}: finding {f['id']} ×{shown['count']} (JSON ×{f['count']})")
        check(shown["heading"].startswith(f["location"]),
              f"{name}: finding {f['id']} headed {shown['heading']!r} (JSON location {f['location']!r})")
    check(got["hosts"] == len(s["hosts"]), f"{name}: {got['hosts']} host timelines")
    check(got["hostForks"] == s["forks"] and got["hostHazard"] == s["hazard_forks"],
          f"{name}: the host lines count {got['hostForks']} forks ({got['hostHazard']} hazardous), "
          f"JSON says {s['forks']} ({s['hazard_forks']})")
    if expand:
        t = time.time()
        ex = browser.eval(EXPANDED_JS)
        print(f"     expanded in {time.time() - t:.1f} s", flush=True)
        check(ex["rows"] == s["processes"], f"{name}: {ex['rows']} timeline rows for {s['processes']} processes")
        check(ex["tree"] == s["processes"], f"{name}: {ex['tree']} tree entries for {s['processes']} processes")
        check(ex["forks"] == s["forks"], f"{name}: {ex['forks']} forks drawn or binned for {s['forks']} forks")
        check(ex["marks"] == len(report["forks"]),
              f"{name}: {ex['marks']} fork marks for the {len(report['forks'])} forks listed")
        check(ex["hazard"] == s["hazard_forks"],
              f"{name}: {ex['hazard']} hazard marks for {s['hazard_forks']} hazardous forks")
        fixed = sum(1 for f in report["forks"] if f["action"] == "fixed")
        check(ex["fixed"] == fixed, f"{name}: {ex['fixed']} made-safe marks for {fixed} fixed forks listed")
        check(ex["segv"] == s["children_segv"],
              f"{name}: {ex['segv']} SIGSEGV marks for {s['children_segv']} deaths")
        inits = sum(1 for p in report["processes"] if p["rdma_initialized"])
        check(ex["inits"] == inits, f"{name}: {ex['inits']} RDMA init marks for {inits} processes")
    height = shot_height or min(browser.eval("document.documentElement.scrollHeight"), 4000)
    browser.call("Emulation.setDeviceMetricsOverride", width=1400, height=height,
                 deviceScaleFactor=1, mobile=False)
    shot = browser.call("Page.captureScreenshot", format="png")
    browser.call("Emulation.clearDeviceMetricsOverride")
    path = os.path.join(out_dir, name + ".png")
    with open(path, "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    print(f"     screenshot: {path}", flush=True)
    found = problems(browser.events, url)
    for p in found:
        print("     " + p, flush=True)
    check(not found, f"{name}: no console error, exception or outside request ({len(found)} found)")
    return size


def report_of(forkguard, fmt, logs, out):
    with open(out, "w") as f:
        subprocess.run([forkguard, "report", "--format", fmt] + logs, stdout=f, check=True)
    return out


def main():
    forkguard, generator = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    extra = sys.argv[3:]
    tmp = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
    out_dir = os.environ.get("FORKGUARD_SCREENSHOT_DIR") or os.environ.get(
        "TEST_UNDECLARED_OUTPUTS_DIR") or tmp
    os.makedirs(out_dir, exist_ok=True)
    exe = find_chromium()
    if not exe:
        print("FAIL chromium not installed (scripts/setup installs it)")
        return 1
    jobs = []
    for name, args in (("job64", ["--junk"]), ("job4096", ["--ranks", "512", "--procs-per-rank", "8",
                                                              "--forks-per-process", "200"])):
        d = os.path.join(tmp, name)
        os.makedirs(d, exist_ok=True)
        subprocess.run([generator, d] + args, stdout=subprocess.DEVNULL, check=True)
        jobs.append((name, [d]))
    for d in extra:  # each file (runfiles are symlinks, which a directory walk skips)
        files = [os.path.join(d, f) for f in sorted(os.listdir(d))] if os.path.isdir(d) else [d]
        jobs.append((os.path.basename(os.path.normpath(d)), files))
    browser = Browser(exe, tmp)
    try:
        for name, logs in jobs:
            html = report_of(forkguard, "html", logs, os.path.join(tmp, name + ".html"))
            report = json.load(open(report_of(forkguard, "json", logs, os.path.join(tmp, name + ".json"))))
            size = check_page(browser, name, html, report, out_dir,
                              shot_height=1600 if name == "job4096" else None)
            if name == "job4096":
                check(report["summary"]["processes"] == 4096, "job4096 has 4096 processes")
                check(size < MAX_HTML_BYTES, f"job4096: HTML is {size / 1e6:.2f} MB (< 20 MB)")
    finally:
        browser.close()
    print(f"report_html_browser_test: {len(failures)} failed check(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
