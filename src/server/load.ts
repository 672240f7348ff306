/**
 * GET /load and --enable-server-load-tracking (vllm/entrypoints/openai/api_server.py: get_server_load_metrics, load_aware_call): `{"server_load": N}`, the generation requests in
 * flight. Like vLLM, the route always exists and reads 0 unless tracking is on; a request counts from its start until
 * its response has been sent in full, or the client went away (a stream counts until its last chunk or its cancel).
 */
import { Elysia } from "elysia";

export interface ServerLoad {
  /** generation requests in flight now (0 when tracking is off) */
  current(): number;
  /** runs a generation handler and counts it as in flight until its response is over */
  track<T>(handler: () => Promise<T>): Promise<T>;
}

/** A Response whose body calls `onEnd` once: after the last chunk was read, or when the reader cancels. */
function endingResponse(response: Response, onEnd: () => void): Response {
  const source = response.body;
  if (source === null) {
    onEnd();
    return response;
  }
  const reader = source.getReader();
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    onEnd();
  };
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const next = await reader.read();
        if (next.done) {
          controller.close();
          end();
        } else {
          controller.enqueue(next.value);
        }
      } catch (error) {
        end();
        controller.error(error);
      }
    },
    async cancel(reason) {
      end();
      await reader.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

export function loadRoutes(load: ServerLoad) {
  return new Elysia({ name: "server-load" }).get("/load", () => ({ server_load: load.current() }), {
    detail: { tags: ["Server"], summary: "Generation requests in flight", description: "Counted with --enable-server-load-tracking; 0 otherwise." },
  });
}

export function createServerLoad(enabled: boolean): ServerLoad {
  let inFlight = 0;
  return {
    current: () => inFlight,
    async track<T>(handler: () => Promise<T>): Promise<T> {
      if (!enabled) return handler();
      inFlight++;
      let result: T;
      try {
        result = await handler();
      } catch (error) {
        inFlight--;
        throw error;
      }
      if (result instanceof Response) return endingResponse(result, () => void inFlight--) as T;
      inFlight--;
      return result;
    },
  };
}
