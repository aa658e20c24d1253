"""Finds the interface texts a page shows in a language other than English that did not
come from its catalog (SPEC §17).

A page in Chinese may still show Latin letters where they are data, not interface: a user's
name, a template's name, a value somebody typed, an address, JSON. The page says which
those are the HTML way, with `translate="no"` on the element that holds them (what
translation tools also read). Every other visible text, and every `aria-label`,
`placeholder`, `title` and `alt`, must then be free of English words. A word of two Latin
letters or more counts; the product's name and a few technical tokens do not.
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
        if words:
            found.append(f"{item['where']}: {item['text'][:120]!r}")
    return sorted(set(found))
