/**
 * A depth-limited suffix trie with occurrence counts, the data structure of suffix decoding (arXiv 2411.04975; vLLM
 * runs Arctic Inference's SuffixTree, arctic_inference/suffix_decoding). Every suffix of every sequence, cut to
 * `maxDepth` tokens, is a path from the root; a node's count is how many (sequence, start) suffixes pass through or
 * end at it, so count(child) / count(node) estimates the probability of the child's token after the node's text.
 * Arctic compresses chains into edges; this trie keeps one node per token (same counts, same drafts; simpler to keep
 * right, about maxDepth nodes per token of text no other suffix shares).
 *
 * Drafting (Arctic SuffixTree.speculate with use_tree_spec off): for every match length m = 1 .. |pattern| - 1 whose
 * last-m-tokens text is in the trie, follow the most frequent child (lowest token id among equals) while the running
 * probability stays >= minTokenProb, at most min(maxSpecTokens, floor(m * maxSpecFactor)) tokens; the draft's score is
 * the sum of its tokens' probabilities, and the best score wins (the longer match among equals).
 */

interface TrieNode {
  count: number;
  /** token -> child; null until the first child */
  children: Map<number, TrieNode> | null;
}

export interface SuffixDraft {
  readonly tokenIds: readonly number[];
  /** sum of the drafted tokens' estimated probabilities */
  readonly score: number;
  /** the pattern suffix length it continues (0: nothing matched) */
  readonly matchLen: number;
}

export const EMPTY_SUFFIX_DRAFT: SuffixDraft = { tokenIds: [], score: 0, matchLen: 0 };

/** How a draft is grown from a match (vLLM speculative-config suffix_decoding_* keys). */
export interface SuffixSpeculation {
  readonly maxSpecTokens: number;
  /** at most floor(matchLen x this) tokens */
  readonly maxSpecFactor: number;
  /** stop once the estimated probability of the next token falls below this */
  readonly minTokenProb: number;
}

export class SuffixTree {
  private readonly root: TrieNode = { count: 0, children: null };
  /** sequence id -> its tokens */
  private readonly seqs = new Map<number, number[]>();
  /** sequence id -> the nodes where its last (up to maxDepth) suffixes end, oldest first */
  private readonly active = new Map<number, TrieNode[]>();
  /** nodes in the trie, the root excluded (memory: tests, logs) */
  numNodes = 0;

  constructor(readonly maxDepth: number) {}

  has(seqId: number): boolean { return this.seqs.has(seqId); }

  /** Appends one token to a sequence (created when new): every live suffix of it grows by one node. */
  append(seqId: number, token: number): void {
    let seq = this.seqs.get(seqId);
    let active = this.active.get(seqId);
    if (!seq || !active) {
      seq = [];
      active = [];
      this.seqs.set(seqId, seq);
      this.active.set(seqId, active);
    }
    seq.push(token);
    // a new suffix starts here; the oldest stops growing once it is maxDepth long
    this.root.count++;
    active.push(this.root);
    if (active.length > this.maxDepth) active.shift();
    for (let i = 0; i < active.length; i++) {
      const node = active[i]!;
      node.children ??= new Map();
      let child = node.children.get(token);
      if (!child) {
        child = { count: 0, children: null };
        node.children.set(token, child);
        this.numNodes++;
      }
      child.count++;
      active[i] = child;
    }
  }

  extend(seqId: number, tokens: readonly number[]): void {
    for (const t of tokens) this.append(seqId, t);
  }

  /** Takes a sequence's suffixes out of the trie (nodes no suffix reaches any more are dropped). */
  remove(seqId: number): void {
    const seq = this.seqs.get(seqId);
    if (!seq) return;
    for (let start = 0; start < seq.length; start++) {
      this.root.count--;
      let node = this.root;
      for (let i = start; i < seq.length && i - start < this.maxDepth; i++) {
        const child = node.children!.get(seq[i]!)!;
        child.count--;
        if (child.count === 0) {
          // only this suffix reached it: its whole subtree goes with it
          node.children!.delete(seq[i]!);
          this.numNodes -= countNodes(child);
          break;
        }
        node = child;
      }
    }
    this.seqs.delete(seqId);
    this.active.delete(seqId);
  }

  /** The node the text `tokens` ends at, or null when no suffix holds it. */
  private find(tokens: readonly number[], from: number): TrieNode | null {
    let node = this.root;
    for (let i = from; i < tokens.length; i++) {
      const child = node.children?.get(tokens[i]!);
      if (!child) return null;
      node = child;
    }
    return node;
  }

  /** The best continuation of `pattern` (its last tokens), per the rules in this file's header. */
  speculate(pattern: readonly number[], spec: SuffixSpeculation): SuffixDraft {
    let best = EMPTY_SUFFIX_DRAFT;
    for (let matchLen = 1; matchLen < pattern.length; matchLen++) {
      const node = this.find(pattern, pattern.length - matchLen);
      if (node === null) break; // a longer suffix cannot match either
      const maxTokens = Math.max(0, Math.min(spec.maxSpecTokens, Math.floor(matchLen * spec.maxSpecFactor + 1e-6)));
      const draft = followLikeliest(node, maxTokens, spec.minTokenProb);
      if (draft.score >= best.score) best = { ...draft, matchLen };
    }
    return best;
  }
}

function countNodes(node: TrieNode): number {
  let n = 1;
  if (node.children) for (const c of node.children.values()) n += countNodes(c);
  return n;
}

/** Arctic _speculate_path: the most frequent child each step, while the running probability >= minTokenProb. */
function followLikeliest(start: TrieNode, maxTokens: number, minTokenProb: number): { tokenIds: number[]; score: number } {
  const tokenIds: number[] = [];
  let score = 0;
  let prob = 1;
  let node = start;
  while (tokenIds.length < maxTokens && node.children !== null) {
    let bestToken = -1;
    let bestChild: TrieNode | null = null;
    for (const [token, child] of node.children) {
      if (bestChild === null || child.count > bestChild.count || (child.count === bestChild.count && token < bestToken)) {
        bestToken = token;
        bestChild = child;
      }
    }
    if (bestChild === null) break;
    prob *= bestChild.count / node.count;
    if (prob < minTokenProb) break;
    tokenIds.push(bestToken);
    score += prob;
    node = bestChild;
  }
  return { tokenIds, score };
}
