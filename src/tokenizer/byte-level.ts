/**
 * GPT-2's byte-level alphabet: every byte gets a printable code point so byte-level BPE vocabularies are plain text.
 * Printable Latin-1 bytes map to themselves; the other 68 bytes map to U+0100, U+0101, ... in byte order
 * (llama.cpp unicode_byte_to_utf8_map, OpenAI's bytes_to_unicode).
 */

function buildByteToChar(): string[] {
  const chars: (string | undefined)[] = new Array(256);
  const isPrintable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  let next = 256;
  for (let b = 0; b < 256; b++) chars[b] = String.fromCodePoint(isPrintable(b) ? b : next++);
  return chars as string[];
}

/** byte (0..255) -> its one-character stand-in */
const BYTE_TO_CHAR: readonly string[] = buildByteToChar();

/** code point of a stand-in character -> byte */
const CHAR_CODE_TO_BYTE: ReadonlyMap<number, number> = new Map(BYTE_TO_CHAR.map((c, b) => [c.codePointAt(0)!, b]));

const utf8Encoder = new TextEncoder();

/** UTF-8 bytes of `text`, each written as its stand-in character. */
export function byteEncode(text: string): string {
  return byteEncodeBytes(utf8Encoder.encode(text));
}

/** Raw bytes (any, not only UTF-8), each written as its stand-in character (a tiktoken rank's bytes as token text). */
export function byteEncodeBytes(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += BYTE_TO_CHAR[b];
  return out;
}

/**
 * The bytes a byte-level token text stands for. A character outside the alphabet (never in a well-formed vocab)
 * is kept as its own UTF-8 bytes rather than dropped.
 */
export function byteDecode(tokenText: string): Uint8Array {
  const out: number[] = [];
  for (const ch of tokenText) {
    const b = CHAR_CODE_TO_BYTE.get(ch.codePointAt(0)!);
    if (b !== undefined) out.push(b);
    else out.push(...utf8Encoder.encode(ch));
  }
  return Uint8Array.from(out);
}
