import { describe, expect, test } from "bun:test";
import { mediaFlags } from "../../src/command-line/media-flags.ts";
import { DEFAULT_MEDIA_SETTINGS } from "../../src/config/media-settings.ts";

describe("serve's media flags", () => {
  test("defaults: no projector, any host, no local files, 999 images, 5 s fetch timeout", () => {
    expect(mediaFlags({}, {})).toEqual({ ok: true, value: DEFAULT_MEDIA_SETTINGS });
  });

  test("--limit-mm-per-prompt in vLLM's JSON forms; other modalities only at 0", () => {
    expect(mediaFlags({ "limit-mm-per-prompt": '{"image": 2}' }, {})).toMatchObject({ ok: true, value: { maxImagesPerPrompt: 2 } });
    expect(mediaFlags({ "limit-mm-per-prompt": '{"image": {"count": 1, "width": 512}, "video": 0}' }, {})).toMatchObject({ ok: true, value: { maxImagesPerPrompt: 1 } });
    expect(mediaFlags({ "limit-mm-per-prompt": '{"audio": 1}' }, {})).toEqual({ ok: false, error: '--limit-mm-per-prompt: fennec takes images only, not audio (give "audio": 0 or leave it out)' });
    expect(mediaFlags({ "limit-mm-per-prompt": "image=2" }, {})).toEqual({ ok: false, error: `--limit-mm-per-prompt must be a JSON object such as '{"image": 2}', got image=2` });
    expect(mediaFlags({ "limit-mm-per-prompt": '{"image": -1}' }, {})).toEqual({ ok: false, error: "--limit-mm-per-prompt: the image limit must be a non-negative integer, got -1" });
  });

  test("domains, the local path (made absolute), VLLM_IMAGE_FETCH_TIMEOUT, --mmproj against --no-mmproj", () => {
    const r = mediaFlags({ "allowed-media-domains": ["example.com", "127.0.0.1"], "allowed-local-media-path": "images", mmproj: "p.gguf" }, { VLLM_IMAGE_FETCH_TIMEOUT: "2.5" });
    expect(r).toMatchObject({ ok: true, value: { allowedMediaDomains: ["example.com", "127.0.0.1"], allowedLocalMediaPath: `${process.cwd()}/images`, mmproj: "p.gguf", fetchTimeoutS: 2.5 } });
    expect(mediaFlags({}, { VLLM_IMAGE_FETCH_TIMEOUT: "soon" })).toEqual({ ok: false, error: "VLLM_IMAGE_FETCH_TIMEOUT must be a positive number of seconds, got soon" });
    expect(mediaFlags({ "mm-processor-cache-gb": 0.5 }, {})).toMatchObject({ ok: true, value: { encoderCacheBytes: 2 ** 29 } });
    expect(DEFAULT_MEDIA_SETTINGS.encoderCacheBytes).toBe(4 * 2 ** 30);
    expect(mediaFlags({ mmproj: "p.gguf", "no-mmproj": true }, {})).toEqual({ ok: false, error: "--mmproj and --no-mmproj contradict each other: give one" });
  });
});
