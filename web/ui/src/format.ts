// Formatting helpers: token counts. Pure functions, no DOM, unit tested.
import type { Usage } from "./types";

/** 1234567 -> "1,234,567" (the same in every locale, like the rest of the UI's English). */
export function groupDigits(n: number): string {
  const v = Math.max(0, Math.round(Number.isFinite(n) ? n : 0));
  return String(v).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** "1,234 in · 567 out tokens", or "" when there is no usage to show (absent, or both 0). */
export function tokens(u: Usage | null | undefined): string {
  const i = u?.input_tokens ?? 0, o = u?.output_tokens ?? 0;
  if (!(i > 0) && !(o > 0)) return "";
  return `${groupDigits(i)} in · ${groupDigits(o)} out tokens`;
}
