/**
 * Every CLI flag once: name, kind, default, the commands that take it, its help text, and for vLLM's flags fennec has
 * no use for, their fate (docs/vllm-flags.md is generated from this table). parse-args.ts turns argv into the untyped
 * Options bag; each command reads it once as its typed config (serve-config.ts, generate-config.ts, ...), so nothing
 * outside command-line/ sees a flag name.
 * To add a flag: add one row to FLAGS (keep rows grouped by the command family that owns them; give numbers their
 * min/max there, so every command rejects a bad value with the same one line) and one field to its command's config.
 */
import type { Command, FlagSpec, FlagValue } from "./flag-spec.ts";

export type { Command, FlagKind, FlagSpec, FlagValue, VllmFate } from "./flag-spec.ts";
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

const ALL: readonly Command[] = ["serve", "generate", "tokenize", "run-batch", "chat", "bench throughput", "bench latency", "inspect", "pull"];
/** commands that run the model (generate runs it in-process, without the engine's scheduler or pipelines) */
const MODEL: readonly Command[] = ["serve", "generate", "run-batch", "chat", "bench throughput", "bench latency"];
const ENGINE: readonly Command[] = ["serve", "run-batch", "chat", "bench throughput", "bench latency"];
const BENCH_SERVE: readonly Command[] = ["bench serve"];
const BENCH_OFFLINE: readonly Command[] = ["bench throughput", "bench latency"];

import { VLLM_FATES } from "./vllm-fates.ts";

/** serve and run-batch: the commands that take vLLM's engine flags as `vllm serve` / `vllm run-batch` do */
const ANY = ["serve", "run-batch"] as const satisfies readonly Command[];

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
  { name: "max-num-seqs", kind: "int", default: null, min: 1, commands: ENGINE, help: "Maximum number of sequences running in one engine step. Default: vLLM's on CPU, 128 (serve, chat, run-batch) or 256 (bench throughput / latency: vLLM's LLM class), at most --max-num-batched-tokens." },
  { name: "max-num-batched-tokens", kind: "int", default: null, min: 1, humanReadable: true, commands: ENGINE, help: "Token budget of one engine step (prefill chunks plus decode tokens). Default: vLLM's on CPU, 2048 (serve, chat, run-batch) or 4096 (bench throughput / latency: vLLM's LLM class); for a model that attends bidirectionally (an embedding model such as EmbeddingGemma, each prompt computed in one step) the larger of that and --max-model-len, as vLLM without chunked prefill." },
  { name: "max-model-len", kind: "int", default: null, min: 1, humanReadable: true, commands: ENGINE, help: "Maximum prompt plus output length. Default: the model's context length." },
  { name: "block-size", kind: "int", default: 16, min: 1, commands: ENGINE, help: "Tokens per KV cache block." },
  { name: "kv-cache-memory", vllmName: "kv-cache-memory-bytes", kind: "int", metavar: "bytes", default: null, min: 1, humanReadable: true, commands: ENGINE, help: "Bytes for the KV cache (vLLM: --kv-cache-memory-bytes, also accepted), spread with the layers over the wasm32 memories the model needs (the start-up memory line says how). Default: a share of free memory, at most 1 GiB, capped by what max-num-seqs x max-model-len needs." },
  { name: "num-gpu-blocks-override", kind: "int", default: null, min: 1, commands: ENGINE, help: "Use exactly this many KV cache blocks, whatever --gpu-memory-utilization / --kv-cache-memory-bytes size (vLLM's testing flag)." },
  { name: "no-enable-prefix-caching", kind: "bool", default: false, commands: ENGINE, help: "Turn prefix caching off (on by default)." },
  { name: "disable-hybrid-kv-cache-manager", kind: "bool", default: false, commands: ENGINE, help: "Give every layer one KV block table (vLLM's flag). By default a model with sliding-window layers (gemma3) gets vLLM's hybrid KV cache manager: its sliding and full-attention layers keep separate block tables over one pool, and the blocks behind a sliding layer's window go back to the pool, so the same memory holds more tokens. Turned off by itself (one log line) with a KV connector (--kv-offloading-size, --kv-transfer-config), a draft model, or a model spread over several wasm32 memories." },
  { name: "kv-cache-dtype", kind: "string", default: "auto", commands: ENGINE, help: "Data type of the KV cache: auto / float16 (f16), or fp8 / fp8_e4m3 (vLLM's names for an 8-bit cache; fennec stores int8 with one scale per token row, llama.cpp's q8_0 rule: half the KV memory and the bytes attention reads; WASM kernels only, not --device webgpu). vLLM's other values are refused." },
  // KV offload tier under the prefix cache (vLLM's native offload and SimpleCPUOffloadConnector; docs in README)
  { name: "kv-offloading-size", kind: "float", metavar: "GiB", default: null, min: 0, commands: ENGINE, help: "Size of the KV cache offloading buffer in GiB: full prefix blocks are kept in host memory outside the kernels' memory and loaded back instead of recomputed (vLLM's native offload, OffloadingConnector; SimpleCPUOffloadConnector with VLLM_USE_SIMPLE_KV_OFFLOAD=1). Off when not given." },
  { name: "kv-offloading-backend", kind: "string", default: "native", commands: ENGINE, choices: ["native", "lmcache"], help: "Backend of --kv-offloading-size: native (fennec's host-memory tier); lmcache is refused (no LMCache server)." },
  { name: "kv-transfer-config", kind: "string", metavar: "json", default: null, commands: ENGINE, help: 'KV connector as a JSON object, vLLM\'s keys: {"kv_connector":"SimpleCPUOffloadConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":N,"lazy_offload":false,"kv_offload_backend":"cpu"|"disk","disk_path":"/path","disk_capacity_bytes":N,"use_page_cache":false}} or OffloadingConnector with cpu_bytes_to_use; or prefill/decode across instances: {"kv_connector":"NixlConnector","kv_role":"kv_producer"|"kv_consumer"|"kv_both","engine_id":"...","kv_ip":"host","kv_port":N,"kv_load_failure_policy":"fail"|"recompute","kv_connector_extra_config":{"kv_lease_duration":30}} (fennec\'s own TCP transport under vLLM\'s name, not the NIXL library; kv_ip/kv_port default to VLLM_NIXL_SIDE_CHANNEL_HOST/PORT, localhost:5600).' },
  // KV cache events for KV-aware routers (vLLM KVEventsConfig; llm-d's precise prefix-cache scorer)
  { name: "kv-events-config", kind: "string", metavar: "json", default: null, commands: ENGINE, help: 'Publish KV cache events (BlockStored / BlockRemoved / AllBlocksCleared) over ZeroMQ as vLLM does, a JSON object of vLLM\'s keys: {"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5558","buffer_steps":10000,"hwm":100000,"max_queue_size":100000,"topic":"kv@<pod>@<model>"}. Block hashes are vLLM\'s (--prefix-caching-hash-algo, seeded by PYTHONHASHSEED); VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0 sends the 32-byte digests.' },
  { name: "prefix-caching-hash-algo", kind: "string", default: "sha256", commands: ENGINE, choices: ["sha256", "sha256_cbor", "xxhash", "xxhash_cbor"], help: "Hash of the prefix-cache blocks, as vLLM: sha256 (of Python pickle bytes) or sha256_cbor (of canonical CBOR, reproducible across languages); xxhash / xxhash_cbor are refused. Set PYTHONHASHSEED for hashes that agree across restarts." },
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
  { name: "enable-lora", kind: "bool", default: false, commands: ["serve"], help: "Serve LoRA adapters (llama.cpp's GGUF adapter files, convert_lora_to_gguf.py): a request's `model` naming an adapter runs the base model with it, and requests with different adapters and none share a step. POST /v1/load_lora_adapter and /v1/unload_lora_adapter work with VLLM_ALLOW_RUNTIME_LORA_UPDATING=true." },
  { name: "lora-modules", kind: "list", metavar: "name=path", default: null, commands: ["serve"], help: "LoRA adapters served at start-up, each name=path or vLLM's JSON form {\"name\": ..., \"path\": ..., \"base_model_name\": ...}; requests pick one by its name as `model`. Needs --enable-lora." },
  { name: "max-loras", kind: "int", default: null, min: 1, commands: ["serve"], help: "Adapters one engine step may hold (each in its own slot of the kernels' memory); a request whose adapter would be one more waits. Default 1 (vLLM's)." },
  { name: "max-lora-rank", kind: "int", default: null, min: 1, commands: ["serve"], help: "The largest adapter rank served (vLLM's choices: 1, 8, 16, 32, 64, 128, 256, 320, 512); a larger adapter is refused when loaded. Default 16." },
  { name: "max-cpu-loras", kind: "int", default: null, min: 1, commands: ["serve"], help: "Parsed adapters kept in host memory, least recently used dropped first (at least --max-loras). Default: --max-loras." },
  { name: "enable-sleep-mode", kind: "bool", default: false, commands: ["serve"], help: "vLLM's sleep mode: with VLLM_SERVER_DEV_MODE=1, POST /sleep?level=1|2 stops the engine (its KV cache, activations and loaded weights leave the process; level 1 first keeps the model file's bytes in host memory so that POST /wake_up reads no file, level 2 keeps nothing), POST /wake_up starts it again with the same answers, GET /is_sleeping. Without this flag /sleep answers 400, as vLLM's engine refuses to sleep when sleep mode was not enabled." },
  // vLLM flags that mean nothing on fennec: accepted with one log line where the value changes nothing, else refused
  ...VLLM_FATES,
  // server
  { name: "host", kind: "string", metavar: "address", default: "127.0.0.1", commands: ["serve", "proxy"], help: "Address to listen on." },
  { name: "port", kind: "int", default: 8000, min: 0, max: 65535, commands: ["serve", "proxy"], help: "Port to listen on." },
  { name: "uds", kind: "string", metavar: "path", default: null, commands: ["serve"], help: "Listen on this Unix domain socket instead of --host/--port." },
  { name: "served-model-name", kind: "list", metavar: "name", default: null, commands: ["serve"], help: "Model name(s) in the API, one or more: requests may name any of them, answers and the metrics' model_name label carry the first. Default: the model argument as given (vLLM's rule), or stories260K for the embedded model." },
  // several models behind one server (Ollama's scheduler, llama-server's router mode); vLLM serves one model per process
  { name: "models", kind: "list", metavar: "model", default: null, commands: ["serve"], help: "More GGUF models this server serves besides MODEL (also given as more positional arguments), each loaded on its first request under its file name without .gguf (and its path as given); a request's `model` picks one. A folder is its model files (not mmproj files, not the later parts of a split model). In a --config file, `models:` entries may also be mappings of a model's own flags (see docs/serving.md); on the command line, such an entry's JSON." },
  { name: "max-loaded-models", kind: "int", default: null, min: 0, commands: ["serve"], help: "With several models: at most this many loaded at once; loading another unloads the least recently used idle one (Ollama's OLLAMA_MAX_LOADED_MODELS, llama-server's --models-max). 0 or absent: no limit." },
  { name: "max-loaded-memory", kind: "int", metavar: "bytes", default: null, min: 1, humanReadable: true, commands: ["serve"], help: "With several models: the loaded models' GGUF bytes stay under this; loading another unloads least recently used idle ones first. Absent: no limit." },
  { name: "keep-alive", kind: "string", metavar: "duration", default: null, commands: ["serve"], help: "An idle model is unloaded after this (Ollama's OLLAMA_KEEP_ALIVE: seconds or a Go duration such as 5m; 0 unloads after each request, negative keeps forever); a later request loads it again. Default: 5m with several models; a single model stays loaded unless this is given or a request sends keep_alive 0. A --config `models:` entry's keep-alive, or a request's keep_alive, replaces it for that model." },
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
  { name: "enable-tokenizer-info-endpoint", kind: "bool", default: false, commands: ["serve"], help: "Serve GET /tokenizer_info: the tokenizer's config (tokenizer_class, the special tokens, model_max_length, the chat template), as vLLM." },
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
  { name: "enable-log-outputs", kind: "bool", default: false, commands: ["serve"], help: "With --enable-log-requests: also log each finished answer's text, token ids and finish reason (cut to --max-log-len)." },
  { name: "disable-log-requests", kind: "bool", default: false, commands: ["serve"], help: "Deprecated in vLLM (request logging is off by default): accepted, logs one line; use --enable-log-requests to turn it on." },
  { name: "max-log-len", kind: "int", default: null, min: 0, commands: ["serve"], help: "With --enable-log-requests: print at most this many prompt characters and token ids. Default: all." },
  // chat templates, tool calling, reasoning (vLLM's frontend flags; serve and run-batch answer chat the same way)
  { name: "chat-template", kind: "string", metavar: "path|jinja", default: null, commands: ENGINE, help: "Chat template to use instead of the model's: a file path, or the Jinja text itself (anything with {, } or a newline)." },
  { name: "chat-template-content-format", kind: "string", default: "auto", commands: ENGINE, choices: ["auto", "string", "openai"], help: "How message content reaches the template: string (text parts joined), openai (a list of {type, text} parts), or auto (detected from the template)." },
  { name: "default-chat-template-kwargs", kind: "string", metavar: "json", default: null, commands: ENGINE, help: 'JSON object of template variables for every request, e.g. \'{"enable_thinking": false}\'; a request\'s chat_template_kwargs win.' },
  { name: "trust-request-chat-template", kind: "bool", default: false, commands: ENGINE, help: "Let requests bring their own chat_template (refused otherwise)." },
  { name: "response-role", kind: "string", metavar: "role", default: "assistant", commands: ENGINE, help: "Role of the answer when the request adds a generation prompt." },
  // images in (llama.cpp's projector flags, vLLM's media flags)
  { name: "mmproj", kind: "string", metavar: "file", default: null, commands: ["serve"], help: "The model's vision projector GGUF (llama.cpp's mmproj file): chat messages may then carry image_url parts. Default: the one mmproj*.gguf beside the model, if there is exactly one." },
  { name: "no-mmproj", kind: "bool", default: false, commands: ["serve"], help: "Do not look for a projector beside the model (text only)." },
  { name: "allowed-media-domains", kind: "list", metavar: "host", default: null, commands: ["serve"], help: "Fetch http(s) image URLs only from these hosts. Default: any host." },
  { name: "allowed-local-media-path", kind: "string", metavar: "dir", default: null, commands: ["serve"], help: "Let file:// image URLs read files under this directory (refused otherwise)." },
  { name: "mm-processor-cache-gb", kind: "float", metavar: "GiB", default: null, min: 0, commands: ["serve"], help: "Size of the encoder cache (image embeddings by content hash) in GiB; 0 turns it off. Default 4, as vLLM's." },
  { name: "limit-mm-per-prompt", kind: "string", metavar: "json", default: null, commands: ["serve"], help: 'At most this many images in one prompt, as vLLM\'s JSON: \'{"image": 2}\' (default 999).' },
  { name: "enable-auto-tool-choice", kind: "bool", default: false, commands: ENGINE, help: 'Parse tool calls out of the output when tool_choice is "auto" (the default when a request has tools); needs --tool-call-parser.' },
  { name: "tool-call-parser", kind: "string", metavar: "name", default: null, commands: ENGINE, help: "How the model writes tool calls: hermes (Hermes, Qwen2.5/3), llama3_json / llama4_json (Llama 3.x), pythonic (Llama 3.2 small), mistral, qwen3_coder / qwen3_xml (Qwen3-Coder, Qwen3.5), openai (gpt-oss Harmony)." },
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
  // request tracing (vLLM: vllm/config/observability.py, vllm/engine/arg_utils.py)
  { name: "otlp-traces-endpoint", kind: "string", metavar: "url", default: null, commands: ["serve", "proxy"], help: "Send one OpenTelemetry span per request (vLLM's llm_request span and gen_ai.* attributes; the proxy's own span around both legs) to this OTLP/HTTP receiver (http://host:4318 or its full /v1/traces URL). The request's traceparent header is continued." },
  { name: "collect-detailed-traces", kind: "string", metavar: "model,worker,all", default: null, commands: ["serve"], help: "vLLM's detailed-trace modules (model, worker, all, or a comma list); needs --otlp-traces-endpoint. Checked as vLLM checks it; like vLLM V1 it adds no span attributes (fennec's request span already carries its prefill, decode and inference times)." },
  // proxy (vLLM: examples/online_serving/disaggregated_serving/disagg_proxy_demo.py --prefill / --decode)
  { name: "prefill", kind: "list", extend: true, metavar: "url", default: null, commands: ["proxy"], help: "Prefill servers, one or more (http://host:port or host:port; the flag may be repeated), used in turn: each gets the request with max_tokens 1 and kv_transfer_params {do_remote_decode: true} (required)." },
  { name: "decode", kind: "list", extend: true, metavar: "url", default: null, commands: ["proxy"], help: "Decode servers, one or more (the flag may be repeated), used in turn: each gets the original request with the kv_transfer_params its prefill server answered, and its answer (streamed or not) goes back to the client (required)." },
  { name: "upstream-timeout", kind: "int", metavar: "seconds", default: 600, min: 1, commands: ["proxy"], help: "Longest wait for a prefill answer, or for a decode server's first response bytes; past it the client gets a 504 error." },
];

/** The parsed flags of one command, by flag name: read only inside command-line/ (each command gets its typed config). */
export type Options = Readonly<Record<string, FlagValue>>;

/** Commands that take the model as their first positional argument, as `vllm serve MODEL` does. */
export const POSITIONAL_MODEL: readonly Command[] = ["serve", "inspect", "pull"];

/** Flags of one command, for --help and parsing. */
export function flagsOf(command: Command): FlagSpec[] {
  return FLAGS.filter((f) => f.commands.includes(command));
}
