/**
 * The web page at `/`: a chat and a live metrics view (llama.cpp's server has a chat page at `/`; the metrics view is
 * fennec's own). build.ts bundles web-ui/client.ts into web-ui/page.html as one self-contained file that the binary
 * embeds: nothing is loaded from outside. The page only calls the public API (/v1 with the key typed into its
 * Settings, /metrics), so the page itself is open like /docs; `--disable-web-ui` leaves it out.
 */
import { Elysia } from "elysia";
import pageFile from "../../build/web-ui.html" with { type: "file" };

// with `type: "file"` Bun gives the file's path (a $bunfs path inside the binary); bun-types types every .html import
// as an HTML bundle, the other way Bun can import one
const pagePath = pageFile as unknown as string;

export const WEB_UI_PATH = "/";

export function webUiRoutes() {
  return new Elysia({ name: "web-ui" })
    .get(WEB_UI_PATH, () => new Response(Bun.file(pagePath), { headers: { "content-type": "text/html; charset=utf-8", "cache-control": "no-cache" } }), { detail: { hide: true } });
}
