/**
 * Typed access to GGUF metadata, with errors that name the file and the key; and constructors for the writer that
 * keep the exact value type (llama.cpp checks some types strictly, e.g. general.alignment must be u32).
 */
import { err, ok, type Result } from "../util/result.ts";
import { GgufValueType, type GgufArray, type GgufFile, type GgufMetadataEntry, type GgufScalar } from "./gguf-file.ts";

const INTEGER_TYPES: ReadonlySet<GgufValueType> = new Set([
  GgufValueType.UINT8, GgufValueType.INT8, GgufValueType.UINT16, GgufValueType.INT16, GgufValueType.UINT32,
  GgufValueType.INT32, GgufValueType.UINT64, GgufValueType.INT64,
]);

/** "u32", "string", "array of f32" ... for error messages. */
function valueTypeName(entry: GgufMetadataEntry): string {
  const name = (t: GgufValueType) => GgufValueType[t]?.toLowerCase() ?? `type ${t}`;
  if (entry.type === GgufValueType.ARRAY) return `array of ${name((entry.value as GgufArray).elementType)}`;
  return name(entry.type);
}

function lookup(file: GgufFile, key: string): Result<GgufMetadataEntry> {
  const entry = file.metadata.get(key);
  return entry === undefined ? err(`${file.source}: missing metadata key "${key}"`) : ok(entry);
}

function wrongType(file: GgufFile, key: string, want: string, entry: GgufMetadataEntry): Result<never> {
  return err(`${file.source}: metadata key "${key}" should be ${want} but is ${valueTypeName(entry)}`);
}

/** @example getString(file, "general.architecture") // ok("llama") */
export function getString(file: GgufFile, key: string): Result<string> {
  const entry = lookup(file, key);
  if (!entry.ok) return entry;
  if (entry.value.type !== GgufValueType.STRING) return wrongType(file, key, "a string", entry.value);
  return ok(entry.value.value as string);
}

/** Any integer type whose value fits in a u32 (writers disagree on u32 vs u64 vs i32 for counts). */
export function getU32(file: GgufFile, key: string): Result<number> {
  const entry = lookup(file, key);
  if (!entry.ok) return entry;
  if (!INTEGER_TYPES.has(entry.value.type)) return wrongType(file, key, "an integer", entry.value);
  const value = Number(entry.value.value as number | bigint);
  if (value < 0 || value > 0xffffffff) return err(`${file.source}: metadata key "${key}" is ${value}, outside the u32 range`);
  return ok(value);
}

/** f32 or f64. */
export function getF32(file: GgufFile, key: string): Result<number> {
  const entry = lookup(file, key);
  if (!entry.ok) return entry;
  if (entry.value.type !== GgufValueType.FLOAT32 && entry.value.type !== GgufValueType.FLOAT64) {
    return wrongType(file, key, "a float", entry.value);
  }
  return ok(entry.value.value as number);
}

export function getBool(file: GgufFile, key: string): Result<boolean> {
  const entry = lookup(file, key);
  if (!entry.ok) return entry;
  if (entry.value.type !== GgufValueType.BOOL) return wrongType(file, key, "a bool", entry.value);
  return ok(entry.value.value as boolean);
}

/** An array, optionally of one element type. @example getArray(file, "tokenizer.ggml.tokens", GgufValueType.STRING) */
export function getArray(file: GgufFile, key: string, elementType?: GgufValueType): Result<GgufArray> {
  const entry = lookup(file, key);
  if (!entry.ok) return entry;
  if (entry.value.type !== GgufValueType.ARRAY) return wrongType(file, key, "an array", entry.value);
  const array = entry.value.value as GgufArray;
  if (elementType !== undefined && array.elementType !== elementType) {
    return wrongType(file, key, `an array of ${GgufValueType[elementType]!.toLowerCase()}`, entry.value);
  }
  return ok(array);
}

/** A missing key as ok(undefined); a present key of the wrong type is still an error. */
export function optional<T>(file: GgufFile, key: string, get: (file: GgufFile, key: string) => Result<T>): Result<T | undefined> {
  return file.metadata.has(key) ? get(file, key) : ok(undefined);
}

// ---- constructors (for the writer) ----

const scalar = (type: GgufValueType) => (value: GgufScalar): GgufMetadataEntry => ({ type, value });
export const mdU32 = scalar(GgufValueType.UINT32);
export const mdF32 = scalar(GgufValueType.FLOAT32);
export const mdBool = scalar(GgufValueType.BOOL);
export const mdString = scalar(GgufValueType.STRING);
export const mdArray = (elementType: GgufValueType, values: GgufScalar[]): GgufMetadataEntry => ({
  type: GgufValueType.ARRAY, value: { elementType, values },
});
