/**
 * Token types as GGUF stores them (`tokenizer.ggml.token_type`) and the attribute bits llama.cpp derives from them
 * (llama.h `llama_token_type` / `llama_token_attr`). Attributes are bit flags because load-time rules add bits
 * (e.g. an end-of-turn text gets CONTROL, phi-3 special tokens get RSTRIP).
 */

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

/** GGUF token_type value -> attribute bits; unknown values map to UNDEFINED, as in llama.cpp. */
export const TOKEN_TYPE_TO_ATTR: readonly number[] = [
  /* 0 UNDEFINED    */ TokenAttr.UNDEFINED,
  /* 1 NORMAL       */ TokenAttr.NORMAL,
  /* 2 UNKNOWN      */ TokenAttr.UNKNOWN,
  /* 3 CONTROL      */ TokenAttr.CONTROL,
  /* 4 USER_DEFINED */ TokenAttr.USER_DEFINED,
  /* 5 UNUSED       */ TokenAttr.UNUSED,
  /* 6 BYTE         */ TokenAttr.BYTE,
];

/** Tokens that are rendered only when special tokens are wanted, and that parse_special=false never matches. */
export const SPECIAL_ATTRS = TokenAttr.UNKNOWN | TokenAttr.CONTROL;
