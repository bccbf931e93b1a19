#!/usr/bin/python3
"""The calibration report in a real browser (registered in CTest by tests/tools/CMakeLists.txt).

Runs `ptq calibrate --report --report-json` for the bundled model and for a model from files,
then for each report:
  - the JSON validates against the schema in docs/report.md (python3-jsonschema);
  - the HTML passes a structural check (balanced tags, unique ids, no external reference);
  - Debian's chromium, headless, renders it: --dump-dom shows every layer's section and a plot
    per quantized layer, and no `http` (no request can leave the page); --screenshot gives a PNG
    that is not blank (pixel statistics read by a small PNG decoder below).
Every missing piece (chromium, jsonschema) fails the test; nothing is skipped.
Usage: test_report_browser.py PTQ EXAMPLES_DIR DOCS_DIR [--save-screenshot PNG]
"""

import html.parser
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

import jsonschema

CHROMIUM = "/usr/bin/chromium"
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL: " + what, file=sys.stderr)
    return cond


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600, **kw)
    return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")


def schema_from_docs(docs):
    text = open(os.path.join(docs, "report.md"), encoding="utf-8").read()
    at = text.index("## The JSON schema")
    m = re.search(r"```json\n(.*?)```", text[at:], re.S)
    return json.loads(m.group(1))


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class Structure(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.ids, self.errors, self.tags = [], {}, [], {}

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        a = dict(attrs)
        if "id" in a:
            if a["id"] in self.ids:
                self.errors.append("duplicate id " + a["id"])
            self.ids[a["id"]] = tag
        for k in ("src", "srcset", "xlink:href", "action", "formaction", "poster", "data"):
            if k in a:
                self.errors.append("<%s %s=...> refers to a resource" % (tag, k))
        if tag == "link":
            self.errors.append("<link> refers to a resource")
        if tag == "a" and "href" in a and not a["href"].startswith("#"):
            self.errors.append("<a href=%r> leaves the page" % a["href"])
        if tag == "a" and "href" in a and a["href"].startswith("#"):
            self.links = getattr(self, "links", []) + [a["href"][1:]]
        if tag not in VOID:
            self.stack.append((tag, self.getpos()))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if tag in VOID:
            self.errors.append("end tag of void element " + tag)
            return
        if not self.stack or self.stack[-1][0] != tag:
            self.errors.append("</%s> at %s closes %s" % (
                tag, self.getpos(), self.stack[-1] if self.stack else "nothing"))
            return
        self.stack.pop()


def structural_check(name, page):
    p = Structure()
    p.feed(page)
    p.close()
    check(not p.errors, name + ": structure: " + "; ".join(p.errors[:5]))
    check(not p.stack, name + ": unclosed tags " + str(p.stack[:5]))
    check(page.startswith("<!DOCTYPE html>"), name + ": starts with <!DOCTYPE html>")
    check(p.tags.get("html") == 1 and p.tags.get("head") == 1 and p.tags.get("body") == 1,
          name + ": one html, head and body")
    check(p.tags.get("script", 0) <= 1, name + ": at most one inline script")
    for target in getattr(p, "links", []):
        check(target in p.ids, name + ": link to #%s has its target" % target)
    check("http" not in page.lower(), name + ": no 'http' in the page source")


def png_pixels(path):
    """Decodes an 8-bit RGB/RGBA non-interlaced PNG: (width, height, channels, rows)."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError("unsupported PNG %s" % (hdr,))
    ch = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * ch
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        f = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - ch] if x >= ch else 0
            b = prev[x]
            c = prev[x - ch] if x >= ch else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pr) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, ch, rows


def chromium(args, profile):
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--disable-component-update", "--no-first-run",
            "--disable-sync", "--user-data-dir=" + profile]
    return run(base + args)


def browser_check(name, html_path, report, tmp, save_png=None):
    expected = [(i, l) for i, l in enumerate(report["layers"])]
    profile = tempfile.mkdtemp(prefix="chromium-", dir=tmp)
    code, dom, err = chromium(["--dump-dom", "file://" + html_path], profile)
    if not check(code == 0 and "</html>" in dom, name + ": chromium --dump-dom ran (%d): %s" %
                 (code, err[-500:])):
        return
    check("http" not in dom.lower(), name + ": no 'http' in the rendered DOM")
    sections = re.findall(r'<section class="layer[^"]*" id="(layer-\d+)">(.*?)</section>', dom,
                          re.S)
    found = dict(sections)
    for i, l in expected:
        sid = "layer-%d" % i
        if not check(sid in found, name + ": DOM has the section of layer " + l["name"]):
            continue
        check(l["name"] in found[sid], name + ": the section names " + l["name"])
        if l["quant_enable"]:
            plots = found[sid].count('<svg class="plot')
            check(plots >= 2, name + ": layer %s has its plots (%d)" % (l["name"], plots))
            check('<svg class="plot hist"' in found[sid], name + ": %s histogram" % l["name"])
    check(len(sections) == len(expected), name + ": one section per layer")
    if report["sensitivity"]["suggested_skip_layers"]:
        check('id="skip-line"' in dom, name + ": the suggested skip_layers line is shown")
    else:
        check('id="no-skip"' in dom and 'id="skip-line"' not in dom,
              name + ": no layer stands out, and the report says so instead of a skip_layers line")
    png = os.path.join(tmp, name + ".png")
    profile = tempfile.mkdtemp(prefix="chromium-", dir=tmp)
    code, _, err = chromium(["--screenshot=" + png, "--window-size=1200,1500",
                             "--hide-scrollbars", "file://" + html_path], profile)
    if not check(code == 0 and os.path.isfile(png), name + ": chromium --screenshot (%d): %s" %
                 (code, err[-500:])):
        return
    w, h, ch, rows = png_pixels(png)
    check((w, h) == (1200, 1500), name + ": screenshot size %dx%d" % (w, h))
    colors, dark, nonwhite, total = set(), 0, 0, 0
    for y in range(0, h, 3):
        row = rows[y]
        for x in range(0, w, 3):
            px = row[x * ch:x * ch + 3]
            colors.add(px)
            lum = (px[0] * 299 + px[1] * 587 + px[2] * 114) // 1000
            dark += lum < 100
            nonwhite += lum < 245
            total += 1
    print("%s: %dx%d, %d colours, %.2f %% non-white, %.2f %% dark" % (
        name, w, h, len(colors), 100.0 * nonwhite / total, 100.0 * dark / total))
    check(len(colors) >= 20, name + ": screenshot has more than a few colours")
    check(nonwhite / total > 0.03, name + ": screenshot is not blank (non-white pixels)")
    check(dark / total > 0.005, name + ": screenshot shows text (dark pixels)")
    if save_png:
        shutil.copyfile(png, save_png)


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    ptq, examples, docs = sys.argv[1:4]
    save = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--save-screenshot" else None
    if not check(os.access(CHROMIUM, os.X_OK), CHROMIUM + " is installed (tools/install-deps.sh)"):
        return 1
    schema = schema_from_docs(docs)
    jsonschema.Draft202012Validator.check_schema(schema)
    digits = os.path.join(examples, "digits")
    tmp = tempfile.mkdtemp(prefix="ptq-report-test-")
    try:
        runs = {
            "bundled": ["calibrate", "--quiet"],
            "files": ["calibrate", os.path.join(examples, "configs", "quant_hfmg.cfg"),
                      "--quiet", "--model", os.path.join(digits, "manifest.json"), "--weights",
                      os.path.join(digits, "model.safetensors"), "--batches",
                      os.path.join(digits, "batch0.safetensors"),
                      os.path.join(digits, "batch1.safetensors")],
        }
        for name, args in runs.items():
            page, data = os.path.join(tmp, name + ".html"), os.path.join(tmp, name + ".json")
            code, out, err = run([ptq] + args + ["--record", os.path.join(tmp, name + ".txt"),
                                                 "--report", page, "--report-json", data])
            if not check(code == 0, name + ": ptq calibrate --report exit %d: %s" % (code, err)):
                continue
            check("report:             " + page in out, name + ": stdout names the report")
            report = json.load(open(data, encoding="utf-8"))
            errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(report),
                            key=lambda e: list(e.path))
            check(not errors, name + ": JSON matches docs/report.md's schema: " +
                  "; ".join("%s: %s" % (list(e.path), e.message) for e in errors[:5]))
            check(len(report["layers"]) == 4, name + ": four layers")
            structural_check(name, open(page, encoding="utf-8").read())
            browser_check(name, page, report, tmp, save if name == "bundled" else None)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES), file=sys.stderr)
        return 1
    print("all report browser checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
