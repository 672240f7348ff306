/**
 * Build step for the web page (run by build.ts): bundles client.ts (and what it imports) for the browser, minified,
 * and inlines it into page.html, giving one self-contained file, build/web-ui.html, that the binary embeds.
 * @example await buildWebUiPage("build/web-ui.html")
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const SCRIPT_TAG = '<script type="module" src="/ui/client.ts"></script>';

export async function buildWebUiPage(outPath: string): Promise<number> {
  const result = await Bun.build({ entrypoints: [join(import.meta.dir, "client.ts")], target: "browser", minify: true, format: "esm" });
  if (!result.success) throw new Error(`web page script: ${result.logs.map(String).join("; ")}`);
  const script = (await result.outputs[0]!.text()).replaceAll("</script", "<\\/script");
  const page = readFileSync(join(import.meta.dir, "page.html"), "utf8");
  if (!page.includes(SCRIPT_TAG)) throw new Error(`page.html has no ${SCRIPT_TAG}`);
  const html = page.replace(SCRIPT_TAG, () => `<script type="module">${script}</script>`);
  writeFileSync(outPath, html);
  return Buffer.byteLength(html);
}
