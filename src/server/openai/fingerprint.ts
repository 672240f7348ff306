/**
 * `system_fingerprint`: vLLM's default `--fingerprint-mode full` writes
 * `vllm-<version>-<8 hex of a config hash>`; fennec writes `fennec-<version>-<8 hex>` over what shapes the answers
 * (model, its name, context length), so a client can tell when the backend configuration changed.
 * @example systemFingerprint({ servedModelName: "stories260K", modelPath: "embedded:stories260K", maxModelLen: 512 }) // "fennec-0.2.0-1a2b3c4d"
 */
import { createHash } from "node:crypto";
import pkg from "../../../package.json" with { type: "json" };

export interface FingerprintInput {
  readonly servedModelName: string;
  readonly modelPath: string;
  readonly maxModelLen: number;
}

export function systemFingerprint(input: FingerprintInput): string {
  const config = JSON.stringify([pkg.version, input.modelPath, input.servedModelName, input.maxModelLen]);
  return `fennec-${pkg.version}-${createHash("sha256").update(config).digest("hex").slice(0, 8)}`;
}
