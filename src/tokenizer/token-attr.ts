/**
 * The attribute bits llama.cpp derives from GGUF token types (`tokenizer.ggml.token_type`, gguf/names.ts TokenType)
 * (llama.h `llama_token_type` / `llama_token_attr`). Attributes are bit flags because load-time rules add bits
 * (e.g. an end-of-turn text gets CONTROL, phi-3 special tokens get RSTRIP).
 */
import { TokenType } from "../gguf/names.ts";

export const TokenAttr = {
  UNDEFINED: 0,
  UNKNOWN: 1 << 0,
  UNUSED: 1 << 1,
  NORMAL: 1 << 2,
  CONTROL: 1 << 3,
  USER_DEFINED: 1 << 4,
  BYTE: 1 << 5,
  NORMALIZED: 1 << 6,
  LSTRIP: 1 << 7,
  RSTRIP: 1 << 8,
  SINGLE_WORD: 1 << 9,
} as const;

/** GGUF token_type value -> attribute bits; values not listed map to UNDEFINED, as in llama.cpp. */
export const TOKEN_TYPE_TO_ATTR: Readonly<Record<TokenType, number>> = {
  [TokenType.UNDEFINED]: TokenAttr.UNDEFINED,
  [TokenType.NORMAL]: TokenAttr.NORMAL,
  [TokenType.UNKNOWN]: TokenAttr.UNKNOWN,
  [TokenType.CONTROL]: TokenAttr.CONTROL,
  [TokenType.USER_DEFINED]: TokenAttr.USER_DEFINED,
  [TokenType.UNUSED]: TokenAttr.UNUSED,
  [TokenType.BYTE]: TokenAttr.BYTE,
};

/** Tokens that are rendered only when special tokens are wanted, and that parse_special=false never matches. */
export const SPECIAL_ATTRS = TokenAttr.UNKNOWN | TokenAttr.CONTROL;
