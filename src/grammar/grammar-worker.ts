/**
 * The engine's grammar thread: owns xgrammar (@mlc-ai/web-xgrammar, vLLM's default structured-output backend, its
 * WASM build) for one model: the TokenizerInfo built once, a compiler, an LRU cache of compiled grammars and one
 * GrammarMatcher per structured request. Compiling here keeps it off the engine's step loop (vLLM compiles on a thread
 * pool while the request waits in WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR), and bitmasks are filled here while the
 * engine runs the forward pass (vLLM fills them in the scheduler, the model runner applies them).
 *
 * xgrammar reports bad input by aborting inside WASM; after an abort its memory cannot be trusted (repeated aborts
 * corrupt it), so the thread says "poisoned" and the engine replaces it (grammar-thread.ts).
 */
import * as xg from "@mlc-ai/web-xgrammar";
import type { CompiledGrammar, GrammarCompiler, GrammarMatcher as Matcher } from "@mlc-ai/web-xgrammar";
import { cleanXGrammarError, compileGrammar, grammarKey, GRAMMAR_ERROR_PREFIX, type GrammarSpec } from "./grammar-spec.ts";
import type { FillStatus, FromGrammar, GrammarThreadInit, ToGrammar } from "./grammar-protocol.ts";
import { unreachable } from "../util/result.ts";
import { errorMessage } from "../util/error-message.ts";

declare const self: Worker;

// xgrammar binds console.error when it instantiates its WASM (at its first call, not at import): route what it
// prints into the error being built
let printed = "";
console.error = (...args: unknown[]): void => { printed += args.map(String).join(" ") + "\n"; };

function post(message: FromGrammar, transfer: Transferable[] = []): void {
  self.postMessage(message, transfer);
}

interface RequestMatcher {
  readonly matcher: Matcher;
}

class GrammarThread {
  private compiler: GrammarCompiler | null = null;
  private words = 0;
  /** grammar key -> compiled grammar, oldest first (Map order) */
  private readonly cache = new Map<string, CompiledGrammar>();
  private cacheSize = 64;
  private readonly matchers = new Map<string, RequestMatcher>();
  /** messages that arrive while the tokenizer info is built */
  private readonly pending: ToGrammar[] = [];
  private starting = false;
  private poisoned = false;

  async handle(message: ToGrammar): Promise<void> {
    if (message.type === "init") { await this.start(message.init); return; }
    if (!this.compiler) { this.pending.push(message); return; }
    switch (message.type) {
      case "compile": await this.compile(message.requestId, message.spec, message.stopTokenIds); return;
      case "fill": await this.fill(message.fillId, message.rows); return;
      case "free":
        for (const id of message.requestIds) {
          this.matchers.get(id)?.matcher.dispose();
          this.matchers.delete(id);
        }
        return;
      default: unreachable(message);
    }
  }

  private async start(init: GrammarThreadInit): Promise<void> {
    if (this.starting) return;
    this.starting = true;
    const t0 = performance.now();
    const info = await xg.TokenizerInfo.createTokenizerInfo([...init.vocab.encodedVocab], init.vocab.vocabType, init.vocab.prependSpace, init.vocabSize);
    // our own LRU cache instead of xgrammar's, which has no bound in the web build
    this.compiler = await xg.GrammarCompiler.createGrammarCompiler(info, false);
    this.words = Math.ceil(init.vocabSize / 32);
    this.cacheSize = init.cacheSize;
    post({ type: "ready", tokenizerInfoMs: performance.now() - t0 });
    for (const m of this.pending.splice(0)) await this.handle(m);
  }

  private async compile(requestId: string, spec: GrammarSpec, stopTokenIds: readonly number[]): Promise<void> {
    const t0 = performance.now();
    const key = grammarKey(spec);
    let compiled = this.cache.get(key);
    const cached = compiled !== undefined;
    printed = "";
    try {
      if (compiled) {
        this.cache.delete(key); // re-insert: most recently used last
      } else {
        compiled = await compileGrammar(xg, this.compiler!, spec);
      }
      this.cache.set(key, compiled);
      while (this.cache.size > this.cacheSize) {
        const [oldKey, old] = this.cache.entries().next().value as [string, CompiledGrammar];
        this.cache.delete(oldKey);
        old.dispose(); // matchers hold their own reference
      }
      const matcher = await xg.GrammarMatcher.createGrammarMatcher(compiled, [...stopTokenIds]);
      this.matchers.get(requestId)?.matcher.dispose();
      this.matchers.set(requestId, { matcher });
      post({ type: "compiled", requestId, compileMs: performance.now() - t0, cached });
    } catch (e) {
      this.poisoned ||= e instanceof WebAssembly.RuntimeError;
      const detail = cleanXGrammarError(printed) || errorMessage(e);
      post({ type: "compileFailed", requestId, message: GRAMMAR_ERROR_PREFIX[spec.kind] + detail, poisoned: this.poisoned });
    }
  }

  private async fill(fillId: number, rows: readonly { requestId: string; rollBack: number; accept: readonly number[] }[]): Promise<void> {
    const words = this.words;
    const masks = new Int32Array(rows.length * words); // [rows, words]
    const status: FillStatus[] = [];
    for (let r = 0; r < rows.length; r++) {
      const row = rows[r]!;
      const entry = this.matchers.get(row.requestId);
      const out = masks.subarray(r * words, (r + 1) * words);
      if (!entry) { out.fill(-1); status.push({ kind: "ok" }); continue; }
      const { matcher } = entry;
      if (row.rollBack > 0) matcher.rollBack(row.rollBack);
      let rejected: number | null = null;
      for (const tokenId of row.accept) {
        if (matcher.isTerminated()) break; // past a stop token (ignore_eos): the grammar no longer constrains
        if (!matcher.acceptToken(tokenId)) { rejected = tokenId; break; }
      }
      if (rejected !== null) { status.push({ kind: "rejected", tokenId: rejected }); continue; }
      // vLLM writes an all-allowed row for a terminated grammar
      if (matcher.isTerminated()) out.fill(-1);
      else out.set((await matcher.getNextTokenBitmask()).subarray(0, words));
      status.push({ kind: "ok" });
    }
    post({ type: "filled", fillId, words, masks, status }, [masks.buffer]);
  }
}

const thread = new GrammarThread();
// one message at a time, in order: a fill must see the matchers every earlier compile created
let chain: Promise<void> = Promise.resolve();
self.onmessage = (event: MessageEvent<ToGrammar>) => {
  chain = chain.then(() => thread.handle(event.data)).catch((e: unknown) => post({ type: "fatal", message: errorMessage(e) }));
};
