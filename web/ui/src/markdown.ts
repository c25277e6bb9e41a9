// A small, safe markdown subset: paragraphs, headings, fenced code blocks,
// lists, blockquotes, inline code, bold, italic and links. It builds a tree
// that components render as elements: no innerHTML anywhere, so raw HTML in
// the input is shown as text. Links keep only http, https and mailto hrefs.

export type Inline =
  | { t: "text"; v: string }
  | { t: "code"; v: string }
  | { t: "strong"; c: Inline[] }
  | { t: "em"; c: Inline[] }
  | { t: "link"; href: string; c: Inline[] }
  | { t: "br" };

export type Block =
  | { t: "p"; c: Inline[] }
  | { t: "h"; level: number; c: Inline[] }
  | { t: "pre"; lang: string; v: string }
  | { t: "ul" | "ol"; items: Inline[][] }
  | { t: "quote"; c: Inline[] };

export function safeHref(href: string): string | undefined {
  const h = href.trim();
  return /^(https?:\/\/|mailto:)/i.test(h) ? h : undefined;
}

export function parseInline(s: string): Inline[] {
  const out: Inline[] = [];
  let text = "";
  const flush = () => { if (text) { out.push({ t: "text", v: text }); text = ""; } };
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (c === "\\" && i + 1 < s.length && /[\\`*_\[\]()#>-]/.test(s[i + 1])) { text += s[i + 1]; i += 2; continue; }
    if (c === "`") {
      const j = s.indexOf("`", i + 1);
      if (j > i) { flush(); out.push({ t: "code", v: s.slice(i + 1, j) }); i = j + 1; continue; }
    }
    if ((c === "*" || c === "_") && s[i + 1] === c) {
      const j = s.indexOf(c + c, i + 2);
      if (j > i + 2) { flush(); out.push({ t: "strong", c: parseInline(s.slice(i + 2, j)) }); i = j + 2; continue; }
    }
    if (c === "*" || (c === "_" && (i === 0 || /\W/.test(s[i - 1])))) {
      const j = s.indexOf(c, i + 1);
      if (j > i + 1 && s[i + 1] !== " ") { flush(); out.push({ t: "em", c: parseInline(s.slice(i + 1, j)) }); i = j + 1; continue; }
    }
    if (c === "[") {
      const m = /^\[([^\]]*)\]\(([^)\s]+)\)/.exec(s.slice(i));
      if (m) {
        const href = safeHref(m[2]);
        flush();
        if (href) out.push({ t: "link", href, c: parseInline(m[1]) });
        else out.push({ t: "text", v: m[1] });
        i += m[0].length;
        continue;
      }
    }
    if (c === "h") {
      const m = /^https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"]/.exec(s.slice(i));
      if (m && (i === 0 || /\s|\(/.test(s[i - 1]))) { flush(); out.push({ t: "link", href: m[0], c: [{ t: "text", v: m[0] }] }); i += m[0].length; continue; }
    }
    if (c === "\n") { flush(); out.push({ t: "br" }); i++; continue; }
    text += c;
    i++;
  }
  flush();
  return out;
}

export function parseMarkdown(src: string): Block[] {
  const lines = src.replace(/\r\n?/g, "\n").split("\n");
  const blocks: Block[] = [];
  let para: string[] = [];
  const endPara = () => { if (para.length) { blocks.push({ t: "p", c: parseInline(para.join("\n")) }); para = []; } };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^\s*(```|~~~)\s*([\w+-]*)\s*$/.exec(line);
    if (fence) {
      endPara();
      const body: string[] = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      blocks.push({ t: "pre", lang: fence[2], v: body.join("\n") });
      continue;
    }
    if (line.trim() === "") { endPara(); continue; }
    const h = /^(#{1,6})\s+(.*)$/.exec(line);
    if (h) { endPara(); blocks.push({ t: "h", level: h[1].length, c: parseInline(h[2]) }); continue; }
    const li = /^\s*([-*+]|\d+[.)])\s+(.*)$/.exec(line);
    if (li) {
      endPara();
      const kind = /\d/.test(li[1]) ? "ol" : "ul";
      const items: Inline[][] = [parseInline(li[2])];
      while (i + 1 < lines.length) {
        const nx = /^\s*([-*+]|\d+[.)])\s+(.*)$/.exec(lines[i + 1]);
        if (!nx || (/\d/.test(nx[1]) ? "ol" : "ul") !== kind) break;
        items.push(parseInline(nx[2]));
        i++;
      }
      blocks.push({ t: kind, items });
      continue;
    }
    const q = /^>\s?(.*)$/.exec(line);
    if (q) {
      endPara();
      const body = [q[1]];
      while (i + 1 < lines.length && /^>/.test(lines[i + 1])) body.push(lines[++i].replace(/^>\s?/, ""));
      blocks.push({ t: "quote", c: parseInline(body.join("\n")) });
      continue;
    }
    para.push(line);
  }
  endPara();
  return blocks;
}
