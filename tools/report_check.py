"""`make report-check`: open the demo's HTML reports in headless Chromium and look at them.

Runs the demo into `build/report-check/demo` (with a pinned clock), then, for the audit
report of its final decision, for the suite card and for every page of the registry site
the demo wrote (`demo/site/`, docs/site.md), drives Chromium over the DevTools protocol
(`--remote-debugging-pipe`): it loads the file, collects every console message, exception,
log entry and CSP issue, saves full-page PNG screenshots (1,400 px and 390 px wide, details
collapsed and expanded) and a printed PDF under `build/report-check/`, and fails unless the
rendered text shows what the page is about (the decision and every task id; on site pages
the audit head), the page does not scroll sideways at either width, it holds no script,
every relative link resolves to a file (and every `#fragment` to an element), and nothing
was reported (a CSP violation included).

`--self-test` checks the checker: a page with an inline script and a style attribute under
the same CSP, a page wider than a phone and a page with a broken relative link must each
fail.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PINNED_NOW = "2026-11-30T12:00:00Z"
DESKTOP = {"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": False}
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True}
TIMEOUT_S = 300.0
MAX_LISTED = 12


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class PageResult:
    url: str
    problems: list[str] = field(default_factory=list)
    text: str = ""
    files: list[Path] = field(default_factory=list)


class DevTools:
    """A minimal Chrome DevTools Protocol client over --remote-debugging-pipe."""

    def __init__(self, binary: str, profile: Path) -> None:
        self._to_browser_r, self._to_browser_w = os.pipe()
        self._from_browser_r, self._from_browser_w = os.pipe()
        args = [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            "--remote-debugging-pipe",
            "about:blank",
        ]

        def child_fds() -> None:
            # Through fresh copies, so dup2 never sees the same number on both sides (then it
            # would leave the close-on-exec flag set), and inheritable explicitly.
            read_end, write_end = os.dup(self._to_browser_r), os.dup(self._from_browser_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        self.process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            # The protocol's pipes must be fds 3 and 4 in the child: dup2 there (the copies are
            # inheritable; every other descriptor of ours is close-on-exec).
            close_fds=False,
            preexec_fn=child_fds,  # noqa: PLW1509
        )
        os.close(self._to_browser_r)
        os.close(self._from_browser_w)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def _read_message(self) -> dict[str, Any]:
        import select

        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_browser_r], [], [], TIMEOUT_S)
            if not ready:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_browser_r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        return message

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser_w, json.dumps(message).encode("utf-8") + b"\0")
        while True:
            reply = self._read_message()
            if reply.get("id") == ident:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)

    def wait_for(self, method: str, session: str) -> dict[str, Any]:
        for i, event in enumerate(self.events):
            if event.get("method") == method and event.get("sessionId") == session:
                return self.events.pop(i)
        while True:
            event = self._read_message()
            if event.get("method") == method and event.get("sessionId") == session:
                return event
            self.events.append(event)

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.send("Browser.close")
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        os.close(self._to_browser_w)
        os.close(self._from_browser_r)


def _problems(events: list[dict[str, Any]]) -> list[str]:
    """Every console error or warning, exception, error log entry and CSP issue."""
    found = []
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in (
            "error",
            "warning",
            "assert",
        ):
            args = " ".join(
                str(a.get("value", a.get("description", ""))) for a in params.get("args", [])
            )
            found.append(f"console.{params['type']}: {args}")
        elif method == "Runtime.exceptionThrown":
            found.append(f"exception: {params.get('exceptionDetails', {}).get('text')}")
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            if entry.get("level") in ("error", "warning") or entry.get("source") == "security":
                found.append(
                    f"log ({entry.get('source')}, {entry.get('level')}): {entry.get('text')}"
                )
        elif method == "Audits.issueAdded":
            issue = params.get("issue", {})
            found.append(
                f"issue: {issue.get('code')}: {json.dumps(issue.get('details', {}))[:300]}"
            )
    return found


def _screenshot(tools: DevTools, session: str, path: Path) -> Path:
    metrics = tools.send("Page.getLayoutMetrics", session)
    size = metrics.get("cssContentSize") or metrics["contentSize"]
    shot = tools.send(
        "Page.captureScreenshot",
        session,
        format="png",
        captureBeyondViewport=True,
        clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
    )
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


# With every details block open: how far the page scrolls sideways, and every element that
# scrolls sideways inside it (a table in an overflow container hides columns just the same).
# Measured against the width asked for, never `window.innerWidth`: a mobile viewport zooms
# out to fit a page that is too wide, and then reports the wider width as its own.
SIDEWAYS = """((width) => {
  document.querySelectorAll('details').forEach(d => d.open = true);
  const out = [];
  const wide = Math.max(document.documentElement.scrollWidth, document.body.scrollWidth);
  if (wide - width > 1) out.push('the page is ' + wide + 'px wide, by ' + (wide - width) + 'px');
  document.querySelectorAll('body *').forEach(e => {
    const style = getComputedStyle(e);
    if (['auto', 'scroll'].includes(style.overflowX) && e.scrollWidth > e.clientWidth + 1) {
      const what = e.id || (e.firstElementChild && e.firstElementChild.className) || e.tagName;
      const by = e.scrollWidth - e.clientWidth;
      out.push(e.tagName.toLowerCase() + ' ' + what + ' by ' + by + 'px');
    }
  });
  document.querySelectorAll('details').forEach(d => d.open = false);
  return out;
})(%d)"""

# Every word of the page's text must sit on one line. A word is a run of non-space
# characters inside one text node; it may break only after an id separator (/ . - _ :) when
# it is part of an id (an element of class `id`, where the report puts <wbr> there), and
# only after a hyphen or dash elsewhere (what a browser does by itself). Each piece between
# those allowed break points is measured with Range.getClientRects: two line boxes at
# different heights mean the browser broke the word inside ("revoca|tion", "task_|fail").
# Chart text drawn smaller than 9 CSS px is unreadable, and is reported too, as is chart
# text that runs past the left or right edge of its chart (an SVG shows none of it there).
BROKEN_WORDS = """(() => {
  document.querySelectorAll('details').forEach(d => d.open = true);
  const out = [];
  const range = document.createRange();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const pieces = (word, ids) => {
    const found = [];
    let start = 0;
    for (let i = 0; i < word.length; i++) {
      const after = ids ? '/.-_:\u2013\u2014' : '-\u2013\u2014';
      if (after.includes(word[i]) || i === word.length - 1) {
        found.push([start, i + 1]);
        start = i + 1;
      }
    }
    return found;
  };
  let node;
  while ((node = walker.nextNode())) {
    const el = node.parentElement;
    if (!el || el.closest('svg, script, style, title')) continue;
    if (!el.getClientRects().length) continue;
    const ids = !!el.closest('.id');
    const re = /\\S+/g;
    let m;
    while ((m = re.exec(node.data))) {
      for (const [a, b] of pieces(m[0], ids)) {
        range.setStart(node, m.index + a);
        range.setEnd(node, m.index + b);
        const rects = Array.from(range.getClientRects()).filter(r => r.width > 0.5);
        const lines = new Set(rects.map(r => Math.round(r.bottom)));
        if (lines.size > 1) {
          const parts = rects.map(r => Math.round(r.bottom));
          let cut = 0;
          for (let i = a; i < b; i++) {
            range.setStart(node, m.index + i); range.setEnd(node, m.index + i + 1);
            const r = range.getClientRects()[0];
            if (r && Math.round(r.bottom) !== parts[0]) { cut = i - a; break; }
          }
          const piece = m[0].slice(a, b);
          const cell = el.closest('td, th, dd, dt, li, p, summary, h1, h2, h3, caption');
          out.push('"' + piece.slice(0, cut) + '/' + piece.slice(cut) + '" in <' +
            (cell || el).tagName.toLowerCase() + '>');
        }
      }
    }
  }
  document.querySelectorAll('svg text, svg foreignObject *').forEach(t => {
    const r = t.getBoundingClientRect();
    const size = parseFloat(getComputedStyle(t).fontSize) *
      (t.closest('svg').getBoundingClientRect().width /
       (t.closest('svg').viewBox.baseVal && t.closest('svg').viewBox.baseVal.width ||
        t.closest('svg').getBoundingClientRect().width));
    const what = (t.textContent || '').trim().slice(0, 40);
    if (r.width > 0 && size < 9) out.push('chart text "' + what + '" drawn ' +
      size.toFixed(1) + 'px tall');
    const box = t.closest('svg').getBoundingClientRect();
    if (r.width > 0 && getComputedStyle(t.closest('svg')).overflow !== 'visible' &&
        (r.left < box.left - 1 || r.right > box.right + 1)) {
      out.push('chart text "' + what + '" cut off by its chart, by ' +
        Math.round(Math.max(box.left - r.left, r.right - box.right)) + 'px');
    }
  });
  document.querySelectorAll('details').forEach(d => d.open = false);
  return Array.from(new Set(out));
})()"""


def _sideways(tools: DevTools, session: str, label: str) -> list[str]:
    width = DESKTOP["width"] if label == "desktop" else PHONE["width"]
    found = _evaluate(tools, session, SIDEWAYS % width)
    return [f"scrolls sideways at {width}px: {what}" for what in found]


def _broken_words(tools: DevTools, session: str, label: str) -> list[str]:
    width = DESKTOP["width"] if label == "desktop" else PHONE["width"]
    found = _evaluate(tools, session, BROKEN_WORDS)
    return [
        f"at {width}px: "
        + (what if what.startswith("chart text") else f"word broken inside: {what}")
        for what in found[:MAX_LISTED]
    ] + (
        [f"at {width}px: {len(found) - MAX_LISTED} more words broken inside"]
        if len(found) > MAX_LISTED
        else []
    )


LINKS_JS = """Array.from(document.querySelectorAll('[href],[src]')).map(e => {
  const ref = e.getAttribute('href') ?? e.getAttribute('src');
  const hash = ref.includes('#') && !/^[a-z][a-z0-9+.-]*:/i.test(ref) && ref.split('#')[0] === ''
    ? !!document.getElementById(decodeURIComponent(ref.split('#')[1])) : null;
  return [ref, hash];
})"""


def _evaluate(tools: DevTools, session: str, expression: str) -> Any:
    return tools.send("Runtime.evaluate", session, expression=expression, returnByValue=True)[
        "result"
    ].get("value")


def _link_problems(page: Path, links: list[list[Any]]) -> list[str]:
    """Every relative reference must name a file that exists (a fragment of this page, an
    element of it); http(s) links lead off the site and load nothing, anything else fails."""
    from urllib.parse import unquote, urlsplit

    problems = []
    for ref, fragment_found in links:
        parts = urlsplit(ref)
        if parts.scheme in ("http", "https") and parts.netloc:
            continue
        if parts.scheme or parts.netloc:
            problems.append(f"link {ref!r} is neither relative nor http(s)")
        elif not parts.path:
            if fragment_found is False:
                problems.append(f"link {ref!r} names no element of the page")
        elif not (page.parent / unquote(parts.path)).resolve().is_file():
            problems.append(f"link {ref!r} does not resolve to a file")
    return problems


class Browser:
    """One headless Chromium for every page of a check (a fresh tab per page)."""

    def __init__(self, binary: str) -> None:
        self._profile = tempfile.TemporaryDirectory(prefix="evalops-chromium-")
        self.tools = DevTools(binary, Path(self._profile.name))

    def close(self) -> None:
        self.tools.close()
        self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def inspect_page(
    browser: Browser, page: Path, out: Path, stem: str, *, files: bool = True
) -> PageResult:
    """Load `page` at desktop and phone width; screenshots (unless `files` is false), text
    and every problem."""
    result = PageResult(page.resolve().as_uri())
    tools = browser.tools
    tools.events.clear()
    target = tools.send("Target.createTarget", url="about:blank")["targetId"]
    try:
        session = tools.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Audits"):
            tools.send(f"{domain}.enable", session)
        for label, metrics in (("desktop", DESKTOP), ("phone", PHONE)):
            tools.send("Emulation.setDeviceMetricsOverride", session, **metrics)
            tools.send("Page.navigate", session, url=result.url)
            tools.wait_for("Page.loadEventFired", session)
            if files:
                result.files.append(_screenshot(tools, session, out / f"{stem}-{label}.png"))
            result.problems += _sideways(tools, session, label)
            result.problems += _broken_words(tools, session, label)
        result.problems += _link_problems(page, _evaluate(tools, session, LINKS_JS))
        if _evaluate(tools, session, "document.querySelectorAll('script').length"):
            result.problems.append("holds a script element")
        tools.send("Emulation.setDeviceMetricsOverride", session, **DESKTOP)
        text = _evaluate(
            tools,
            session,
            "document.querySelectorAll('details').forEach(d => d.open = true);"
            "document.body.innerText",
        )
        result.text = str(text)
        if files:
            result.files.append(_screenshot(tools, session, out / f"{stem}-expanded.png"))
            pdf = tools.send("Page.printToPDF", session, printBackground=False)
            (out / f"{stem}.pdf").write_bytes(base64.b64decode(pdf["data"]))
            result.files.append(out / f"{stem}.pdf")
        # Let late events (issues are reported asynchronously) arrive.
        tools.send("Runtime.evaluate", session, expression="1")
        result.problems += _problems([e for e in tools.events if e.get("sessionId") == session])
    finally:
        tools.send("Target.closeTarget", targetId=target)
        tools.events.clear()
    return result


def _evalops(args: list[str], cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALOPS_")}
    env["EVALOPS_NOW"] = PINNED_NOW
    done = subprocess.run(
        [sys.executable, "-m", "evalops", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"evalops {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def _site_pages(demo: Path, doc: dict[str, Any]) -> list[tuple[Path, str, list[str]]]:
    """Each page of the demo's registry site; each must show the audit head."""
    site = demo / "site"
    head = f"evalops-audit-head:{doc['audit_head']['seq']}:{doc['audit_head']['hash']}"
    pages = []
    for page in sorted(site.rglob("*.html")):
        relative = page.relative_to(site).with_suffix("")
        pages.append((page, "site-" + "-".join(relative.parts), [head]))
    return pages


def _demo_pages(out: Path) -> tuple[Path, list[tuple[Path, str, list[str]]], list[str]]:
    """The demo's audit report of every decision, the report of every estimate, its suite
    card and every site page."""
    demo = out / "demo"
    _evalops(["demo", "--dir", str(demo)], cwd=out)
    pages: list[tuple[Path, str, list[str]]] = []
    doc: dict[str, Any] = {}
    for row in json.loads(_evalops(["gate", "list", "--json"], cwd=demo)):
        gate = row["gate_id"]
        report = demo / "reports" / f"audit-{gate}.html"
        _evalops(["report", "audit", "--gate", gate, "--format", "html", "-o", str(report)], demo)
        doc = json.loads(_evalops(["report", "audit", "--gate", gate, "--format", "json"], demo))
        shown = [doc["decision"].upper(), doc["gate_id"], *[t["task_id"] for t in doc["tasks"]]]
        pages.append((report, f"audit-{gate}", shown))
    for row in json.loads(_evalops(["estimate", "list", "--json"], cwd=demo))["estimates"]:
        estimate = row["estimate_id"]
        report = demo / "reports" / f"estimate-{estimate}.html"
        _evalops(["report", "estimate", estimate, "--format", "html", "-o", str(report)], demo)
        stored = json.loads(_evalops(["report", "estimate", estimate, "--format", "json"], demo))
        pages.append((report, f"estimate-{estimate}", [estimate, stored["claims"]]))
    card = demo / "reports" / "suite-regression-core.html"
    suite = json.loads(_evalops(["report", "suite", "regression/core", "--format", "json"], demo))
    pages.append((card, "suite-card", [suite["suite"], *[m["task_id"] for m in suite["members"]]]))
    # Written again here, after the reports above: every page shows the head they show.
    _evalops(["report", "site", "site"], demo)
    pages += _site_pages(demo, doc)
    failures = []
    if not (demo / "site" / "index.html").is_file():
        failures.append("the demo wrote no site (demo/site/index.html)")
    return demo, pages, failures


def _generated_pages(out: Path, tasks: int) -> tuple[Path, list[tuple[Path, str, list[str]]]]:
    """A registry of `tasks` tasks in one suite (the benchmarks' fixture: real files synced,
    real records ingested), gated, with its audit report and its whole site."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.suite_fixture import build_suite

    ws = out / f"registry-{tasks}"
    build_suite(ws, tasks, trials=3)
    pages: list[tuple[Path, str, list[str]]] = []
    for build in ("build-1",):
        done = subprocess.run(
            [sys.executable, "-m", "evalops", "gate", "check", "--build", build, "--suite",
             "regression/bench", "--json"],
            cwd=ws, capture_output=True, text=True, check=False,
            env={**{k: v for k, v in os.environ.items() if not k.startswith("EVALOPS_")},
                 "EVALOPS_NOW": PINNED_NOW},
        )  # fmt: skip
        if done.returncode not in (0, 3, 4):
            raise SystemExit(f"gate check --build {build} exited {done.returncode}:\n{done.stderr}")
        gate = json.loads(done.stdout)["gate_id"]
        report = ws / "reports" / f"audit-{gate}.html"
        report.parent.mkdir(exist_ok=True)
        _evalops(["report", "audit", "--gate", gate, "--format", "html", "-o", str(report)], ws)
        pages.append((report, f"big-audit-{gate}", [gate]))
    _evalops(["report", "site", "site"], ws)
    doc = json.loads(_evalops(["report", "audit", "--gate", gate, "--format", "json"], ws))
    pages += [(p, "big-" + stem, shown) for p, stem, shown in _site_pages(ws, doc)]
    return ws, pages


def _unique_stem(stem: str, page: Path, root: Path, used: set[str]) -> str:
    """`stem`, or the page's path under its group named in full when another page already
    used it (two sites each have an index.html): one page's screenshots never overwrite
    another's."""
    if stem in used:
        stem = str(page.relative_to(root.parent).with_suffix("")).replace("/", "_")
    while stem in used:
        stem += "_"
    used.add(stem)
    return stem


def check(out: Path, binary: str, tasks: int, only: list[Path] | None = None) -> int:
    out = out.resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    if only:
        # Given pages only (while working on a template): no demo, no generated registry.
        root = Path(os.path.commonpath([p.resolve().parent for p in only]))
        demo, pages, failures = root, [(p.resolve(), p.stem, []) for p in only], []
        tasks = 0
    else:
        demo, pages, failures = _demo_pages(out)
    groups = [(demo, pages, True)]
    if tasks:
        big, more = _generated_pages(out, tasks)
        # Screenshots of the generated registry's first pages only (its audit report and
        # decision page): hundreds of pages are checked alike, a picture of each is noise.
        groups.append((big, more, False))
    checked = 0
    stems: set[str] = set()
    with Browser(binary) as browser:
        for root, group, every_file in groups:
            for n, (page, named, must_show) in enumerate(group):
                stem = _unique_stem(named, page, root, stems)
                result = inspect_page(browser, page, out, stem, files=every_file or n < 2)
                checked += 1
                missing = [s for s in must_show if s not in result.text]
                name = str(page.relative_to(root.parent))
                print(f"{name}: {len(result.text)} characters of text; {len(result.problems)} "
                      f"problems; {len(result.files)} files written")  # fmt: skip
                found = [f"{name}: the rendered page does not show {s!r}" for s in missing]
                found += [f"{name}: {p}" for p in result.problems]
                for f in found:
                    print(f"  {f}")
                failures += found
    for f in failures:
        print(f"FAIL {f}")
    print(
        "report-check: "
        + (
            f"FAILED: {len(failures)} problems on {checked} pages"
            if failures
            else f"ok: {checked} pages at 1,400 and 390 px, what each is about shown, no "
            "sideways scroll, no word broken inside, chart text readable and whole, every "
            "relative link resolves, no script, no console error or CSP violation"
        )
    )
    return 1 if failures else 0


BAD_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'none'">
<title>bad</title></head><body><p style="color:red">styled</p>
<script>console.log("ran")</script><img src="https://example.invalid/x.png" alt=""></body></html>
"""


WIDE_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>wide</title></head><body><pre>wide</pre><svg xmlns="http://www.w3.org/2000/svg"
width="2000" height="10"></svg></body></html>
"""
BROKEN_LINK_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>links</title></head><body><p>links</p><a href="self-test-links.html">itself</a>
<a href="missing/page.html">missing</a><a href="#nowhere">nowhere</a></body></html>
"""


# Today's faults, each in a page of its own: a table whose narrow columns break words
# ("revoca|tion", "task_|fail") under overflow-wrap:anywhere; a chart whose text a phone
# shrinks to a few pixels; a table wider than a phone, which a mobile viewport hides by
# zooming out (innerWidth grows with it).
NARROW_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>narrow</title>
<style>table{width:100%;border-collapse:collapse}td,th{overflow-wrap:anywhere;border:1px solid}
</style></head><body><table><tr><th>revocation</th><th>class</th><th>waiver</th>
<th>a long explanation of what this column holds, so it takes the width</th></tr>
<tr><td>revocation</td><td>task_fail</td><td>regressed</td>
<td>a long explanation of what this cell holds, so that it takes all the width left and more,
and more, and more, and more, and more, and more, and more, and more</td></tr></table></body>
</html>"""
TINY_CHART_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>chart</title>
<style>svg{max-width:100%;height:auto}</style></head><body>
<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1200 100" width="1200" height="100">
<text x="10" y="50" font-size="12">pass^k by build</text></svg></body></html>"""
CUT_CHART_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>cut</title>
</head><body><svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 300 40" width="300"
height="40"><text x="100" y="20" font-size="12" text-anchor="end">ambiguous_external_effect
</text></svg></body></html>"""
ZOOMED_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>zoomed</title>
</head><body><table><tr><td>one</td><td>two</td><td style="min-width:600px">three</td></tr>
</table></body></html>"""
GOOD_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>good</title>
<style>.id{font-family:monospace;overflow-wrap:normal;word-break:normal}</style></head><body>
<p>A paragraph of ordinary words that wraps between them, as prose does, at any width at all,
a long-hyphenated-compound included.</p>
<p><span class="id">support-<wbr>refund-<wbr>in-<wbr>order/<wbr>a.<wbr>b_<wbr>c:<wbr>d</span>
<span class="id">support-<wbr>refund-<wbr>policy-<wbr>explanation-<wbr>with-<wbr>a-<wbr>very-<wbr>
long-<wbr>name-<wbr>that-<wbr>wraps</span></p>
</body></html>"""


def self_test(out: Path, binary: str) -> int:
    """The checker must see what is wrong with pages that break each rule: CSP violations,
    a page wider than a phone (also when the phone zooms out to hide it), broken relative
    links, words broken inside, unreadable or cut-off chart text; and a page that breaks
    none passes."""
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    expectations: dict[str, tuple[str, tuple[str, ...]]] = {
        "self-test-bad": (BAD_PAGE, ("issue:", "holds a script element")),
        "self-test-wide": (WIDE_PAGE, ("scrolls sideways at 390px",)),
        "self-test-zoomed": (ZOOMED_PAGE, ("scrolls sideways at 390px: the page",)),
        "self-test-links": (
            BROKEN_LINK_PAGE,
            ("'missing/page.html' does not resolve", "'#nowhere' names no element"),
        ),
        "self-test-narrow": (
            NARROW_PAGE,
            ("at 390px: word broken inside", "in <th>", 'k_fail" in <td>', 'ocation"'),
        ),
        "self-test-chart": (TINY_CHART_PAGE, ('chart text "pass^k by build" drawn',)),
        "self-test-cut": (CUT_CHART_PAGE, ('"ambiguous_external_effect" cut off by its chart',)),
        "self-test-good": (GOOD_PAGE, ()),
    }
    ok = True
    with Browser(binary) as browser:
        for stem, (text, wanted) in expectations.items():
            page = out / f"{stem}.html"
            page.write_text(text, encoding="utf-8")
            result = inspect_page(browser, page, out, stem)
            for p in result.problems:
                print(f"{stem}: seen: {p}")
            unseen = [w for w in wanted if not any(w in p for p in result.problems)]
            if stem == "self-test-bad" and len(result.problems) < 2:
                unseen.append("at least two violations")
            if stem == "self-test-links" and any(
                "'self-test-links.html'" in p for p in result.problems
            ):
                unseen.append("a link to an existing file passes")
            if stem == "self-test-good" and result.problems:
                unseen.append("a page that breaks no rule passes")
            for w in unseen:
                print(f"{stem}: NOT SEEN: {w}")
            ok = ok and not unseen
    print("self-test: " + ("ok: violations caught" if ok else "FAILED: violations not seen"))
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("build/report-check"))
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument(
        "--tasks",
        type=int,
        default=200,
        help="also check a generated registry of this many tasks (0: the demo only)",
    )
    parser.add_argument(
        "--page", type=Path, action="append", help="check only this HTML page (repeatable)"
    )
    args = parser.parse_args(argv)
    binary = chromium_binary()
    if binary is None:
        print("report-check: chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    if args.self_test:
        return self_test(args.out, binary)
    return check(args.out, binary, args.tasks, args.page)


if __name__ == "__main__":
    sys.exit(main())
