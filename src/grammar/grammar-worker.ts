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
import { fillRowStarts, type FillRow, type FillStatus, type FromGrammar, type GrammarThreadInit, type ToGrammar } from "./grammar-protocol.ts";
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
      case "fill": await this.fill(message.fillId, message.rows, message.withMasks); return;
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

  private async fill(fillId: number, rows: readonly FillRow[], withMasks: boolean): Promise<void> {
    const words = this.words;
    const starts = fillRowStarts(rows);
    const masks = new Int32Array(withMasks ? starts[rows.length]! * words : 0); // [sum(drafts + 1), words]
    const status: FillStatus[] = [];
    for (let r = 0; r < rows.length; r++) {
      const row = rows[r]!;
      const entry = this.matchers.get(row.requestId);
      /** the bitmask at position j (after the row's first j drafts) */
      const out = (j: number): Int32Array => masks.subarray((starts[r]! + j) * words, (starts[r]! + j + 1) * words);
      if (!entry) {
        if (withMasks) for (let j = 0; j <= row.drafts.length; j++) out(j).fill(-1);
        status.push({ kind: "ok", numValidDrafts: row.drafts.length });
        continue;
      }
      const { matcher } = entry;
      if (row.rollBack > 0) matcher.rollBack(row.rollBack);
      let rejected: number | null = null;
      for (const tokenId of row.accept) {
        if (matcher.isTerminated()) break; // past a stop token (ignore_eos): the grammar no longer constrains
        if (!matcher.acceptToken(tokenId)) { rejected = tokenId; break; }
      }
      if (rejected !== null) { status.push({ kind: "rejected", tokenId: rejected }); continue; }
      // vLLM grammar_bitmask: a mask at each draft position and the bonus one, advancing through the drafts, then
      // rolled back (the tokens the engine emits come back as `accept`); vLLM writes all-allowed rows once terminated
      let numValid = 0;
      for (let j = 0; ; j++) {
        if (withMasks) {
          if (matcher.isTerminated()) out(j).fill(-1);
          else out(j).set((await matcher.getNextTokenBitmask()).subarray(0, words));
        }
        // a draft past the grammar's end, or one it refuses, is invalid, and so is every draft after it
        if (j === row.drafts.length || matcher.isTerminated() || !matcher.acceptToken(row.drafts[j]!)) break;
        numValid++;
      }
      if (numValid > 0) matcher.rollBack(numValid);
      status.push({ kind: "ok", numValidDrafts: numValid });
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
