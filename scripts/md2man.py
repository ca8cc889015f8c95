#!/usr/bin/env python3
"""Turns one of docs/*.md into a man page (groff -man), at build time.

    md2man.py INPUT.md OUTPUT NAME SECTION "one-line description"

Handles the Markdown the docs use: # and ## and ### headings, paragraphs, "- " lists, tables
(each row becomes a tagged paragraph: the first cell is the tag), indented and fenced code
blocks, `code`, **bold**, [links](target) (the text is kept). The first "# " heading is the
page's title and is replaced by the NAME section.
"""
import datetime
import os
import re
import sys


def escape(text):
    """groff-safe text: backslashes and hyphens escaped, non-ASCII as \\[uXXXX]."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "".join(c if ord(c) < 128 else "\\[u%04X]" % ord(c) for c in text)


def inline(text):
    """Inline Markdown to groff fonts; the text is escaped around the markup."""
    out = []
    pos = 0
    pattern = re.compile(r"`([^`]*)`|\*\*([^*]+)\*\*|\[([^\]]+)\]\([^)]*\)")
    for m in pattern.finditer(text):
        out.append(escape(text[pos:m.start()]))
        if m.group(1) is not None:
            out.append("\\fB" + escape(m.group(1)) + "\\fR")
        elif m.group(2) is not None:
            out.append("\\fB" + escape(m.group(2)) + "\\fR")
        else:
            out.append(escape(m.group(3)))
        pos = m.end()
    out.append(escape(text[pos:]))
    return "".join(out)


def line_safe(text):
    """A groff text line may not start with '.' or "'" (a request)."""
    return "\\&" + text if text[:1] in (".", "'") else text


def cells(row):
    """The cells of a table row; "\\|" is a literal bar."""
    row = row.strip().strip("|")
    parts, cur, i = [], "", 0
    while i < len(row):
        if row[i] == "\\" and i + 1 < len(row) and row[i + 1] == "|":
            cur += "|"
            i += 2
            continue
        if row[i] == "|":
            parts.append(cur.strip())
            cur = ""
        else:
            cur += row[i]
        i += 1
    parts.append(cur.strip())
    return parts


def convert(md, name, section, description, date):
    out = [
        '.TH "%s" "%s" "%s" "Propeller" "Propeller manual"' % (name.upper(), section, date),
        ".SH NAME",
        "%s \\- %s" % (escape(name), escape(description)),
    ]
    lines = md.splitlines()
    i = 0
    para = []

    def flush():
        if para:
            out.append(".PP")
            out.append(line_safe(inline(" ".join(s.strip() for s in para))))
            para.clear()

    seen_title = False
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            flush()
            i += 1
            out.extend([".RS 4", ".nf"])
            while i < len(lines) and not lines[i].startswith("```"):
                out.append(line_safe(escape(lines[i])))
                i += 1
            out.extend([".fi", ".RE"])
            i += 1
            continue
        if line.startswith("    ") and not para:
            flush()
            out.extend([".RS 4", ".nf"])
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                if not lines[i].strip() and (i + 1 >= len(lines)
                                             or not lines[i + 1].startswith("    ")):
                    break
                out.append(line_safe(escape(lines[i][4:])))
                i += 1
            out.extend([".fi", ".RE"])
            continue
        heading = re.match(r"^(#+)\s+(.*)$", line)
        if heading:
            flush()
            level, title = len(heading.group(1)), heading.group(2)
            if level == 1 and not seen_title:
                seen_title = True
            elif level <= 2:
                out.append('.SH "%s"' % inline(title.upper()))
            else:
                out.append('.SS "%s"' % inline(title))
            i += 1
            continue
        if line.startswith("|"):
            flush()
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(cells(lines[i]))
                i += 1
            body = [r for r in rows if not all(re.fullmatch(r":?-+:?", c or "-") for c in r)]
            header, body = (body[0], body[1:]) if len(body) > 1 else ([], body)
            for r in body:
                out.append(".TP")
                out.append(line_safe(inline(r[0])))
                rest = []
                for k, c in enumerate(r[1:], start=1):
                    if not c:
                        continue
                    label = header[k] + ": " if k < len(header) and len(r) > 2 else ""
                    rest.append(label + c)
                out.append(line_safe(inline("; ".join(rest)) if rest else "\\&"))
            continue
        if re.match(r"^\s*- ", line):
            flush()
            item = [re.sub(r"^\s*- ", "", line)]
            i += 1
            while i < len(lines) and lines[i].startswith("  ") and lines[i].strip():
                item.append(lines[i].strip())
                i += 1
            out.append(".IP \\(bu 2")
            out.append(line_safe(inline(" ".join(item))))
            continue
        if not line.strip():
            flush()
            i += 1
            continue
        para.append(line)
        i += 1
    flush()
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) != 6:
        sys.stderr.write(__doc__)
        return 2
    src, dst, name, section, description = argv[1:]
    with open(src, encoding="utf-8") as f:
        md = f.read()
    # The page's date: SOURCE_DATE_EPOCH when set (reproducible builds), else today.
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    date = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc).date()
            if epoch else datetime.date.today()).isoformat()
    with open(dst, "w", encoding="utf-8") as f:
        f.write(convert(md, name, section, description, date))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
