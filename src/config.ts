/**
 * Every CLI flag once: name, kind, default, the commands that take it, and its help text. `parseCommandArgs` turns
 * argv into one validated options object; nothing else reads argv. Each command then reads it once as its typed config
 * (`serveConfig`, `runBatchConfig`, `generateConfig`, `tokenizeConfig`): nothing below commands/ sees a flag name.
 * The one environment variable vLLM honours (VLLM_API_KEY) is read here, where --api-key is, and named in its help.
 * To add a flag: add one row to FLAGS (keep rows grouped by the command family that owns them; give numbers their
 * min/max there, so every command rejects a bad value with the same one line) and one field to its command's config.
 */
import type { EngineArgs, KvCacheDtypeName } from "./engine/protocol.ts";
import { parseKvTransfer } from "./engine/kv-transfer-config.ts";
import { speculativeConfigFromFlags, type SpeculativeConfig } from "./engine/speculative-config.ts";
import { parseHfOverrides, parsePoolerConfig, type Matryoshka, type PoolerConfig, type RunnerOption } from "./engine/pooler-config.ts";
import { parseLogLevel, type LogFormat, type LogLevel } from "./util/logger.ts";
import { readFileSync } from "node:fs";
import { err, ok, type Result } from "./util/result.ts";

export type Command = "serve" | "generate" | "tokenize" | "run-batch" | "chat" | "bench serve" | "bench throughput" | "bench latency" | "inspect" | "proxy" | "pull";
export const COMMANDS: Readonly<Record<Command, string>> = {
  serve: "Serve the OpenAI-compatible API (vLLM-style) on HTTP.",
  generate: "Generate text from a prompt and print it.",
  tokenize: "Print the token ids of a text.",
  "run-batch": "Run an OpenAI batch file (JSONL) offline, like `vllm run-batch`.",
  chat: "Chat in the terminal with a server (--url) or an in-process engine on a model, like `vllm chat` / `ollama run`.",
  "bench serve": "Benchmark any OpenAI-compatible server online, like `vllm bench serve` (same options, result block and JSON).",
  "bench throughput": "Benchmark offline throughput of an in-process engine, like `vllm bench throughput`.",
  "bench latency": "Benchmark the latency of one batch on an in-process engine, like `vllm bench latency`.",
  inspect: "Print a model file's facts (fennec inspect MODEL): architecture, parameters, tensors, memory in fennec.",
  proxy: "Split each request between a prefill and a decode server through kv_transfer_params, as vLLM's disaggregated-serving proxy.",
  pull: "Download a GGUF model from the Hugging Face Hub into its cache without serving it (fennec pull org/repo[:QUANT]), then print its path.",
};

/** list: one or more values after the flag (argparse nargs="+"), as vLLM's --api-key and --served-model-name */
type FlagKind = "string" | "int" | "float" | "bool" | "list";
type FlagValue = string | number | boolean | readonly string[] | null;

/**
 * What fennec does with a vLLM flag it has no use for (docs/vllm-flags.md lists every one). Given with a value that
 * `accepts` (or any value when `accepts` is absent): accepted, and serve logs one line `<flag> has no effect on
 * fennec: <noop>`. Any other value, or any value when there is no `noop`: refused (exit 2) with `refuse`, which says
 * what to use instead.
 */
export interface VllmFate {
  readonly noop?: string;
  readonly accepts?: (value: FlagValue) => boolean;
  readonly refuse?: string;
}

export interface FlagSpec {
  readonly name: string;
  readonly kind: FlagKind;
  readonly default: FlagValue;
  readonly commands: readonly Command[];
  readonly help: string;
  /** for string flags with a fixed set of values */
  readonly choices?: readonly string[];
  /** short alias such as "-i" */
  readonly alias?: string;
  /** what the value is, for --help (default: the choices, else the kind) */
  readonly metavar?: string;
  /** for int and float flags: the smallest and largest accepted value, checked at parse time for every command */
  readonly min?: number;
  readonly max?: number;
  /** int flags that take vLLM's human-readable suffixes (1k = 1000, 1K = 1024, 25.6k, 2M, 1G) */
  readonly humanReadable?: boolean;
  /** vLLM's name for the same flag, accepted too */
  readonly vllmName?: string;
  /** vLLM flags fennec does not implement: accepted with one log line, or refused (see VllmFate) */
  readonly fate?: VllmFate;
  /** other spellings vLLM takes (short options such as -tp) */
  readonly aliases?: readonly string[];
}

const ALL: readonly Command[] = ["serve", "generate", "tokenize", "run-batch", "chat", "bench throughput", "bench latency", "inspect", "pull"];
/** commands that run the model (generate runs it in-process, without the engine's scheduler or pipelines) */
const MODEL: readonly Command[] = ["serve", "generate", "run-batch", "chat", "bench throughput", "bench latency"];
const ENGINE: readonly Command[] = ["serve", "run-batch", "chat", "bench throughput", "bench latency"];
const BENCH_SERVE: readonly Command[] = ["bench serve"];
const BENCH_OFFLINE: readonly Command[] = ["bench throughput", "bench latency"];

const one = (v: FlagValue): boolean => v === 1 || v === "1";
const oneOf = (...values: string[]) => (v: FlagValue): boolean => typeof v === "string" && values.includes(v);
const ANY = ["serve", "run-batch"] as const satisfies readonly Command[];

/**
 * vLLM's serve flags that a deployment is likely to carry and fennec does not implement, with their fate
 * (docs/vllm-flags.md is this table in words). `default: null` so serve knows which ones were given.
 */
const VLLM_FATES: readonly FlagSpec[] = [
  { name: "tensor-parallel-size", aliases: ["-tp"], kind: "int", default: null, commands: ANY, help: "vLLM's GPU tensor parallelism: 1 is accepted (fennec's threads split every matmul already).", fate: { noop: "one process uses every core (--threads)", accepts: one, refuse: "fennec runs on one machine: use --threads for more cores, or several fennec processes behind a load balancer" } },
  { name: "pipeline-parallel-size", aliases: ["-pp"], kind: "int", default: null, commands: ANY, help: "vLLM's pipeline parallelism: 1 is accepted.", fate: { noop: "one process holds every layer", accepts: one, refuse: "fennec runs every layer in one process: use --pipeline pd / --stage-config for stages, or several processes behind a load balancer" } },
  { name: "data-parallel-size", aliases: ["-dp"], kind: "int", default: null, commands: ANY, help: "vLLM's data parallelism: 1 is accepted.", fate: { noop: "one engine per process", accepts: one, refuse: "run several fennec processes (one per port or socket) behind a load balancer" } },
  { name: "trust-remote-code", kind: "bool", default: null, commands: ANY, help: "Accepted: GGUF files carry no code to trust.", fate: { noop: "a GGUF file carries no Python code" } },
  { name: "enforce-eager", kind: "bool", default: null, commands: ANY, help: "Accepted: fennec has no CUDA graphs, it always runs eagerly.", fate: { noop: "there are no CUDA graphs, every step runs eagerly" } },
  { name: "enable-chunked-prefill", kind: "bool", default: null, commands: ANY, help: "Accepted: fennec always chunks long prefills (see --max-num-batched-tokens).", fate: { noop: "long prefills are always chunked to --max-num-batched-tokens" } },
  { name: "dtype", kind: "string", default: null, commands: ANY, help: "Accepted for auto/half/float16/bfloat16/float/float32: fennec keeps the GGUF weight types and computes in float32.", fate: { noop: "weights keep their GGUF types and activations are float32", accepts: oneOf("auto", "half", "float16", "bfloat16", "float", "float32"), refuse: "give auto, or convert the model to the GGUF type you want" } },
  { name: "swap-space", kind: "float", default: null, commands: ANY, help: "Accepted: the KV cache already lives in host memory (see --kv-offloading-size for a second tier).", fate: { noop: "the KV cache already lives in host memory; --kv-offloading-size adds an offload tier" } },
  { name: "cpu-offload-gb", kind: "float", default: null, commands: ANY, help: "Accepted for 0: the weights already live in host memory.", fate: { noop: "the weights already live in host memory", accepts: (v) => v === 0, refuse: "the weights already live in host memory: drop the flag" } },
  { name: "disable-custom-all-reduce", kind: "bool", default: null, commands: ANY, help: "Accepted: no GPUs to all-reduce across.", fate: { noop: "there is no cross-GPU all-reduce" } },
  { name: "max-seq-len-to-capture", kind: "int", default: null, commands: ANY, help: "Accepted: no CUDA graphs to capture.", fate: { noop: "there are no CUDA graphs" } },
  { name: "compilation-config", aliases: ["-O"], kind: "string", default: null, commands: ANY, help: "Accepted: no torch.compile.", fate: { noop: "the kernels are compiled WASM, there is no torch.compile" } },
  { name: "distributed-executor-backend", kind: "string", default: null, commands: ANY, help: "Accepted for mp/uni: one process, worker threads.", fate: { noop: "one process with worker threads", accepts: oneOf("mp", "uni"), refuse: "fennec has no Ray backend: run one fennec per machine" } },
  { name: "load-format", kind: "string", default: null, commands: ANY, help: "Accepted for auto/gguf: fennec loads GGUF files.", fate: { noop: "fennec loads GGUF files", accepts: oneOf("auto", "gguf"), refuse: "convert the model to GGUF (llama.cpp's convert_hf_to_gguf.py) and pass the .gguf file" } },
  { name: "quantization", aliases: ["-q"], kind: "string", default: null, commands: ANY, help: "Accepted for gguf: the GGUF file's own weight types are used.", fate: { noop: "the GGUF file's weight types are used as they are", accepts: oneOf("gguf"), refuse: "quantize to a GGUF type (q8_0, q4_k_m, ...) with llama.cpp and pass that file" } },
  { name: "tokenizer", kind: "string", default: null, commands: ANY, help: "Refused unless it names the model itself: fennec uses the tokenizer inside the GGUF file.", fate: { refuse: "fennec uses the tokenizer stored in the GGUF file: drop --tokenizer" } },
  { name: "tokenizer-mode", kind: "string", default: null, commands: ANY, help: "Accepted for auto: the GGUF file's tokenizer is used.", fate: { noop: "the GGUF file's tokenizer is used", accepts: oneOf("auto"), refuse: "fennec uses the tokenizer stored in the GGUF file: give auto" } },
  { name: "max-parallel-loading-workers", kind: "int", default: null, commands: ANY, help: "Accepted: one GGUF file is mapped at once.", fate: { noop: "one GGUF file is read in one pass" } },
  { name: "disable-frontend-multiprocessing", kind: "bool", default: null, commands: ["serve"], help: "Accepted: the engine always runs in a worker thread.", fate: { noop: "the engine always runs in its own worker thread" } },
  { name: "enable-lora", kind: "bool", default: null, commands: ANY, help: "Refused: no LoRA adapters.", fate: { refuse: "fennec serves no LoRA adapters: merge the adapter into the model and convert it to GGUF" } },
  { name: "lora-modules", kind: "list", default: null, commands: ["serve"], help: "Refused: no LoRA adapters.", fate: { refuse: "fennec serves no LoRA adapters: merge the adapter into the model and convert it to GGUF" } },
  { name: "max-lora-rank", kind: "int", default: null, commands: ANY, help: "Refused: no LoRA adapters.", fate: { refuse: "fennec serves no LoRA adapters: drop the flag" } },
  { name: "enable-sleep-mode", kind: "bool", default: null, commands: ["serve"], help: "Refused: no sleep mode.", fate: { refuse: "fennec has no sleep mode: stop and start the process instead" } },
  { name: "limit-mm-per-prompt", kind: "string", default: null, commands: ANY, help: "Refused: text-only models.", fate: { refuse: "fennec serves text-only models: drop the flag" } },
  { name: "hf-overrides", kind: "string", metavar: "json", default: null, commands: ANY, help: 'Only the matryoshka keys of vLLM\'s config overrides: {"is_matryoshka": true} lets embedding requests ask for fewer `dimensions`, {"matryoshka_dimensions": [64, 128, 256]} only those (the GGUF metadata is the rest of the config: edit it with gguf-py\'s gguf_set_metadata.py).' },
];

export const FLAGS: readonly FlagSpec[] = [
  // model
  { name: "model", kind: "string", metavar: "path|repo", default: null, commands: ALL, help: "A GGUF model file, or a Hugging Face repository to fetch it from: org/repo (its Q4_K_M file, else its first GGUF), org/repo:QUANT (e.g. Qwen/Qwen3-0.6B-GGUF:Q8_0) or hf://org/repo/file.gguf, downloaded once into the Hugging Face cache (HF_HOME, HF_HUB_CACHE, HF_TOKEN, HF_HUB_OFFLINE, HF_ENDPOINT as huggingface_hub reads them). A split model is given by its first part (name-00001-of-0000N.gguf). Default: the embedded stories260K model." },
  // the Hub (vLLM's model-loading flags, doing what they do there)
  { name: "revision", kind: "string", metavar: "rev", default: null, commands: ALL, help: "The branch, tag or commit of a Hugging Face model (as vLLM's --revision). Default: main. A local file is served as it is (the flag is then refused)." },
  { name: "download-dir", kind: "string", metavar: "dir", default: null, commands: ALL, help: "Where Hugging Face models are cached (as vLLM's --download-dir). Default: HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub." },
  { name: "hf-token", kind: "string", metavar: "token", default: null, commands: ALL, help: "The bearer token for private or gated Hugging Face models (as vLLM's --hf-token). Default: HF_TOKEN, else the token file `hf auth login` wrote." },
  // generate / tokenize
  { name: "prompt", kind: "string", metavar: "text", default: "", commands: ["generate"], help: 'Prompt text. An empty prompt starts from BOS.' },
  { name: "max-tokens", kind: "int", default: 64, min: 0, commands: ["generate"], help: "Maximum number of tokens to generate." },
  { name: "temperature", kind: "float", default: 0.8, min: 0, commands: ["generate"], help: "Sampling temperature; 0 is greedy." },
  { name: "seed", kind: "int", default: null, commands: ["generate"], help: "Random seed for reproducible sampling. Default: a new seed each run." },
  { name: "json", kind: "bool", default: false, commands: ["generate", "tokenize"], help: 'Print one JSON line instead of text: {"token_ids": [...]} (generate adds "text": the generated ids and text only).' },
  { name: "text", kind: "string", metavar: "text", default: null, commands: ["tokenize"], help: "Text to tokenize (required)." },
  { name: "add-special", kind: "bool", default: false, commands: ["tokenize"], help: "Add BOS/EOS as the model does and parse special-token texts." },
  // engine (vLLM names)
  { name: "threads", kind: "int", default: null, min: 1, max: 256, commands: MODEL, help: "Kernel threads. Default: the number of cores." },
  { name: "device", kind: "string", default: "cpu", commands: MODEL, choices: ["cpu", "webgpu"], help: "Run the model on the WASM CPU kernels or on a WebGPU adapter." },
  { name: "max-num-seqs", kind: "int", default: 16, min: 1, commands: ENGINE, help: "Maximum number of sequences running in one engine step." },
  { name: "max-num-batched-tokens", kind: "int", default: null, min: 1, humanReadable: true, commands: ENGINE, help: "Token budget of one engine step (prefill chunks plus decode tokens). Default: 512; for a model that attends bidirectionally (an embedding model such as EmbeddingGemma, each prompt computed in one step) the larger of 512 and --max-model-len, as vLLM without chunked prefill." },
  { name: "max-model-len", kind: "int", default: null, min: 1, humanReadable: true, commands: ENGINE, help: "Maximum prompt plus output length. Default: the model's context length." },
  { name: "block-size", kind: "int", default: 16, min: 1, commands: ENGINE, help: "Tokens per KV cache block." },
  { name: "kv-cache-memory", vllmName: "kv-cache-memory-bytes", kind: "int", metavar: "bytes", default: null, min: 1, humanReadable: true, commands: ENGINE, help: "Bytes for the KV cache (vLLM: --kv-cache-memory-bytes, also accepted), spread with the layers over the wasm32 memories the model needs (the start-up memory line says how). Default: a share of free memory, at most 1 GiB, capped by what max-num-seqs x max-model-len needs." },
  { name: "no-enable-prefix-caching", kind: "bool", default: false, commands: ENGINE, help: "Turn prefix caching off (on by default)." },
  { name: "disable-hybrid-kv-cache-manager", kind: "bool", default: false, commands: ENGINE, help: "Give every layer one KV block table (vLLM's flag). By default a model with sliding-window layers (gemma3) gets vLLM's hybrid KV cache manager: its sliding and full-attention layers keep separate block tables over one pool, and the blocks behind a sliding layer's window go back to the pool, so the same memory holds more tokens. Turned off by itself (one log line) with a KV connector (--kv-offloading-size, --kv-transfer-config), a draft model, or a model spread over several wasm32 memories." },
  { name: "kv-cache-dtype", kind: "string", default: "auto", commands: ENGINE, help: "Data type of the KV cache: auto / float16 (f16), or fp8 / fp8_e4m3 (vLLM's names for an 8-bit cache; fennec stores int8 with one scale per token row, llama.cpp's q8_0 rule: half the KV memory and the bytes attention reads; WASM kernels only, not --device webgpu). vLLM's other values are refused." },
  // KV offload tier under the prefix cache (vLLM's native offload and SimpleCPUOffloadConnector; docs in README)
  { name: "kv-offloading-size", kind: "float", metavar: "GiB", default: null, min: 0, commands: ENGINE, help: "Size of the KV cache offloading buffer in GiB: full prefix blocks are kept in host memory outside the kernels' memory and loaded back instead of recomputed (vLLM's native offload, OffloadingConnector; SimpleCPUOffloadConnector with VLLM_USE_SIMPLE_KV_OFFLOAD=1). Off when not given." },
  { name: "kv-offloading-backend", kind: "string", default: "native", commands: ENGINE, choices: ["native", "lmcache"], help: "Backend of --kv-offloading-size: native (fennec's host-memory tier); lmcache is refused (no LMCache server)." },
  { name: "kv-transfer-config", kind: "string", metavar: "json", default: null, commands: ENGINE, help: 'KV connector as a JSON object, vLLM\'s keys: {"kv_connector":"SimpleCPUOffloadConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":N,"lazy_offload":false,"kv_offload_backend":"cpu"|"disk","disk_path":"/path","disk_capacity_bytes":N,"use_page_cache":false}} or OffloadingConnector with cpu_bytes_to_use; or prefill/decode across instances: {"kv_connector":"NixlConnector","kv_role":"kv_producer"|"kv_consumer"|"kv_both","engine_id":"...","kv_ip":"host","kv_port":N,"kv_load_failure_policy":"fail"|"recompute","kv_connector_extra_config":{"kv_lease_duration":30}} (fennec\'s own TCP transport under vLLM\'s name, not the NIXL library; kv_ip/kv_port default to VLLM_NIXL_SIDE_CHANNEL_HOST/PORT, localhost:5600).' },
  { name: "return-tokens-as-token-ids", kind: "bool", default: false, commands: ["serve"], help: "Write logprob tokens as token_id:{id} (a request's return_tokens_as_token_ids overrides it), as vLLM." },
  { name: "scheduling-policy", kind: "string", choices: ["fcfs", "priority"], default: "fcfs", commands: ENGINE, help: "How waiting requests are ordered: fcfs (first come, first served) or priority (by the request's priority field, lower first, then arrival; the highest (priority, arrival) running request is preempted first), as vLLM." },
  { name: "runner", kind: "string", default: null, commands: ENGINE, choices: ["auto", "generate", "pooling"], help: "What the model is served as (vLLM's RunnerOption): auto (default) serves embeddings when the GGUF has a pooling type (<arch>.pooling_type mean, cls or last) and generation otherwise; pooling serves any model as an embedding model (/v1/embeddings, /pooling; LAST pooling unless the GGUF or --pooler-config says otherwise); generate serves generation only." },
  { name: "convert", kind: "string", default: null, commands: ENGINE, help: "vLLM's model conversion: auto / none change nothing, embed is --runner pooling (a generative model served as an embedding model); classify and reward are refused." },
  { name: "task", kind: "string", default: null, commands: ENGINE, help: "vLLM's deprecated task flag: auto / generate change nothing, embed (or embedding) is --runner pooling; classify, score, reward, transcription and draft are refused." },
  { name: "pooler-config", kind: "string", metavar: "json", default: null, commands: ENGINE, help: 'Pooling of an embedding model as vLLM configures it, a JSON object: {"pooling_type": "LAST" | "MEAN" | "CLS", "normalize": true, "dimensions": null}; each key overrides the GGUF\'s pooling type and vLLM\'s defaults (normalize true). ALL / STEP pooling and the classifier keys are refused.' },
  { name: "structured-outputs-config", kind: "string", metavar: "json", default: null, commands: ANY, help: 'Structured outputs as vLLM configures them, a JSON object: {"backend": "xgrammar"} ("auto" also picks xgrammar, fennec\'s one backend), "disable_any_whitespace": true (compact JSON for every request; with an explicit xgrammar backend, as vLLM requires).' },
  { name: "speculative-config", alias: "-sc", kind: "string", metavar: "json", default: null, commands: MODEL, help: 'Speculative decoding as vLLM configures it, a JSON object: {"method": "ngram", "num_speculative_tokens": 4} (prompt lookup; prompt_lookup_max / prompt_lookup_min default to 5) or {"method": "draft_model", "model": "draft.gguf", "num_speculative_tokens": 4} (a smaller GGUF with the same vocabulary) or {"method": "suffix"} (suffix decoding: suffix trees over the request and recent outputs; suffix_decoding_max_tree_depth 24, suffix_decoding_max_cached_requests 10000, suffix_decoding_max_spec_factor 1.0, suffix_decoding_min_token_prob 0.1).' },
  { name: "spec-method", kind: "string", metavar: "method", default: null, commands: MODEL, help: "Shortcut for --speculative-config's method (ngram, draft_model or suffix)." },
  { name: "spec-model", kind: "string", metavar: "path", default: null, commands: MODEL, help: "Shortcut for --speculative-config's model (a draft GGUF path)." },
  { name: "spec-tokens", kind: "int", default: null, min: 1, commands: MODEL, help: "Shortcut for --speculative-config's num_speculative_tokens." },
  { name: "enable-prefix-caching", kind: "bool", default: false, commands: ENGINE, help: "Prefix caching on (fennec's default; vLLM's --enable-prefix-caching). --no-enable-prefix-caching turns it off." },
  { name: "gpu-memory-utilization", kind: "float", metavar: "fraction", default: null, min: 0.01, max: 1, commands: ENGINE, help: "vLLM's memory share, on fennec a fraction of host memory: the engine (weights, activations and KV cache) may use this share of total RAM, and the KV cache pool gets what the weights and activations leave, no more than max-num-seqs x max-model-len can use (vLLM determine_available_memory). A model and pool larger than one 4 GiB wasm32 memory spread over several. --kv-cache-memory-bytes wins when both are given, as in vLLM." },
  { name: "seed", kind: "int", default: null, commands: ["serve", "run-batch"], help: "Seed of the engine's sampler: requests without their own seed draw from one stream started at this seed, so a run of the same requests repeats. Default: a new seed each start." },
  { name: "max-logprobs", kind: "int", default: 20, min: 0, commands: ["serve"], help: "Largest logprobs / top_logprobs / prompt_logprobs a request may ask for (vLLM's default 20)." },
  { name: "generation-config", kind: "string", metavar: "auto|vllm|folder", default: "auto", commands: ["serve"], help: "Server-side sampling defaults: auto (the model's; a GGUF carries none, so vLLM's), vllm (vLLM's), or a folder holding a generation_config.json whose temperature / top_p / top_k / min_p / repetition_penalty / max_new_tokens become the defaults of requests that omit them." },
  { name: "override-generation-config", kind: "string", metavar: "json", default: null, commands: ["serve"], help: 'JSON object of sampling defaults over --generation-config, e.g. \'{"temperature": 0.5}\' (vLLM\'s keys: temperature, top_p, top_k, min_p, repetition_penalty, max_new_tokens).' },
  // vLLM flags that mean nothing on fennec: accepted with one log line where the value changes nothing, else refused
  ...VLLM_FATES,
  // server
  { name: "host", kind: "string", metavar: "address", default: "127.0.0.1", commands: ["serve", "proxy"], help: "Address to listen on." },
  { name: "port", kind: "int", default: 8000, min: 0, max: 65535, commands: ["serve", "proxy"], help: "Port to listen on." },
  { name: "uds", kind: "string", metavar: "path", default: null, commands: ["serve"], help: "Listen on this Unix domain socket instead of --host/--port." },
  { name: "served-model-name", kind: "list", metavar: "name", default: null, commands: ["serve"], help: "Model name(s) in the API, one or more: requests may name any of them, answers and the metrics' model_name label carry the first. Default: the model argument as given (vLLM's rule), or stories260K for the embedded model." },
  { name: "api-key", kind: "list", metavar: "token", default: null, commands: ["serve"], help: "Require one of these bearer tokens (one or more) on /v1 endpoints. Default: $VLLM_API_KEY, if set." },
  { name: "root-path", kind: "string", metavar: "path", default: null, commands: ["serve"], help: "The path prefix of a proxy in front (FastAPI's root_path): routes also answer under it, and /openapi.json and /docs name it." },
  { name: "allowed-origins", kind: "string", metavar: "json", default: '["*"]', commands: ["serve"], help: "CORS: origins allowed to call from a browser, a JSON list (vLLM's default [\"*\"])." },
  { name: "allowed-methods", kind: "string", metavar: "json", default: '["*"]', commands: ["serve"], help: "CORS: allowed methods, a JSON list." },
  { name: "allowed-headers", kind: "string", metavar: "json", default: '["*"]', commands: ["serve"], help: "CORS: allowed request headers, a JSON list (all by default, so browser SDKs' own headers pass)." },
  { name: "allow-credentials", kind: "bool", default: false, commands: ["serve"], help: "CORS: allow credentials (cookies, Authorization) from other origins; the allowed origin is then echoed instead of *." },
  { name: "ssl-keyfile", kind: "string", metavar: "path", default: null, commands: ["serve"], help: "TLS: the private key (PEM); with --ssl-certfile the server speaks HTTPS." },
  { name: "ssl-certfile", kind: "string", metavar: "path", default: null, commands: ["serve"], help: "TLS: the certificate chain (PEM)." },
  { name: "ssl-ca-certs", kind: "string", metavar: "path", default: null, commands: ["serve"], help: "TLS: CA certificates (PEM) that client certificates are checked against." },
  { name: "ssl-cert-reqs", kind: "int", default: 0, min: 0, max: 2, commands: ["serve"], help: "TLS client certificates, Python's ssl codes: 0 not asked, 1 asked for but not required (CERT_OPTIONAL), 2 required and checked against --ssl-ca-certs (CERT_REQUIRED)." },
  { name: "disable-fastapi-docs", kind: "bool", default: false, commands: ["serve"], help: "Do not serve /docs (Swagger UI) and /openapi.json." },
  { name: "disable-web-ui", kind: "bool", default: false, commands: ["serve"], help: "Do not serve the chat and live-metrics web page at / (it uses only the public API, with the API key when one is set)." },
  { name: "enable-per-request-metrics", kind: "bool", default: false, commands: ["serve"], help: "Add a `metrics` object with timings to each response." },
  { name: "enable-force-include-usage", kind: "bool", default: false, commands: ["serve"], help: "Send a final usage chunk on every stream, as if include_usage were set." },
  { name: "enable-prompt-tokens-details", kind: "bool", default: false, commands: ["serve"], help: "Report usage.prompt_tokens_details.cached_tokens (prefix-cache hits) in responses." },
  { name: "enable-server-load-tracking", kind: "bool", default: false, commands: ["serve"], help: "Count the generation requests in flight for GET /load (0 otherwise)." },
  { name: "enable-request-id-headers", kind: "bool", default: false, commands: ["serve"], help: "Answer every request with an X-Request-Id header (the request's own, else a new id)." },
  { name: "disable-log-stats", kind: "bool", default: false, commands: ["serve", "run-batch"], help: "Disable engine stats (and the engine series on /metrics)." },
  { name: "log-stats", kind: "bool", default: false, commands: ["serve", "run-batch"], help: "Print the omni stats tables after each request (online) or after the batch (offline)." },
  { name: "enable-mfu-metrics", kind: "bool", default: false, commands: ["serve"], help: "Add the estimated FLOPs / bytes counters to /metrics." },
  { name: "shutdown-timeout", kind: "int", metavar: "seconds", default: 0, min: 0, commands: ["serve"], help: "On SIGTERM/SIGINT, wait up to this many seconds for in-flight requests to finish (new requests get 503) before aborting them; 0 aborts them at once (vLLM's default)." },
  { name: "show-hidden-metrics-for-version", kind: "string", metavar: "version", default: null, commands: ["serve"], help: "Show metrics hidden since the given previous version (e.g. 0.1)." },
  // logs (vLLM's names; the level of fennec's own lines is VLLM_LOGGING_LEVEL, as in vLLM)
  { name: "log-format", kind: "string", default: "text", commands: ["serve", "proxy"], choices: ["text", "json"], help: "text: vLLM's line shape (LEVEL MM-DD HH:MM:SS [source] message); json: one JSON object per line (time, level, source, message) for log collectors." },
  { name: "uvicorn-log-level", kind: "string", default: "info", commands: ["serve", "proxy"], choices: ["critical", "error", "warning", "info", "debug", "trace"], help: "Level of the HTTP server's lines (the access log is written at info)." },
  { name: "disable-uvicorn-access-log", kind: "bool", default: false, commands: ["serve", "proxy"], help: "Turn off the access line written for every request." },
  { name: "enable-log-requests", kind: "bool", default: false, commands: ["serve"], help: "Log each request's prompt, token ids and sampling parameters as it reaches the engine." },
  { name: "disable-log-requests", kind: "bool", default: false, commands: ["serve"], help: "Deprecated in vLLM (request logging is off by default): accepted, logs one line; use --enable-log-requests to turn it on." },
  { name: "max-log-len", kind: "int", default: null, min: 0, commands: ["serve"], help: "With --enable-log-requests: print at most this many prompt characters and token ids. Default: all." },
  // chat templates, tool calling, reasoning (vLLM's frontend flags; serve and run-batch answer chat the same way)
  { name: "chat-template", kind: "string", metavar: "path|jinja", default: null, commands: ENGINE, help: "Chat template to use instead of the model's: a file path, or the Jinja text itself (anything with {, } or a newline)." },
  { name: "chat-template-content-format", kind: "string", default: "auto", commands: ENGINE, choices: ["auto", "string", "openai"], help: "How message content reaches the template: string (text parts joined), openai (a list of {type, text} parts), or auto (detected from the template)." },
  { name: "default-chat-template-kwargs", kind: "string", metavar: "json", default: null, commands: ENGINE, help: 'JSON object of template variables for every request, e.g. \'{"enable_thinking": false}\'; a request\'s chat_template_kwargs win.' },
  { name: "trust-request-chat-template", kind: "bool", default: false, commands: ENGINE, help: "Let requests bring their own chat_template (refused otherwise)." },
  { name: "response-role", kind: "string", metavar: "role", default: "assistant", commands: ENGINE, help: "Role of the answer when the request adds a generation prompt." },
  { name: "enable-auto-tool-choice", kind: "bool", default: false, commands: ENGINE, help: 'Parse tool calls out of the output when tool_choice is "auto" (the default when a request has tools); needs --tool-call-parser.' },
  { name: "tool-call-parser", kind: "string", metavar: "name", default: null, commands: ENGINE, help: "How the model writes tool calls: hermes (Hermes, Qwen2.5/3), llama3_json / llama4_json (Llama 3.x), pythonic (Llama 3.2 small), mistral, qwen3_coder / qwen3_xml (Qwen3-Coder, Qwen3.5)." },
  { name: "exclude-tools-when-tool-choice-none", kind: "bool", default: false, commands: ENGINE, help: 'Leave the tools out of the prompt when tool_choice is "none" (by default they are always rendered).' },
  { name: "reasoning-parser", kind: "string", metavar: "name", default: null, commands: ENGINE, help: "Split reasoning from the answer into `reasoning`: qwen3, deepseek_r1 (<think>...</think>), granite (\"Here is my thought process:\"), openai_gptoss (gpt-oss Harmony channels)." },
  { name: "tool-parser-plugin", kind: "string", metavar: "path", default: null, commands: ANY, help: "Refused: vLLM loads Python tool parsers from this file.", fate: { refuse: "fennec cannot load Python tool parsers: use one of the built-in --tool-call-parser names" } },
  { name: "reasoning-parser-plugin", kind: "string", metavar: "path", default: null, commands: ANY, help: "Refused: vLLM loads Python reasoning parsers from this file.", fate: { refuse: "fennec cannot load Python reasoning parsers: use one of the built-in --reasoning-parser names" } },
  { name: "reasoning-config", kind: "string", metavar: "json", default: null, commands: ANY, help: "Refused: thinking budgets (the reasoning end forced after thinking_token_budget tokens) are not implemented.", fate: { refuse: "fennec has no thinking-token budget: leave --reasoning-config out (--reasoning-parser alone splits the reasoning)" } },
  { name: "tool-server", kind: "string", metavar: "address", default: null, commands: ANY, help: "Refused: Responses-API built-in tools.", fate: { refuse: "fennec has no Responses API built-in tools: call tools from the client (tools + tool_choice on /v1/chat/completions)" } },
  // pipelines
  { name: "pipeline", kind: "string", default: "single", commands: ENGINE, choices: ["single", "pd"], help: "single: one engine; pd: disaggregated prefill and decode stages." },
  { name: "stage-config", kind: "string", metavar: "path", default: null, commands: ENGINE, help: "YAML or JSON file describing a chain of stages (see docs/pipelines.md)." },
  // run-batch
  { name: "input-file", alias: "-i", kind: "string", metavar: "path", default: null, commands: ["run-batch"], help: "Input JSONL batch file (required)." },
  { name: "output-file", alias: "-o", kind: "string", metavar: "path", default: null, commands: ["run-batch"], help: "Output JSONL file (required)." },
  { name: "api-key", kind: "string", metavar: "token", default: null, commands: ["chat", "bench serve"], help: "Bearer token for the server. Default: $OPENAI_API_KEY, if set." },
  // chat (vLLM: vllm chat)
  { name: "url", kind: "string", metavar: "url", default: null, commands: ["chat"], help: "Base URL of an OpenAI-compatible API (e.g. http://localhost:8000/v1). Default: an in-process engine on --model." },
  { name: "model-name", kind: "string", metavar: "name", default: null, commands: ["chat"], help: "Model name sent to --url. Default: the first of its /models." },
  { name: "system-prompt", kind: "string", metavar: "text", default: null, commands: ["chat"], help: "System prompt to start with (change it with /system in the chat)." },
  { name: "max-tokens", kind: "int", default: null, min: 1, commands: ["chat"], help: "Maximum tokens per answer. Default: the server's (in-process: up to the context length)." },
  // bench serve (vLLM names: vllm/benchmarks/serve.py, datasets.py)
  { name: "backend", kind: "string", default: "openai", choices: ["openai", "vllm", "openai-chat"], commands: BENCH_SERVE, help: "API to call: openai/vllm = /v1/completions, openai-chat = /v1/chat/completions." },
  { name: "base-url", kind: "string", metavar: "url", default: null, commands: BENCH_SERVE, help: "Server base URL (e.g. http://localhost:8000). Default: http://--host:--port." },
  { name: "host", kind: "string", metavar: "address", default: "127.0.0.1", commands: BENCH_SERVE, help: "Server host when --base-url is not given." },
  { name: "port", kind: "int", default: 8000, min: 1, max: 65535, commands: BENCH_SERVE, help: "Server port when --base-url is not given." },
  { name: "endpoint", kind: "string", metavar: "path", default: null, commands: BENCH_SERVE, help: "API path. Default: /v1/completions (openai-chat: /v1/chat/completions)." },
  { name: "model", kind: "string", metavar: "name", default: null, commands: BENCH_SERVE, help: "Model name to request. Default: the first model of the server's /v1/models." },
  { name: "tokenizer", kind: "string", metavar: "path", default: null, commands: BENCH_SERVE, help: "GGUF file whose tokenizer makes the random prompts and counts tokens when the server sends no usage. Default: the embedded model's." },
  { name: "dataset-name", kind: "string", default: "random", choices: ["random", "sharegpt"], commands: [...BENCH_SERVE, "bench throughput"], help: "random: random token prompts; sharegpt: conversations from --dataset-path." },
  { name: "dataset-path", kind: "string", metavar: "path", default: null, commands: [...BENCH_SERVE, "bench throughput"], help: "ShareGPT JSON file (for --dataset-name sharegpt)." },
  { name: "num-prompts", kind: "int", default: 1000, min: 1, commands: [...BENCH_SERVE, "bench throughput"], help: "Number of prompts to send." },
  { name: "input-len", kind: "int", default: null, min: 1, commands: [...BENCH_SERVE, ...BENCH_OFFLINE], help: "Prompt tokens per request (random dataset; latency default 32)." },
  { name: "output-len", kind: "int", default: null, min: 1, commands: [...BENCH_SERVE, ...BENCH_OFFLINE], help: "Output tokens per request (random dataset; latency default 128)." },
  { name: "random-input-len", kind: "int", default: 1024, min: 1, commands: [...BENCH_SERVE, "bench throughput"], help: "Prompt tokens per request of the random dataset." },
  { name: "random-output-len", kind: "int", default: 128, min: 1, commands: [...BENCH_SERVE, "bench throughput"], help: "Output tokens per request of the random dataset." },
  { name: "random-range-ratio", kind: "float", default: 0, min: 0, max: 0.999999, commands: [...BENCH_SERVE, "bench throughput"], help: "Lengths are drawn uniformly from [len*(1-r), len*(1+r)]." },
  { name: "random-prefix-len", kind: "int", default: 0, min: 0, commands: [...BENCH_SERVE, "bench throughput"], help: "Random tokens shared by every prompt, before its own." },
  { name: "sharegpt-output-len", kind: "int", default: null, min: 1, commands: [...BENCH_SERVE, "bench throughput"], help: "Output tokens of every ShareGPT request (default: the length of the dataset's answer)." },
  { name: "request-rate", kind: "string", metavar: "rps", default: "inf", commands: BENCH_SERVE, help: "Requests per second (Poisson, or gamma with --burstiness). inf sends all at once." },
  { name: "burstiness", kind: "float", default: 1, min: 0.000001, commands: BENCH_SERVE, help: "Gamma shape of the arrival times: 1 = Poisson, lower = burstier." },
  { name: "max-concurrency", kind: "int", default: null, min: 1, commands: BENCH_SERVE, help: "Most requests in flight at once." },
  { name: "num-warmups", kind: "int", default: 0, min: 0, commands: [...BENCH_SERVE, "bench throughput"], help: "Requests sent before the measured run." },
  { name: "ready-check-timeout-sec", kind: "int", default: 0, min: 0, commands: BENCH_SERVE, help: "Seconds to retry one test prompt until the server answers; 0 skips the check." },
  { name: "percentile-metrics", kind: "string", metavar: "list", default: "ttft,tpot,itl", commands: BENCH_SERVE, help: "Comma list of metrics to report percentiles of: ttft, tpot, itl, e2el." },
  { name: "metric-percentiles", kind: "string", metavar: "list", default: "99", commands: BENCH_SERVE, help: "Comma list of percentiles to report (e.g. 25,50,99.9)." },
  { name: "goodput", kind: "string", metavar: "KEY:ms ...", default: null, commands: BENCH_SERVE, help: "Service-level objectives for goodput, e.g. \"ttft:500 tpot:50\" (keys ttft, tpot, e2el; milliseconds)." },
  { name: "save-result", kind: "bool", default: false, commands: BENCH_SERVE, help: "Save the result as JSON (vLLM's keys)." },
  { name: "save-detailed", kind: "bool", default: false, commands: BENCH_SERVE, help: "Also save per-request lists (input_lens, output_lens, ttfts, itls, start_times, generated_texts, errors)." },
  { name: "append-result", kind: "bool", default: false, commands: BENCH_SERVE, help: "Append to the result file (one JSON object a line) instead of replacing it." },
  { name: "result-dir", kind: "string", metavar: "path", default: null, commands: BENCH_SERVE, help: "Folder of the result file. Default: the current folder." },
  { name: "result-filename", kind: "string", metavar: "name", default: null, commands: BENCH_SERVE, help: "Result file name. Default: {label}-{rate}qps[-concurrency{N}]-{model}-{date}.json." },
  { name: "label", kind: "string", metavar: "text", default: null, commands: BENCH_SERVE, help: "Label of the result (default: the backend)." },
  { name: "metadata", kind: "string", metavar: "KEY=VALUE ...", default: null, commands: BENCH_SERVE, help: "Extra keys for the result JSON, space separated (e.g. \"box=pi5 note=test\")." },
  { name: "ignore-eos", kind: "bool", default: false, commands: BENCH_SERVE, help: "Send ignore_eos: true so every request generates its full output length." },
  { name: "temperature", kind: "float", default: null, min: 0, commands: [...BENCH_SERVE, "chat"], help: "Sampling temperature, sent only if given (the server's default otherwise)." },
  { name: "top-p", kind: "float", default: null, min: 0, max: 1, commands: [...BENCH_SERVE, "chat"], help: "top_p, sent only if given." },
  { name: "top-k", kind: "int", default: null, commands: [...BENCH_SERVE, "chat"], help: "top_k, sent only if given." },
  { name: "min-p", kind: "float", default: null, min: 0, max: 1, commands: BENCH_SERVE, help: "min_p, sent only if given." },
  { name: "frequency-penalty", kind: "float", default: null, commands: BENCH_SERVE, help: "frequency_penalty, sent only if given." },
  { name: "presence-penalty", kind: "float", default: null, commands: BENCH_SERVE, help: "presence_penalty, sent only if given." },
  { name: "repetition-penalty", kind: "float", default: null, min: 0, commands: BENCH_SERVE, help: "repetition_penalty, sent only if given." },
  { name: "extra-body", kind: "string", metavar: "json", default: null, commands: BENCH_SERVE, help: "JSON object merged into every request body." },
  { name: "header", kind: "string", metavar: "KEY=VALUE ...", default: null, commands: BENCH_SERVE, help: "Extra HTTP headers, space separated." },
  { name: "request-id-prefix", kind: "string", metavar: "text", default: null, commands: BENCH_SERVE, help: "Prefix of the x-request-id of each request. Default: bench-<8 hex>-." },
  { name: "seed", kind: "int", default: 0, commands: [...BENCH_SERVE, ...BENCH_OFFLINE], help: "Seed of the dataset sampling and arrival times." },
  { name: "disable-tqdm", kind: "bool", default: false, commands: [...BENCH_SERVE, ...BENCH_OFFLINE], help: "No progress bar." },
  // bench throughput / latency (vllm/benchmarks/throughput.py, latency.py)
  { name: "n", kind: "int", default: 1, min: 1, max: 1, commands: BENCH_OFFLINE, help: "Sequences per prompt (fennec serves n = 1)." },
  { name: "output-json", kind: "string", metavar: "path", default: null, commands: BENCH_OFFLINE, help: "Write the result as JSON (vLLM's keys) to this file." },
  { name: "batch-size", kind: "int", default: 8, min: 1, commands: ["bench latency"], help: "Prompts in the batch." },
  { name: "num-iters-warmup", kind: "int", default: 10, min: 0, commands: ["bench latency"], help: "Batches run before measuring." },
  { name: "num-iters", kind: "int", default: 30, min: 1, commands: ["bench latency"], help: "Batches measured." },
  // inspect
  { name: "json", kind: "bool", default: false, commands: ["inspect"], help: "Print one JSON object instead of text." },
  // proxy (vLLM: examples/online_serving/disaggregated_serving/disagg_proxy_demo.py --prefill / --decode)
  { name: "prefill", kind: "list", metavar: "url", default: null, commands: ["proxy"], help: "Prefill servers, one or more (http://host:port or host:port), used in turn: each gets the request with max_tokens 1 and kv_transfer_params {do_remote_decode: true} (required)." },
  { name: "decode", kind: "list", metavar: "url", default: null, commands: ["proxy"], help: "Decode servers, one or more, used in turn: each gets the original request with the kv_transfer_params its prefill server answered, and its answer (streamed or not) goes back to the client (required)." },
  { name: "upstream-timeout", kind: "int", metavar: "seconds", default: 600, min: 1, commands: ["proxy"], help: "Longest wait for a prefill answer, or for a decode server's first response bytes; past it the client gets a 504 error." },
];

export type Options = Readonly<Record<string, FlagValue>>;


/** Commands that take the model as their first positional argument, as `vllm serve MODEL` does. */
export const POSITIONAL_MODEL: readonly Command[] = ["serve", "inspect", "pull"];

/** Flags of one command, for --help and parsing. */
export function flagsOf(command: Command): FlagSpec[] {
  return FLAGS.filter((f) => f.commands.includes(command));
}

function inRange(spec: FlagSpec, n: number): boolean {
  return (spec.min === undefined || n >= spec.min) && (spec.max === undefined || n <= spec.max);
}

/** "in 1..256", "0 or more", "a positive integer" */
function rangeText(spec: FlagSpec): string {
  if (spec.max !== undefined) return `in ${spec.min ?? "-inf"}..${spec.max}`;
  return spec.min === 1 && spec.kind === "int" ? "a positive integer" : `${spec.min} or more`;
}

const SUFFIXES: Readonly<Record<string, number>> = { k: 1e3, m: 1e6, g: 1e9, K: 2 ** 10, M: 2 ** 20, G: 2 ** 30 };

/** vLLM's human_readable_int: "25.6k" -> 25600, "1K" -> 1024 (decimals only with the decimal suffixes k/m/g). */
function humanReadableInt(spec: FlagSpec, raw: string): Result<number> | null {
  const m = /^(\d+(?:\.\d+)?)([kKmMgG])$/.exec(raw.trim());
  if (m === null) return null;
  const [, number, suffix] = m as unknown as [string, string, string];
  if (suffix === suffix.toUpperCase() && number.includes(".")) {
    return err(`--${spec.name}: decimals are not allowed with binary suffixes like ${suffix} (got ${raw}); did you mean ${number}${suffix.toLowerCase()}?`);
  }
  return ok(Math.floor(Number(number) * SUFFIXES[suffix]!));
}

function convert(spec: FlagSpec, raw: string): Result<FlagValue> {
  switch (spec.kind) {
    case "string":
      if (spec.choices && !spec.choices.includes(raw)) return err(`--${spec.name} must be one of ${spec.choices.join(", ")} (got "${raw}")`);
      return ok(raw);
    case "int":
    case "float": {
      const readable = spec.humanReadable ? humanReadableInt(spec, raw) : null;
      if (readable !== null && !readable.ok) return readable;
      const n = readable !== null ? readable.value : raw.trim() === "" ? NaN : Number(raw);
      if (spec.kind === "int" ? !Number.isInteger(n) : !Number.isFinite(n)) return err(`--${spec.name} needs ${spec.kind === "int" ? "an integer" : "a number"} (got "${raw}")`);
      return inRange(spec, n) ? ok(n) : err(`--${spec.name} must be ${rangeText(spec)} (got ${raw})`);
    }
    case "list":
      return ok([raw]);
    case "bool":
      if (raw === "true") return ok(true);
      if (raw === "false") return ok(false);
      return err(`--${spec.name} takes no value or true/false (got "${raw}")`);
  }
}

/**
 * `--config FILE` (vLLM's): a YAML mapping of flag names (dashes or underscores) to values, turned into command-line
 * arguments placed before the real ones, so the command line wins, as in vLLM (FlexibleArgumentParser).
 */
function expandConfigFile(specs: readonly FlagSpec[], argv: readonly string[]): Result<string[]> {
  const at = argv.findIndex((a) => a === "--config" || a.startsWith("--config="));
  if (at < 0) return ok([...argv]);
  const path = argv[at] === "--config" ? argv[at + 1] : argv[at]!.slice("--config=".length);
  if (path === undefined || path === "") return err("--config needs a value");
  const rest = [...argv.slice(0, at), ...argv.slice(at + (argv[at] === "--config" ? 2 : 1))];
  let doc: unknown;
  try {
    doc = Bun.YAML.parse(readFileSync(path, "utf8"));
  } catch (e) {
    return err(`--config ${path}: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`);
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) return err(`--config ${path}: expected a mapping of flag names to values`);
  const tokens: string[] = [];
  for (const [key, value] of Object.entries(doc as Record<string, unknown>)) {
    const name = key.replace(/_/g, "-");
    const spec = specs.find((s) => s.name === name || s.vllmName === name);
    if (spec === undefined) return err(`--config ${path}: unknown option ${key}`);
    if (value === true) tokens.push(`--${name}`);
    else if (value === false) { if (spec.kind === "bool") tokens.push(`--${name}=false`); }
    else if (Array.isArray(value) && spec.kind === "list") tokens.push(`--${name}`, ...value.map(String));
    else tokens.push(`--${name}=${typeof value === "object" && value !== null ? JSON.stringify(value) : String(value)}`);
  }
  return ok([...tokens, ...rest]);
}

/** Parses `argv` (after the command name) against the command's flags. Unknown flags are errors. */
export function parseCommandArgs(command: Command, rawArgv: readonly string[]): Result<Options> {
  const specs = flagsOf(command);
  const expanded = command === "serve" || command === "run-batch" ? expandConfigFile(specs, rawArgv) : ok([...rawArgv]);
  if (!expanded.ok) return expanded;
  const argv = expanded.value;
  const options: Record<string, FlagValue> = {};
  for (const spec of specs) options[spec.name] = spec.default;
  let positionalModel: string | null = null;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    let name: string;
    let inlineValue: string | undefined;
    if (arg.startsWith("--")) {
      const eq = arg.indexOf("=");
      name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
      inlineValue = eq >= 0 ? arg.slice(eq + 1) : undefined;
    } else if (arg.startsWith("-") && arg.length > 1) {
      const spec = specs.find((s) => s.alias === arg || s.aliases?.includes(arg));
      if (!spec) return err(`unknown option ${arg} for '${command}' (see fennec ${command} --help)`);
      name = spec.name;
    } else if (POSITIONAL_MODEL.includes(command) && positionalModel === null) {
      // vLLM's `vllm serve [model_tag]`
      positionalModel = arg;
      continue;
    } else {
      return err(`unexpected argument "${arg}" for '${command}' (see fennec ${command} --help)`);
    }
    const spec = specs.find((s) => s.name === name || s.vllmName === name);
    if (!spec) return err(`unknown option --${name} for '${command}' (see fennec ${command} --help)`);
    let raw = inlineValue;
    if (spec.kind === "list") {
      // nargs="+": every following argument up to the next flag
      const values = raw !== undefined ? [raw] : [];
      while (raw === undefined && i + 1 < argv.length && !argv[i + 1]!.startsWith("-")) values.push(argv[++i]!);
      if (values.length === 0) return err(`--${spec.name} needs a value`);
      options[spec.name] = values;
      continue;
    }
    if (raw === undefined) {
      if (spec.kind === "bool") { options[spec.name] = true; continue; }
      raw = argv[++i];
      if (raw === undefined) return err(`--${spec.name} needs a value`);
    }
    const value = convert(spec, raw);
    if (!value.ok) return value;
    options[spec.name] = value.value;
  }
  if (positionalModel !== null) {
    if (options.model !== null && options.model !== positionalModel) return err(`the model is given twice (positional "${positionalModel}" and --model "${String(options.model)}"): give it once`);
    options.model = positionalModel;
  }
  return ok(options);
}

/** vLLM's startup check, word for word (vllm/entrypoints/openai/cli_args.py: validate_parsed_serve_args). */
export const PER_REQUEST_METRICS_NEED_STATS =
  "Error: --enable-per-request-metrics requires engine statistics logging; remove --disable-log-stats to enable per-request metrics.";

/** What the HTTP server of `serve` is told (host, port, auth, per-response features). */
export interface ServerConfig {
  readonly host: string;
  readonly port: number;
  /** null: the model file's name */
  readonly servedModelName: string | null;
  /** the first --api-key, else $VLLM_API_KEY; null = no auth */
  readonly apiKey: string | null;
  /** every --api-key (vLLM takes several); [] = no auth */
  readonly apiKeys: readonly string[];
  /** --served-model-name after the first: other names requests may use */
  readonly servedModelAliases: readonly string[];
  /** --uds: a Unix socket instead of host:port */
  readonly uds: string | null;
  /** --root-path, without a trailing slash; null = none */
  readonly rootPath: string | null;
  readonly cors: CorsSettings;
  /** --ssl-*: null = plain HTTP */
  readonly tls: TlsSettings | null;
  readonly disableDocs: boolean;
  /** --generation-config / --override-generation-config: defaults of omitted sampling fields (vLLM's keys) */
  readonly generationDefaults: Readonly<Record<string, number>>;
  /** --max-logprobs */
  readonly maxLogprobs: number;
  readonly enablePerRequestMetrics: boolean;
  readonly forceIncludeUsage: boolean;
  readonly enablePromptTokensDetails: boolean;
  readonly enableServerLoadTracking: boolean;
  readonly enableRequestIdHeaders: boolean;
  /** --disable-web-ui: no chat / metrics page at `/` */
  readonly disableWebUi: boolean;
  /** --shutdown-timeout: seconds in-flight requests get to finish on SIGTERM/SIGINT; 0 aborts them at once */
  readonly shutdownTimeoutS: number;
  /** --structured-outputs-config */
  readonly structuredOutputs: StructuredOutputsSettings;
  /** --return-tokens-as-token-ids */
  readonly returnTokensAsTokenIds: boolean;
}

/** --structured-outputs-config (vllm/config/structured_outputs.py StructuredOutputsConfig), what fennec acts on. */
export interface StructuredOutputsSettings {
  /** compact JSON for every structured request */
  readonly disableAnyWhitespace: boolean;
}

/** vLLM's backends: fennec runs xgrammar ("auto" chooses it first in vLLM too); the others are refused */
const STRUCTURED_BACKENDS = ["auto", "xgrammar", "guidance", "outlines", "lm-format-enforcer"];

/**
 * --structured-outputs-config as vLLM's StructuredOutputsConfig validates it (unknown keys refused, its messages);
 * keys fennec cannot act on are refused rather than ignored.
 * @example structuredOutputsConfig('{"backend": "xgrammar", "disable_any_whitespace": true}') // ok({ disableAnyWhitespace: true })
 */
export function structuredOutputsConfig(raw: string | null): Result<StructuredOutputsSettings> {
  if (raw === null) return ok({ disableAnyWhitespace: false });
  let value: unknown;
  try { value = JSON.parse(raw); } catch (e) { return err(`--structured-outputs-config must be a JSON object: ${(e as Error).message}`); }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return err("--structured-outputs-config must be a JSON object");
  const c = value as Record<string, unknown>;
  const known = ["backend", "disable_any_whitespace", "disable_additional_properties", "reasoning_parser", "reasoning_parser_plugin", "enable_in_reasoning"];
  const unknown = Object.keys(c).filter((k) => !known.includes(k));
  if (unknown.length > 0) return err(`--structured-outputs-config: unknown key(s) ${unknown.join(", ")} (known: ${known.join(", ")})`);
  const backend = c.backend ?? "auto";
  if (typeof backend !== "string" || !STRUCTURED_BACKENDS.includes(backend)) return err(`--structured-outputs-config: backend must be one of ${STRUCTURED_BACKENDS.join(", ")} (got ${JSON.stringify(backend)})`);
  if (backend !== "auto" && backend !== "xgrammar") return err(`--structured-outputs-config: backend ${backend} is not available in fennec; use "xgrammar" (or "auto", which picks it)`);
  const disableAnyWhitespace = c.disable_any_whitespace ?? false;
  if (typeof disableAnyWhitespace !== "boolean") return err("--structured-outputs-config: disable_any_whitespace must be true or false");
  if (disableAnyWhitespace && backend !== "xgrammar") return err("--structured-outputs-config: disable_any_whitespace is only supported for xgrammar and guidance backends.");
  if (c.disable_additional_properties === true) return err("--structured-outputs-config: disable_additional_properties is only supported for the guidance backend.");
  for (const k of ["reasoning_parser", "reasoning_parser_plugin"]) {
    if (c[k] !== undefined && c[k] !== "") return err(`--structured-outputs-config: ${k} is set from --reasoning-parser in fennec; remove it here`);
  }
  if (c.enable_in_reasoning === true) return err("--structured-outputs-config: enable_in_reasoning is not supported by fennec (the grammar constrains the whole answer)");
  return ok({ disableAnyWhitespace });
}

/** --allowed-origins / --allowed-methods / --allowed-headers / --allow-credentials (server/cors.ts's CorsConfig). */
export interface CorsSettings {
  readonly allowedOrigins: readonly string[];
  readonly allowedMethods: readonly string[];
  readonly allowedHeaders: readonly string[];
  readonly allowCredentials: boolean;
}

/** --ssl-keyfile / --ssl-certfile / --ssl-ca-certs / --ssl-cert-reqs, the files' paths. */
export interface TlsSettings {
  readonly keyFile: string;
  readonly certFile: string;
  readonly caFile: string | null;
  /** Python's ssl.CERT_NONE 0, CERT_OPTIONAL 1, CERT_REQUIRED 2 */
  readonly certReqs: 0 | 1 | 2;
}

/** The stats flags: /metrics engine series, the omni tables, MFU counters, hidden-metric versions. */
export interface MetricsConfig {
  readonly disableLogStats: boolean;
  readonly logStats: boolean;
  readonly enableMfuMetrics: boolean;
  readonly showHiddenMetricsForVersion: string | null;
}

/** The server log (vLLM's names: VLLM_LOGGING_LEVEL, VLLM_LOG_STATS_INTERVAL, --uvicorn-log-level, ...). */
export interface LogConfig {
  /** VLLM_LOGGING_LEVEL: fennec's own lines */
  readonly level: LogLevel;
  readonly format: LogFormat;
  /** --uvicorn-log-level: the access lines (written at INFO) */
  readonly accessLevel: LogLevel;
  readonly accessLog: boolean;
  readonly enableLogRequests: boolean;
  /** --disable-log-requests was given (deprecated in vLLM: one warning) */
  readonly disableLogRequestsGiven: boolean;
  readonly maxLogLen: number | null;
  /** VLLM_LOG_STATS_INTERVAL, seconds between engine stats lines (vLLM's default 10) */
  readonly statsIntervalS: number;
}

/** Which chain of stages to build: one engine, the built-in prefill/decode pair, or a stage-config file. */
export interface StageChainConfig {
  readonly pipeline: "single" | "pd";
  /** --stage-config (exclusive with --pipeline pd) */
  readonly stageConfigPath: string | null;
}

export interface ServeConfig {
  /** GGUF path; null = the embedded default model */
  readonly model: string | null;
  readonly engine: EngineArgs;
  /** vLLM's start-up warnings about the engine flags (the KV offload tier's), logged once */
  readonly warnings: readonly string[];
  readonly server: ServerConfig;
  readonly metrics: MetricsConfig;
  readonly stages: StageChainConfig;
  readonly log: LogConfig;
}

export interface RunBatchConfig {
  readonly model: string | null;
  readonly engine: EngineArgs;
  readonly warnings: readonly string[];
  readonly metrics: Pick<MetricsConfig, "disableLogStats" | "logStats">;
  readonly stages: StageChainConfig;
  readonly inputFile: string;
  readonly outputFile: string;
  readonly structuredOutputs: StructuredOutputsSettings;
}

export interface GenerateConfig {
  readonly model: string | null;
  readonly prompt: string;
  readonly maxTokens: number;
  readonly temperature: number;
  /** null: a new seed each run */
  readonly seed: number | null;
  readonly json: boolean;
  /** null: the number of cores */
  readonly threads: number | null;
  readonly device: "cpu" | "webgpu";
  /** --speculative-config (and the --spec-* shortcuts); null: off */
  readonly speculative: SpeculativeConfig | null;
}

export interface TokenizeConfig {
  readonly model: string | null;
  readonly text: string;
  readonly addSpecial: boolean;
  readonly json: boolean;
}

const stringOrNull = (v: FlagValue | undefined): string | null => (typeof v === "string" ? v : null);
const intOrNull = (v: FlagValue | undefined): number | null => (typeof v === "number" ? v : null);

/** --max-num-batched-tokens when not given (a bidirectional model raises it to max-model-len: engine.ts stepTokenBudget) */
const DEFAULT_MAX_NUM_BATCHED_TOKENS = 512;
const deviceOf = (v: FlagValue | undefined): "cpu" | "webgpu" => (v === "webgpu" ? "webgpu" : "cpu");

/** The vLLM flags of FLAGS' fate rows that were given: one note each, or the refusal of the first refused one. */
function vllmFates(command: Command, options: Options): Result<string[]> {
  const notes: string[] = [];
  for (const spec of flagsOf(command)) {
    const value = options[spec.name];
    if (spec.fate === undefined || value === null || value === undefined) continue;
    const shown = `--${spec.name}${spec.kind === "bool" ? "" : ` ${Array.isArray(value) ? value.join(" ") : String(value)}`}`;
    // --tokenizer naming the model file itself changes nothing
    const accepted = spec.name === "tokenizer" ? value === options.model : spec.fate.noop !== undefined && (spec.fate.accepts?.(value) ?? true);
    if (accepted) notes.push(`${shown} has no effect on fennec: ${spec.fate.noop ?? "the GGUF file's own tokenizer is used"}`);
    else return err(`${shown} is not supported: ${spec.fate.refuse ?? "fennec does not implement it"}`);
  }
  return ok(notes);
}

/** A JSON list of strings (vLLM's type=json.loads flags). */
function jsonList(name: string, raw: FlagValue | undefined): Result<string[]> {
  let value: unknown;
  try { value = JSON.parse(String(raw)); } catch { value = null; }
  if (!Array.isArray(value) || !value.every((v) => typeof v === "string")) return err(`--${name} must be a JSON list of strings, e.g. '["*"]' (got ${String(raw)})`);
  return ok(value as string[]);
}

const GENERATION_KEYS = ["temperature", "top_p", "top_k", "min_p", "repetition_penalty", "max_new_tokens"] as const;

/** The numbers of vLLM's default_sampling_params keys in an object; other keys are dropped, as vLLM drops them. */
function generationNumbers(source: string, value: unknown): Result<Record<string, number>> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return err(`${source}: expected a JSON object`);
  const out: Record<string, number> = {};
  for (const key of GENERATION_KEYS) {
    const v = (value as Record<string, unknown>)[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== "number" || !Number.isFinite(v)) return err(`${source}: ${key} must be a number (got ${JSON.stringify(v)})`);
    out[key] = v;
  }
  return ok(out);
}

/** --generation-config auto|vllm|FOLDER, then --override-generation-config over it (vLLM's get_diff_sampling_param). */
function generationDefaults(options: Options): Result<Record<string, number>> {
  const source = stringOrNull(options["generation-config"]) ?? "auto";
  let base: Record<string, number> = {};
  // auto reads the model's generation_config.json; a GGUF file carries none, so vLLM's own defaults apply, as with vllm
  if (source !== "auto" && source !== "vllm") {
    const file = `${source.replace(/\/$/, "")}/generation_config.json`;
    let parsed: unknown;
    try { parsed = JSON.parse(readFileSync(file, "utf8")); } catch (e) { return err(`--generation-config ${source}: cannot read ${file} (${e instanceof Error ? e.message.split("\n")[0] : String(e)})`); }
    const numbers = generationNumbers(file, parsed);
    if (!numbers.ok) return numbers;
    base = numbers.value;
  }
  const override = stringOrNull(options["override-generation-config"]);
  if (override === null) return ok(base);
  let parsed: unknown;
  try { parsed = JSON.parse(override); } catch { return err(`--override-generation-config must be a JSON object, e.g. '{"temperature": 0.5}' (got ${override})`); }
  const numbers = generationNumbers("--override-generation-config", parsed);
  return numbers.ok ? ok({ ...base, ...numbers.value }) : numbers;
}

function tlsSettings(options: Options): Result<TlsSettings | null> {
  const keyFile = stringOrNull(options["ssl-keyfile"]);
  const certFile = stringOrNull(options["ssl-certfile"]);
  const caFile = stringOrNull(options["ssl-ca-certs"]);
  const certReqs = Number(options["ssl-cert-reqs"] ?? 0) as 0 | 1 | 2;
  if (keyFile === null && certFile === null) {
    if (caFile !== null || certReqs !== 0) return err("--ssl-ca-certs and --ssl-cert-reqs need --ssl-keyfile and --ssl-certfile");
    return ok(null);
  }
  if (keyFile === null || certFile === null) return err("TLS needs both --ssl-keyfile and --ssl-certfile");
  if (certReqs !== 0 && caFile === null) return err("--ssl-cert-reqs 1 or 2 checks client certificates against --ssl-ca-certs: give it");
  return ok({ keyFile, certFile, caFile, certReqs });
}

/** Engine flags (vLLM names) -> EngineArgs. Ranges were checked when the flags were parsed (FLAGS' min/max). */
/** vLLM's CacheDType values (vllm/config/cache.py) and the ones fennec implements. */
const KV_CACHE_DTYPES_SERVED: readonly KvCacheDtypeName[] = ["auto", "float16", "fp8", "fp8_e4m3"];
const KV_CACHE_DTYPES_VLLM = [
  "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "turboquant_k8v4", "turboquant_4bit_nc",
  "turboquant_k3v4_nc", "turboquant_3bit_nc", "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head", "nvfp4", "nvfp4_4over6",
];

/** --kv-cache-dtype: vLLM's names; what fennec has no cache for is refused, saying what it has. */
export function kvCacheDtypeOf(raw: string, device: "cpu" | "webgpu"): Result<KvCacheDtypeName> {
  if (!(KV_CACHE_DTYPES_SERVED as readonly string[]).includes(raw)) {
    if (KV_CACHE_DTYPES_VLLM.includes(raw)) return err(`--kv-cache-dtype ${raw} is not supported by fennec; use auto (f16) or fp8 / fp8_e4m3 (fennec's 8-bit cache)`);
    return err(`--kv-cache-dtype must be one of ${KV_CACHE_DTYPES_VLLM.join(", ")} (got "${raw}")`);
  }
  const dtype = raw as KvCacheDtypeName;
  if (device === "webgpu" && (dtype === "fp8" || dtype === "fp8_e4m3")) {
    return err("--kv-cache-dtype fp8 is not supported with --device webgpu (fennec's 8-bit KV cache has WASM kernels only); use --kv-cache-dtype auto or --device cpu");
  }
  return ok(dtype);
}

export function engineConfig(options: Options, env: Readonly<Record<string, string | undefined>>): Result<{ engine: EngineArgs; warnings: readonly string[] }> {
  const kvCacheDtype = kvCacheDtypeOf(String(options["kv-cache-dtype"] ?? "auto"), deviceOf(options.device));
  if (!kvCacheDtype.ok) return kvCacheDtype;
  const dtypeWarnings = kvCacheDtype.value === "fp8" || kvCacheDtype.value === "fp8_e4m3"
    ? [`Using ${kvCacheDtype.value} data type to store kv cache. It reduces the GPU memory footprint and boosts the performance. Meanwhile, it may cause accuracy drop without a proper scaling factor`]
    : [];
  const enablePrefixCaching = options["no-enable-prefix-caching"] !== true;
  const transfer = parseKvTransfer({
    kvOffloadingSize: typeof options["kv-offloading-size"] === "number" ? options["kv-offloading-size"] : null,
    kvOffloadingBackend: String(options["kv-offloading-backend"] ?? "native"),
    kvTransferConfig: stringOrNull(options["kv-transfer-config"]),
    useSimpleKvOffload: env["VLLM_USE_SIMPLE_KV_OFFLOAD"] === "1",
    sideChannelHost: env["VLLM_NIXL_SIDE_CHANNEL_HOST"] ?? null,
    sideChannelPort: env["VLLM_NIXL_SIDE_CHANNEL_PORT"] ?? null,
    enablePrefixCaching,
  }, Number(options["block-size"]));
  if (!transfer.ok) return transfer;
  const speculative = speculativeConfigFromFlags(options);
  if (!speculative.ok) return speculative;
  const pooling = poolingFlags(options);
  if (!pooling.ok) return pooling;
  return ok({ warnings: [...dtypeWarnings, ...transfer.value.warnings], engine: {
    kvCacheDtype: kvCacheDtype.value,
    kvOffload: transfer.value.config,
    kvPeer: transfer.value.peer ?? null,
    seed: intOrNull(options.seed),
    kvCacheMemoryFraction: typeof options["gpu-memory-utilization"] === "number" ? options["gpu-memory-utilization"] : null,
    maxNumSeqs: Number(options["max-num-seqs"]),
    maxNumBatchedTokens: intOrNull(options["max-num-batched-tokens"]) ?? DEFAULT_MAX_NUM_BATCHED_TOKENS,
    maxNumBatchedTokensGiven: intOrNull(options["max-num-batched-tokens"]) !== null,
    maxModelLen: intOrNull(options["max-model-len"]),
    blockSize: Number(options["block-size"]),
    kvCacheMemoryBytes: intOrNull(options["kv-cache-memory"]),
    enablePrefixCaching: options["no-enable-prefix-caching"] !== true,
    disableHybridKvCacheManager: options["disable-hybrid-kv-cache-manager"] === true,
    threads: intOrNull(options.threads) ?? navigator.hardwareConcurrency,
    device: deviceOf(options.device),
    speculativeConfig: speculative.value,
    schedulingPolicy: options["scheduling-policy"] === "priority" ? "priority" : "fcfs",
    runner: pooling.value.runner,
    poolerConfig: pooling.value.poolerConfig,
    matryoshka: pooling.value.matryoshka,
  } });
}

/** --runner, --convert and --pooler-config (vLLM: --convert embed with runner auto means pooling). */
function poolingFlags(options: Options): Result<{ runner: RunnerOption; poolerConfig: PoolerConfig | null; matryoshka: Matryoshka | null }> {
  const overrides = stringOrNull(options["hf-overrides"]);
  const parsedOverrides = overrides === null ? ok(null) : parseHfOverrides(overrides);
  if (!parsedOverrides.ok) return parsedOverrides;
  const matryoshka = parsedOverrides.value;
  const convert = stringOrNull(options.convert) ?? "auto";
  if (convert !== "auto" && convert !== "none" && convert !== "embed") {
    if (convert === "classify" || convert === "reward") return err(`--convert ${convert} is not supported: fennec serves embedding models (--convert embed) and generation, not classifiers or reward models`);
    return err(`--convert must be one of auto, none, embed, classify, reward (got "${convert}")`);
  }
  // vLLM's deprecated --task: embed / embedding mean --runner pooling --convert embed
  const task = stringOrNull(options.task) ?? "auto";
  if (!["auto", "generate", "embed", "embedding"].includes(task)) {
    return err(`--task ${task} is not supported: fennec serves text generation and embeddings (--runner pooling), not classify / score / reward / transcription / draft models`);
  }
  const embed = convert === "embed" || task === "embed" || task === "embedding";
  const runnerFlag = (stringOrNull(options.runner) ?? "auto") as RunnerOption;
  if (embed && runnerFlag === "generate") return err(`--${convert === "embed" ? "convert" : "task"} embed makes a pooling model: it cannot be combined with --runner generate`);
  const runner: RunnerOption = embed ? "pooling" : runnerFlag;
  if (matryoshka !== null && runner === "generate") return err("--hf-overrides matryoshka keys need a pooling model: they cannot be combined with --runner generate");
  const raw = stringOrNull(options["pooler-config"]);
  if (raw === null) return ok({ runner, poolerConfig: null, matryoshka });
  const poolerConfig = parsePoolerConfig(raw);
  if (!poolerConfig.ok) return poolerConfig;
  if (runner === "generate") return err("--pooler-config needs a pooling model: it cannot be combined with --runner generate");
  return ok({ runner, poolerConfig: poolerConfig.value, matryoshka });
}

function stageChainConfig(options: Options): Result<StageChainConfig> {
  const stageConfigPath = stringOrNull(options["stage-config"]);
  const pipeline = options.pipeline === "pd" ? "pd" : "single";
  if (stageConfigPath !== null && pipeline === "pd") return err("--pipeline pd and --stage-config are exclusive (pd is a two-stage config)");
  return ok({ pipeline, stageConfigPath });
}

function logConfig(options: Options, env: Readonly<Record<string, string | undefined>>): Result<LogConfig> {
  const rawLevel = env["VLLM_LOGGING_LEVEL"];
  const level = rawLevel === undefined || rawLevel === "" ? "INFO" : parseLogLevel(rawLevel);
  if (level === null) return err(`VLLM_LOGGING_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL (got "${rawLevel}")`);
  const rawInterval = env["VLLM_LOG_STATS_INTERVAL"];
  // vLLM's envs.VLLM_LOG_STATS_INTERVAL default: 10 s
  const statsIntervalS = rawInterval === undefined || rawInterval === "" ? 10 : Number(rawInterval);
  if (!Number.isFinite(statsIntervalS) || statsIntervalS <= 0) return err(`VLLM_LOG_STATS_INTERVAL must be a positive number of seconds (got "${rawInterval}")`);
  return ok({
    level, format: options["log-format"] === "json" ? "json" : "text",
    accessLevel: parseLogLevel(stringOrNull(options["uvicorn-log-level"]) ?? "info") ?? "INFO",
    accessLog: options["disable-uvicorn-access-log"] !== true,
    enableLogRequests: options["enable-log-requests"] === true,
    disableLogRequestsGiven: options["disable-log-requests"] === true,
    maxLogLen: intOrNull(options["max-log-len"]),
    statsIntervalS,
  });
}

/**
 * `serve`'s flags as one typed config, checked before anything is loaded (vLLM checks before the model too).
 * `env` supplies VLLM_API_KEY, which vLLM reads when --api-key is not given.
 * @example const config = serveConfig(options); if (!config.ok) throw new CliError(config.error);
 */
export function serveConfig(options: Options, env: Readonly<Record<string, string | undefined>> = process.env): Result<ServeConfig> {
  const listOf = (v: FlagValue | undefined): readonly string[] | null => (Array.isArray(v) ? v : typeof v === "string" ? [v] : null);
  // an empty VLLM_API_KEY is no key (Python's `or`), an empty --api-key an error
  const apiKeys = listOf(options["api-key"]) ?? (env["VLLM_API_KEY"] ? [env["VLLM_API_KEY"]] : []);
  const servedNames = listOf(options["served-model-name"]) ?? [];
  if (apiKeys.includes("")) return err("--api-key must not be empty");
  if (servedNames.includes("")) return err("--served-model-name must not be empty");
  const rootPath = stringOrNull(options["root-path"]);
  if (rootPath !== null && rootPath !== "" && !rootPath.startsWith("/")) return err(`--root-path must start with / (got "${rootPath}")`);
  const origins = jsonList("allowed-origins", options["allowed-origins"] ?? '["*"]');
  if (!origins.ok) return origins;
  const methods = jsonList("allowed-methods", options["allowed-methods"] ?? '["*"]');
  if (!methods.ok) return methods;
  const headers = jsonList("allowed-headers", options["allowed-headers"] ?? '["*"]');
  if (!headers.ok) return headers;
  const tls = tlsSettings(options);
  if (!tls.ok) return tls;
  const generation = generationDefaults(options);
  if (!generation.ok) return generation;
  const notes = vllmFates("serve", options);
  if (!notes.ok) return notes;
  const structuredOutputs = structuredOutputsConfig(stringOrNull(options["structured-outputs-config"]));
  if (!structuredOutputs.ok) return structuredOutputs;
  const server: ServerConfig = {
    host: stringOrNull(options.host) ?? "127.0.0.1",
    port: Number(options.port),
    servedModelName: servedNames[0] ?? null,
    apiKey: apiKeys[0] ?? null,
    apiKeys,
    servedModelAliases: servedNames.slice(1),
    uds: stringOrNull(options.uds),
    rootPath: rootPath === null || rootPath === "" || rootPath === "/" ? null : rootPath.replace(/\/+$/, ""),
    cors: { allowedOrigins: origins.value, allowedMethods: methods.value, allowedHeaders: headers.value, allowCredentials: options["allow-credentials"] === true },
    tls: tls.value,
    disableDocs: options["disable-fastapi-docs"] === true,
    generationDefaults: generation.value,
    maxLogprobs: Number(options["max-logprobs"] ?? 20),
    enablePerRequestMetrics: options["enable-per-request-metrics"] === true,
    forceIncludeUsage: options["enable-force-include-usage"] === true,
    enablePromptTokensDetails: options["enable-prompt-tokens-details"] === true,
    enableServerLoadTracking: options["enable-server-load-tracking"] === true,
    enableRequestIdHeaders: options["enable-request-id-headers"] === true,
    disableWebUi: options["disable-web-ui"] === true,
    structuredOutputs: structuredOutputs.value,
    returnTokensAsTokenIds: options["return-tokens-as-token-ids"] === true,
    shutdownTimeoutS: intOrNull(options["shutdown-timeout"]) ?? 0,
  };
  const metrics: MetricsConfig = {
    disableLogStats: options["disable-log-stats"] === true,
    logStats: options["log-stats"] === true,
    enableMfuMetrics: options["enable-mfu-metrics"] === true,
    showHiddenMetricsForVersion: stringOrNull(options["show-hidden-metrics-for-version"]),
  };
  if (server.enablePerRequestMetrics && metrics.disableLogStats) return err(PER_REQUEST_METRICS_NEED_STATS);
  const stages = stageChainConfig(options);
  if (!stages.ok) return stages;
  const log = logConfig(options, env);
  if (!log.ok) return log;
  const engine = engineConfig(options, env);
  if (!engine.ok) return engine;
  return ok({ model: stringOrNull(options.model), engine: engine.value.engine, warnings: [...notes.value, ...engine.value.warnings], server, metrics, stages: stages.value, log: log.value });
}

/** `run-batch`'s flags as one typed config; both files are required. */
export function runBatchConfig(options: Options, env: Readonly<Record<string, string | undefined>> = process.env): Result<RunBatchConfig> {
  const inputFile = stringOrNull(options["input-file"]);
  const outputFile = stringOrNull(options["output-file"]);
  if (inputFile === null) return err("run-batch needs -i/--input-file (an OpenAI batch JSONL file)");
  if (outputFile === null) return err("run-batch needs -o/--output-file");
  const stages = stageChainConfig(options);
  if (!stages.ok) return stages;
  const engine = engineConfig(options, env);
  if (!engine.ok) return engine;
  const notes = vllmFates("run-batch", options);
  if (!notes.ok) return notes;
  const structuredOutputs = structuredOutputsConfig(stringOrNull(options["structured-outputs-config"]));
  if (!structuredOutputs.ok) return structuredOutputs;
  return ok({
    model: stringOrNull(options.model), engine: engine.value.engine, warnings: [...notes.value, ...engine.value.warnings], stages: stages.value, inputFile, outputFile,
    structuredOutputs: structuredOutputs.value,
    metrics: { disableLogStats: options["disable-log-stats"] === true, logStats: options["log-stats"] === true },
  });
}

/** `generate`'s flags as one typed config. */
export function generateConfig(options: Options): Result<GenerateConfig> {
  const speculative = speculativeConfigFromFlags(options);
  if (!speculative.ok) return speculative;
  return ok({
    model: stringOrNull(options.model), prompt: String(options.prompt ?? ""), maxTokens: Number(options["max-tokens"]),
    temperature: Number(options.temperature), seed: intOrNull(options.seed), json: options.json === true,
    threads: intOrNull(options.threads), device: deviceOf(options.device), speculative: speculative.value,
  });
}

/** `tokenize`'s flags as one typed config; --text is required. */
export function tokenizeConfig(options: Options): Result<TokenizeConfig> {
  const text = stringOrNull(options.text);
  if (text === null) return err("tokenize needs --text <string> (see fennec tokenize --help)");
  return ok({ model: stringOrNull(options.model), text, addSpecial: options["add-special"] === true, json: options.json === true });
}

/** `proxy`'s flags as one typed config: the prefill and decode servers as base URLs without a trailing /v1. */
export interface ProxyConfig {
  readonly prefill: readonly string[];
  readonly decode: readonly string[];
  readonly host: string;
  readonly port: number;
  readonly upstreamTimeoutS: number;
  readonly log: LogConfig;
}

/**
 * One --prefill / --decode value as a base URL: `host:port` (disagg_proxy_demo.py's form) gets http://; a trailing
 * `/v1` (the OpenAI client's base URL) or `/` is dropped, since the proxy appends the request's own /v1/... path.
 */
export function upstreamBaseUrl(flag: string, raw: string): Result<string> {
  const text = /^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `http://${raw}`;
  let url: URL;
  try { url = new URL(text); } catch { return err(`--${flag} "${raw}" is not a server address: give http://host:port or host:port`); }
  if (url.protocol !== "http:" && url.protocol !== "https:") return err(`--${flag} "${raw}": only http:// and https:// servers can be proxied`);
  if (url.search !== "" || url.hash !== "") return err(`--${flag} "${raw}": give the server's base URL without a query or fragment`);
  return ok(`${url.origin}${url.pathname.replace(/\/+$/, "").replace(/\/v1$/, "")}`);
}

export function proxyConfig(options: Options, env: Readonly<Record<string, string | undefined>> = process.env): Result<ProxyConfig> {
  const lists: Record<"prefill" | "decode", string[]> = { prefill: [], decode: [] };
  for (const flag of ["prefill", "decode"] as const) {
    const values = options[flag];
    if (!Array.isArray(values) || values.length === 0) return err(`proxy needs --${flag} <url>... (one or more ${flag} servers, e.g. --${flag} http://127.0.0.1:${flag === "prefill" ? 8100 : 8200})`);
    for (const raw of values as readonly string[]) {
      const url = upstreamBaseUrl(flag, raw);
      if (!url.ok) return url;
      lists[flag].push(url.value);
    }
  }
  const log = logConfig(options, env);
  if (!log.ok) return log;
  return ok({
    prefill: lists.prefill, decode: lists.decode, host: stringOrNull(options.host) ?? "127.0.0.1", port: Number(options.port),
    upstreamTimeoutS: Number(options["upstream-timeout"]), log: log.value,
  });
}

export function commandHelp(command: Command): string {
  const usage = POSITIONAL_MODEL.includes(command) ? `Usage: fennec ${command} [MODEL] [options]` : `Usage: fennec ${command} [options]`;
  const lines = [usage, "", COMMANDS[command], "", ...(POSITIONAL_MODEL.includes(command) ? ["MODEL: a GGUF file or a Hugging Face repository (org/repo[:QUANT]), as vLLM's positional model (same as --model).", ""] : []), "Options:"];
  for (const f of flagsOf(command)) {
    const flag = `${f.alias ? `${f.alias}, ` : ""}--${f.name}${f.kind === "bool" ? "" : ` <${f.metavar ?? (f.choices ? f.choices.join("|") : f.kind)}>`}`;
    const def = f.default === null || f.default === false ? "" : ` (default: ${JSON.stringify(f.default)})`;
    const range = f.min === undefined && f.max === undefined ? "" : ` Must be ${rangeText(f)}.`;
    const suffixes = f.humanReadable ? " Takes k/m/g (10^3/10^6/10^9) and K/M/G (2^10/2^20/2^30) suffixes, as vLLM does." : "";
    lines.push(`  ${flag.padEnd(44)} ${f.help}${range}${suffixes}${def}`);
  }
  lines.push(`  ${"-h, --help".padEnd(44)} Show this help.`);
  return lines.join("\n");
}
