import type { ComponentChildren } from "preact";
import { parseMarkdown, type Inline } from "../markdown";

function inl(list: Inline[]): ComponentChildren[] {
  return list.map((n, i) => {
    switch (n.t) {
      case "text": return n.v;
      case "code": return <code key={i}>{n.v}</code>;
      case "strong": return <strong key={i}>{inl(n.c)}</strong>;
      case "em": return <em key={i}>{inl(n.c)}</em>;
      case "br": return <br key={i} />;
      case "link": return <a key={i} href={n.href} target="_blank" rel="noopener noreferrer">{inl(n.c)}</a>;
    }
  });
}

export function Markdown({ text }: { text: string }) {
  const blocks = parseMarkdown(text);
  return (
    <div class="md">
      {blocks.map((b, i) => {
        switch (b.t) {
          case "p": return <p key={i}>{inl(b.c)}</p>;
          case "h": return <p key={i} class={`h h${b.level}`}><strong>{inl(b.c)}</strong></p>;
          case "pre": return <pre key={i}><code>{b.v}</code></pre>;
          case "ul": return <ul key={i}>{b.items.map((it, j) => <li key={j}>{inl(it)}</li>)}</ul>;
          case "ol": return <ol key={i}>{b.items.map((it, j) => <li key={j}>{inl(it)}</li>)}</ol>;
          case "quote": return <blockquote key={i}>{inl(b.c)}</blockquote>;
        }
      })}
    </div>
  );
}
