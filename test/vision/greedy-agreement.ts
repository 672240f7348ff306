/**
 * Whether fennec's served greedy answer agrees with llama-mtmd-cli's, judged as the architecture tests judge greedy
 * tokens (llamacpp-gemma3.test.ts's TIE_GAP): the same text, or texts that part at a step where fennec's top two
 * candidates were within TIE_GAP in log-probability. Random weights make such near ties, and llama.cpp's kernels on
 * another CPU round differently, so at one either side may pick either token. mtmd-cli cannot be
 * teacher-forced, so nothing after the parting is compared.
 */
export const TIE_GAP = 0.03;

/** One step of an OpenAI chat `logprobs.content` list, asked for with `top_logprobs: 2`. */
export interface ServedStep {
  readonly bytes: number[];
  readonly top_logprobs: readonly { logprob: number }[];
}

export interface GreedyJudgement {
  readonly agrees: boolean;
  /** One line for the log: same, or where the texts part and that step's top-2 margin. */
  readonly summary: string;
  readonly smallestMargin: number;
}

const margin = (step: ServedStep): number => (step.top_logprobs.length > 1 ? step.top_logprobs[0]!.logprob - step.top_logprobs[1]!.logprob : Infinity);

/** `content` is fennec's message content (untrimmed), `steps` its logprobs, `theirs` mtmd-cli's stdout trimmed. */
export function judgeGreedy(content: string, steps: readonly ServedStep[], theirs: string): GreedyJudgement {
  const margins = steps.map(margin);
  const smallestMargin = Math.min(...margins);
  const ours = content.trim();
  if (ours === theirs) return { agrees: true, summary: "same", smallestMargin };

  const encoder = new TextEncoder();
  const oursBytes = encoder.encode(ours), theirsBytes = encoder.encode(theirs);
  const contentLength = encoder.encode(content).length;
  let parted = 0;
  while (parted < oursBytes.length && parted < theirsBytes.length && oursBytes[parted] === theirsBytes[parted]) parted++;
  // the byte of fennec's whole content where the texts part, and the step whose token holds it
  const at = contentLength - encoder.encode(content.trimStart()).length + parted;
  const starts: number[] = [];
  let end = 0;
  for (const step of steps) starts.push(end), end += step.bytes.length;
  let step = starts.findLastIndex((start) => start <= at);
  if (step < 0) step = 0;
  // The first differing token is the step holding that byte, or the one before when the byte starts a token (fennec's
  // token was a prefix of llama.cpp's). Where a step's bytes are not its text's (a token that is part of a UTF-8
  // sequence is written U+FFFD), the steps do not add up to the content: any step up to that byte may be the one.
  const exact = end === contentLength;
  const candidates = exact ? (starts[step] === at && step > 0 ? [step - 1, step] : [step]) : Array.from({ length: step + 1 }, (_, i) => i);
  const tie = candidates.find((i) => margins[i]! <= TIE_GAP);
  const where = `parts at byte ${parted} of ${theirsBytes.length}, step ${step}${exact ? "" : " (steps and text not byte-aligned)"}`;
  return tie === undefined
    ? { agrees: false, summary: `DIFFERENT: ${where}, top-2 margin ${Math.min(...candidates.map((i) => margins[i]!)).toFixed(4)} > ${TIE_GAP}`, smallestMargin }
    : { agrees: true, summary: `near tie: ${where}, top-2 margin ${margins[tie]!.toFixed(4)} at step ${tie}`, smallestMargin };
}
