"""Finds the interface texts a page shows in a language other than English that did not
come from its catalog (SPEC §17).

A page in Chinese may still show Latin letters where they are data, not interface: a user's
name, a template's name, a value somebody typed, an address, JSON. The page says which
those are the HTML way, with `translate="no"` on the element that holds them (what
translation tools also read). Every other visible text, and every `aria-label`,
`placeholder`, `title` and `alt`, must then hold Chinese or no English word: a text of
English words only is one that did not come from the catalog (every catalog entry has its
Chinese: tests/app/test_catalogs.py), and a text mixing the catalog's Chinese with data
("打开 Expense claim of 42.5", "修改 alice 的角色") is the catalog's sentence with its
values. A word of two Latin letters or more counts; the product's name and a few
technical tokens do not.
"""

from __future__ import annotations

import re

# Latin words a Chinese page may show as they are (the product's name; units, formats and
# the names of keys).
ALLOWED = frozenset({"bpflow", "HTTP", "HTTPS", "URL", "JSON", "API", "ID", "OK", "CSV",
                     "UTC", "Webhook", "Webhooks", "Token", "GMT", "KiB", "MiB", "KB", "MB",
                     "AM", "PM", "v", "TLS", "SMTP",
                     "alt", "Alt", "Ctrl", "Shift", "Enter", "Esc"})  # key names
WORD = re.compile(r"[A-Za-z]{2,}")
CHINESE = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")

FIND = r"""() => {
  const out = [];
  const exempt = (el) => !!(el && el.closest('[translate="no"], script, style, noscript,'
                                             + ' code, pre, [data-user-text]'));
  const hidden = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.display === 'none' || s.visibility === 'hidden') return true;
    }
    return false;
  };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const text = n.textContent.trim();
    if (!text || !/[A-Za-z]/.test(text)) continue;
    const el = n.parentElement;
    if (exempt(el) || hidden(el)) continue;
    out.push({where: el.tagName.toLowerCase() + (el.id ? '#' + el.id : ''), text});
  }
  for (const el of document.querySelectorAll('[aria-label], [placeholder], [title], [alt]')) {
    if (exempt(el) || hidden(el)) continue;
    for (const a of ['aria-label', 'placeholder', 'title', 'alt']) {
      const v = (el.getAttribute(a) || '').trim();
      if (v && /[A-Za-z]/.test(v))
        out.push({where: el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + '@' + a,
                  text: v});
    }
  }
  out.push({where: 'title', text: document.title});
  return out;
}"""


def untranslated(page) -> list[str]:
    """The texts of `page` (drawn in a language other than English) holding English words
    that are neither data marked `translate="no"` nor in `ALLOWED`: `where: text` each."""
    found = []
    for item in page.evaluate(FIND):
        words = [w for w in WORD.findall(item["text"]) if w not in ALLOWED]
        if words and not CHINESE.search(item["text"]):
            found.append(f"{item['where']}: {item['text'][:120]!r}")
    return sorted(set(found))
