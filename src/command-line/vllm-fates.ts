/**
 * The fate of each vLLM `serve` flag fennec has no use for (docs/vllm-flags.md is this table in words): accepted with
 * one start-up line where the value cannot change anything on a CPU server, else refused (exit 2) with what to use
 * instead. vLLM's flags come from vllm/engine/arg_utils.py EngineArgs.add_cli_args (one group per config dataclass
 * in vllm/config/*.py) and vllm/entrypoints/openai/cli_args.py FrontendArgs. `default: null` so serve knows which
 * ones were given.
 */
import type { Command, FlagSpec, FlagValue } from "./flag-spec.ts";

const one = (v: FlagValue): boolean => v === 1 || v === "1";
const oneOf = (...values: string[]) => (v: FlagValue): boolean => typeof v === "string" && values.includes(v);
const ANY = ["serve", "run-batch"] as const satisfies readonly Command[];

/**
 * vLLM's serve flags that a deployment is likely to carry and fennec does not implement, with their fate
 * (docs/vllm-flags.md is this table in words). `default: null` so serve knows which ones were given.
 */
const KNOWN_FATES: readonly FlagSpec[] = [
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
  { name: "hf-overrides", kind: "string", metavar: "json", default: null, commands: ANY, help: 'Only the matryoshka keys of vLLM\'s config overrides: {"is_matryoshka": true} lets embedding requests ask for fewer `dimensions`, {"matryoshka_dimensions": [64, 128, 256]} only those (the GGUF metadata is the rest of the config: edit it with gguf-py\'s gguf_set_metadata.py).' },
];


type Kind = FlagSpec["kind"];
/** A flag whose every value changes nothing here: accepted, one start-up line saying why. */
const inert = (name: string, kind: Kind, why: string, aliases?: readonly string[]): FlagSpec => ({
  name, kind, default: null, commands: ANY, help: `Accepted, no effect: ${why}.`, fate: { noop: why }, ...(aliases ? { aliases } : {}),
});
/** A flag accepted at the values that change nothing here (`shown`), refused at any other. */
const inertAt = (name: string, kind: Kind, shown: string, accepts: (v: FlagValue) => boolean, why: string, instead: string, aliases?: readonly string[]): FlagSpec => ({
  name, kind, default: null, commands: ANY, help: `Accepted for ${shown}: ${why}.`, fate: { noop: why, accepts, refuse: instead }, ...(aliases ? { aliases } : {}),
});
/** A flag fennec cannot honour: exit 2 naming it and what to use instead. */
const refused = (name: string, kind: Kind, instead: string, aliases?: readonly string[]): FlagSpec => ({
  name, kind, default: null, commands: ANY, help: `Refused: ${instead}.`, fate: { refuse: instead }, ...(aliases ? { aliases } : {}),
});
const zero = (v: FlagValue): boolean => v === 0;
const TEXT_ONLY = "fennec's image path (--mmproj: one encoder thread, llama.cpp's preprocessing) has no such setting";
const NO_LORA = "fennec serves LoRA adapters from GGUF files on the attention and FFN matrices only (no bias, extra vocabulary, dtype or sharding options): drop the flag";
const NO_DP = "fennec runs one engine per process: run several fennec processes behind a load balancer";
const NO_EXPERT_COMMS = "one process holds every expert, there is no expert-parallel communication";
const NO_CUDA = "there are no CUDA graphs or GPU kernels to choose";

/** The rest of `vllm serve --help`: ModelConfig, LoadConfig, ParallelConfig, CacheConfig, MultiModalConfig,
 * LoRAConfig, ObservabilityConfig, SchedulerConfig, VllmConfig and FrontendArgs flags fennec does not implement. */
const MORE_FATES: readonly FlagSpec[] = [
  // ModelConfig
  refused("hf-config-path", "string", "the model's config is the GGUF file's metadata: drop the flag"),
  inert("code-revision", "string", "a GGUF file carries no Python code"),
  refused("tokenizer-revision", "string", "the tokenizer is the one inside the GGUF file: pick the file with --revision"),
  refused("rope-scaling", "string", "RoPE scaling comes from the GGUF metadata: edit it with gguf-py's gguf_set_metadata.py"),
  refused("rope-theta", "float", "RoPE theta comes from the GGUF metadata: edit it with gguf-py's gguf_set_metadata.py"),
  refused("disable-sliding-window", "bool", "fennec keeps the model's sliding window: cap the context with --max-model-len"),
  inert("disable-cascade-attn", "bool", "there is no cascade attention kernel to turn off (the output is the same either way)"),
  refused("skip-tokenizer-init", "bool", "fennec needs the GGUF file's tokenizer to serve text: send token ids in prompt if you want"),
  refused("enable-prompt-embeds", "bool", "fennec takes text or token-id prompts, not prompt embeddings"),
  inertAt("config-format", "string", "auto", (v) => v === "auto", "the config is the GGUF file's metadata", "the config is the GGUF file's metadata: give auto"),
  inertAt("model-impl", "string", "auto", (v) => v === "auto", "fennec has one implementation of each architecture", "fennec has its own implementation of each architecture: give auto"),
  inertAt("logprobs-mode", "string", "raw_logprobs", (v) => v === "raw_logprobs", "logprobs are of the model's raw distribution", "fennec returns raw_logprobs (before any sampling processor): give raw_logprobs"),
  refused("logits-processors", "list", "fennec cannot load Python logits processors: use the request's sampling fields (logit_bias, bad_words, min_tokens, ...)"),
  refused("logits-processor-pattern", "string", "fennec cannot load Python logits processors: use the request's sampling fields"),
  refused("override-attention-dtype", "string", "attention computes in float32: drop the flag"),
  refused("io-processor-plugin", "string", "fennec cannot load Python IO processor plugins: drop the flag"),
  // LoadConfig
  inertAt("safetensors-load-strategy", "string", "lazy", (v) => v === "lazy", "fennec maps a GGUF file, not safetensors", "fennec loads GGUF files, not safetensors: drop the flag"),
  refused("model-loader-extra-config", "string", "the GGUF loader takes no extra config: drop the flag"),
  inert("ignore-patterns", "list", "one GGUF file is downloaded, other files of the repository never are"),
  inert("use-tqdm-on-load", "bool", "the GGUF file is mapped without a progress bar"),
  inert("pt-load-map-location", "string", "there are no PyTorch checkpoints to map"),
  // ParallelConfig
  inertAt("decode-context-parallel-size", "int", "1", (v) => v === 1 || v === "1", "one process holds the whole KV cache", "fennec has no context parallelism: drop the flag", ["-dcp"]),
  refused("data-parallel-rank", "int", NO_DP, ["-dpn"]),
  refused("data-parallel-start-rank", "int", NO_DP, ["-dpr"]),
  inertAt("data-parallel-size-local", "int", "1", (v) => v === 1 || v === "1", "one engine per process", NO_DP, ["-dpl"]),
  refused("data-parallel-address", "string", NO_DP, ["-dpa"]),
  refused("data-parallel-rpc-port", "int", NO_DP, ["-dpp"]),
  refused("data-parallel-backend", "string", NO_DP, ["-dpb"]),
  refused("data-parallel-hybrid-lb", "bool", NO_DP),
  refused("data-parallel-external-lb", "bool", NO_DP),
  inert("enable-expert-parallel", "bool", NO_EXPERT_COMMS, ["-ep"]),
  refused("enable-eplb", "bool", `${NO_EXPERT_COMMS}: drop the flag`),
  refused("eplb-config", "string", `${NO_EXPERT_COMMS}: drop the flag`),
  inert("expert-placement-strategy", "string", NO_EXPERT_COMMS),
  inert("all2all-backend", "string", NO_EXPERT_COMMS),
  inert("enable-dbo", "bool", "dual-batch overlap hides GPU communication, which a single CPU process does not have"),
  inert("dbo-decode-token-threshold", "int", "dual-batch overlap hides GPU communication, which a single CPU process does not have"),
  inert("dbo-prefill-token-threshold", "int", "dual-batch overlap hides GPU communication, which a single CPU process does not have"),
  inert("disable-nccl-for-dp-synchronization", "bool", "there is no NCCL and no data parallelism"),
  inert("ray-workers-use-nsight", "bool", "there are no Ray workers"),
  inertAt("worker-cls", "string", "auto", (v) => v === "auto", "the engine runs in fennec's own worker thread", "fennec cannot load a Python worker class: give auto"),
  refused("worker-extension-cls", "string", "fennec cannot load a Python worker extension: drop the flag"),
  inert("enable-multimodal-encoder-data-parallel", "bool", TEXT_ONLY),
  // CacheConfig
  inert("calculate-kv-scales", "bool", "the 8-bit KV cache (--kv-cache-dtype fp8) always computes its scales as it writes, one per token row"),
  refused("kv-sharing-fast-prefill", "bool", "fennec has no KV-sharing fast prefill: drop the flag"),
  inertAt("mamba-cache-dtype", "string", "auto", (v) => v === "auto", "fennec serves no Mamba layers", "fennec serves no Mamba models: give auto"),
  inertAt("mamba-ssm-cache-dtype", "string", "auto", (v) => v === "auto", "fennec serves no Mamba layers", "fennec serves no Mamba models: give auto"),
  // MultiModalConfig
  inert("mm-processor-kwargs", "string", TEXT_ONLY),
  inert("disable-mm-preprocessor-cache", "bool", TEXT_ONLY),
  inert("mm-processor-cache-type", "string", TEXT_ONLY),
  inert("mm-shm-cache-max-object-size-mb", "int", TEXT_ONLY),
  inert("mm-encoder-tp-mode", "string", TEXT_ONLY),
  inert("mm-encoder-attn-backend", "string", TEXT_ONLY),
  inert("interleave-mm-strings", "bool", TEXT_ONLY),
  inert("media-io-kwargs", "string", TEXT_ONLY),
  inert("skip-mm-profiling", "bool", TEXT_ONLY),
  inert("video-pruning-rate", "float", TEXT_ONLY),
  inert("disable-chunked-mm-input", "bool", TEXT_ONLY),
  // LoRAConfig
  refused("enable-lora-bias", "bool", NO_LORA),
  refused("lora-extra-vocab-size", "int", NO_LORA),
  refused("lora-dtype", "string", NO_LORA),
  refused("fully-sharded-loras", "bool", NO_LORA),
  refused("default-mm-loras", "string", NO_LORA),
  // ObservabilityConfig
  inert("enable-layerwise-nvtx-tracing", "bool", "there is no NVTX on a CPU"),
  inert("cudagraph-metrics", "bool", NO_CUDA),
  inert("aggregate-engine-logging", "bool", "one engine per process: its stats line is already the aggregate"),
  // SchedulerConfig
  inert("async-scheduling", "bool", "fennec's engine thread already runs apart from the front end: it schedules and runs step N+1 while the main thread detokenizes and streams step N; there is no GPU for the scheduler to overlap with"),
  inertAt("max-num-partial-prefills", "int", "1", (v) => v === 1 || v === "1", "one prefill is chunked at a time", "fennec chunks one prefill at a time: give 1"),
  inertAt("max-long-partial-prefills", "int", "1", (v) => v === 1 || v === "1", "one prefill is chunked at a time", "fennec chunks one prefill at a time: give 1"),
  inertAt("long-prefill-token-threshold", "int", "0", zero, "a long prompt is chunked to --max-num-batched-tokens", "fennec chunks a long prompt to --max-num-batched-tokens: use that flag"),
  inertAt("num-lookahead-slots", "int", "0", zero, "speculative decoding reserves its own slots (--speculative-config)", "use --speculative-config's num_speculative_tokens"),
  refused("scheduler-cls", "string", "fennec cannot load a Python scheduler class: use --scheduling-policy fcfs|priority"),
  inertAt("stream-interval", "int", "1", (v) => v === 1 || v === "1", "every step's tokens are streamed as they come", "fennec streams every step's tokens: give 1"),
  inert("attention-backend", "string", "fennec has one attention kernel (the WASM SIMD one), there is no backend to choose"),
  inert("cuda-graph-sizes", "list", NO_CUDA),
  inert("max-cudagraph-capture-size", "int", NO_CUDA),
  // VllmConfig
  refused("ec-transfer-config", "string", `${TEXT_ONLY}: drop the flag`),
  refused("additional-config", "string", "fennec has no platform plugins to configure: drop the flag"),
  refused("profiler-config", "string", "fennec has no torch profiler: use bench latency / bench throughput"),
  // FrontendArgs
  inertAt("api-server-count", "int", "1", (v) => v === 1 || v === "1", "one HTTP server per process", "run several fennec processes behind a load balancer", ["-asc"]),
  refused("headless", "bool", NO_DP),
  refused("middleware", "list", "fennec cannot load Python ASGI middleware: put a proxy in front"),
  refused("log-config-file", "string", "fennec's log is configured by VLLM_LOGGING_LEVEL, --log-format json and --uvicorn-log-level"),
  refused("enable-ssl-refresh", "bool", "certificates are read at start-up: restart fennec to load new ones"),
  refused("h11-max-incomplete-event-size", "int", "Bun's HTTP parser applies its own limits: drop the flag"),
  refused("h11-max-header-count", "int", "Bun's HTTP parser applies its own header limits: drop the flag"),
  refused("log-error-stack", "bool", "fennec prints stack traces with VLLM_LOGGING_LEVEL=DEBUG"),
];

export const VLLM_FATES: readonly FlagSpec[] = [...KNOWN_FATES, ...MORE_FATES];
