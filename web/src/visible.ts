// What a person sees is what runs: the web UI's copy of the one rule in
// `crates/core/src/visible.rs` (the CLI's). Every character that is drawn as something
// else or as nothing — control characters, bidirectional overrides and isolates
// (U+202A–U+202E, U+2066–U+2069, U+200E/F, U+061C), zero-width and other invisible
// characters — is written as its code, `\u{202e}`, so an approval card cannot show
// `src/"main.rs` for a call that writes `src/<U+202E>sr.niam`. A backslash before `u{`
// is doubled, so the literal text `\u{202e}` cannot pass for an escaped override. Keep
// the ranges here and in visible.rs the same (web/test/visible.test.ts holds the cases
// of both).

/** Code points drawn as nothing or as something else, besides control characters. */
const HIDDEN_RANGES: ReadonlyArray<readonly [number, number]> = [
  [0x00ad, 0x00ad], // soft hyphen
  [0x034f, 0x034f], // combining grapheme joiner
  [0x061c, 0x061c], // Arabic letter mark
  [0x115f, 0x1160], // Hangul fillers
  [0x17b4, 0x17b5], // Khmer inherent vowels
  [0x180b, 0x180f], // Mongolian variation selectors and vowel separator
  [0x200b, 0x200f], // zero-width space, (non-)joiner, LRM, RLM
  [0x2028, 0x2029], // line and paragraph separators
  [0x202a, 0x202e], // LRE, RLE, PDF, LRO, RLO
  [0x2060, 0x206f], // word joiner, invisible operators, LRI/RLI/FSI/PDI
  [0x3164, 0x3164], // Hangul filler
  [0xfe00, 0xfe0f], // variation selectors
  [0xfeff, 0xfeff], // zero-width no-break space (BOM)
  [0xffa0, 0xffa0], // halfwidth Hangul filler
  [0xfff9, 0xfffb], // interlinear annotation
  [0x1d173, 0x1d17a], // musical formatting
  [0xe0000, 0xe007f], // tags
  [0xe0100, 0xe01ef], // variation selectors supplement
];

/** Whether a code point is hidden: `keepLines` keeps `\n` and `\t` (a block of text). */
export function hidden(code: number, keepLines: boolean): boolean {
  if (keepLines && (code === 0x0a || code === 0x09)) return false;
  if (code < 0x20 || (code >= 0x7f && code <= 0x9f)) return true;
  return HIDDEN_RANGES.some(([from, to]) => code >= from && code <= to);
}

/** `text` as a person should see it; blocks keep their line breaks and tabs. */
export function visible(text: string, keepLines = true): string {
  let out = "";
  let index = 0;
  for (const ch of text) {
    const code = ch.codePointAt(0) ?? 0;
    if (hidden(code, keepLines)) out += `\\u{${code.toString(16)}}`;
    else if (ch === "\\" && text.startsWith("u{", index + 1)) out += "\\\\";
    else out += ch;
    index += ch.length;
  }
  return out;
}

/** One line: line breaks and tabs escaped too (a name, a table cell). */
export function visibleLine(text: string): string {
  return visible(text, false);
}

/**
 * JSON for a person to edit: every hidden character inside a string written as a JSON
 * escape (`\u202e`), so the editor shows it and the edited text still parses to the
 * same value.
 */
export function editableJson(json: string): string {
  let out = "";
  for (const ch of json) {
    const code = ch.codePointAt(0) ?? 0;
    // Newlines and indentation outside strings are JSON's own; inside strings
    // JSON.stringify has already escaped control characters.
    if (code > 0x7f && hidden(code, true)) {
      out += code > 0xffff
        ? ch.split("").map((unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, "0")}`).join("")
        : `\\u${code.toString(16).padStart(4, "0")}`;
    } else out += ch;
  }
  return out;
}
