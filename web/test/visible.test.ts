// Unit tests of the one rule of what a person sees, as the UI applies it (run by
// web/test/run.mjs). The cases are those of crates/core/src/visible.rs, so the CLI and
// the UI escape the same characters the same way.
import assert from "node:assert/strict";
import { test } from "node:test";
import { editableJson, hidden, visible, visibleLine } from "../src/visible";

test("plain text is unchanged", () => {
  for (const text of ["src/main.rs", "héllo wörld", "日本語", "emoji 🎉", ""]) {
    assert.equal(visibleLine(text), text);
  }
  assert.equal(visible("two\nlines\tand a tab"), "two\nlines\tand a tab");
});

test("a right-to-left override cannot reverse a path", () => {
  assert.equal(visibleLine("src/\u202esr.niam"), "src/\\u{202e}sr.niam");
  const cases: Array<[string, string]> = [
    ["\u202a", "\\u{202a}"], ["\u202b", "\\u{202b}"], ["\u202c", "\\u{202c}"], ["\u202d", "\\u{202d}"],
    ["\u2066", "\\u{2066}"], ["\u2067", "\\u{2067}"], ["\u2068", "\\u{2068}"], ["\u2069", "\\u{2069}"],
    ["\u200e", "\\u{200e}"], ["\u200f", "\\u{200f}"], ["\u061c", "\\u{61c}"],
  ];
  for (const [ch, shown] of cases) assert.equal(visibleLine(`a${ch}b`), `a${shown}b`);
});

test("terminal escape sequences and C1 controls are shown", () => {
  assert.equal(visibleLine("\u001b]0;pwned\u0007tool"), "\\u{1b}]0;pwned\\u{7}tool");
  assert.equal(visibleLine("\u009b2J\u007f"), "\\u{9b}2J\\u{7f}");
  assert.equal(visibleLine("nul\u0000"), "nul\\u{0}");
});

test("invisible characters are shown, astral ones too", () => {
  for (const ch of ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u2028", "\u2029", "\u{e0041}", "\ufe0f", "\u3164"]) {
    const code = ch.codePointAt(0) ?? 0;
    assert.equal(visibleLine(`ab${ch}cd`), `ab\\u{${code.toString(16)}}cd`);
  }
});

test("line breaks are kept only in blocks; a carriage return never", () => {
  assert.equal(visibleLine("a\nb\tc"), "a\\u{a}b\\u{9}c");
  assert.equal(visible("a\nb\tc"), "a\nb\tc");
  assert.equal(visible("ok\rrm -rf"), "ok\\u{d}rm -rf");
});

test("a literal escape cannot pass for an escaped character", () => {
  assert.equal(visibleLine("a\\u{202e}b"), "a\\\\u{202e}b");
  assert.notEqual(visibleLine("a\\u{202e}b"), visibleLine("a\u202eb"));
  assert.equal(visibleLine("C:\\dir\\file"), "C:\\dir\\file");
});

test("hostile input never leaves a hidden character", () => {
  let hostile = "";
  for (let code = 0; code < 0x250; code++) hostile += String.fromCodePoint(code);
  for (let code = 0x2000; code < 0x2070; code++) hostile += String.fromCodePoint(code);
  for (let code = 0xfe00; code < 0xff00; code++) hostile += String.fromCodePoint(code);
  hostile += "\u{e0001}\u{e007f}\u{1d173}";
  for (const ch of visibleLine(hostile)) assert.ok(!hidden(ch.codePointAt(0) ?? 0, false), `U+${(ch.codePointAt(0) ?? 0).toString(16)}`);
});

test("the approval editor shows hidden characters and parses to the same arguments", () => {
  const args = { path: "src/\u202esr.niam\u200b", tag: "\u{e0041}", content: "\u001b[2J" };
  const edited = editableJson(JSON.stringify(args, null, 2));
  for (const ch of edited) {
    const code = ch.codePointAt(0) ?? 0;
    assert.ok(!hidden(code, true), `U+${code.toString(16)} in the editor`);
  }
  assert.ok(edited.includes("\\u202e"), edited);
  assert.deepEqual(JSON.parse(edited), args);
});
