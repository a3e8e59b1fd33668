// Small raw-HTTP helpers shared by the failover drills, which need control the SDKs do not give
// (Last-Event-ID, the replica header): request headers and an SSE event reader.

/** Headers of a Streamable HTTP request, for session `sid` (none before initialize). */
export const headers = (sid, extra = {}) => ({
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
  ...(sid ? { "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25" } : {}),
  ...extra,
});

/**
 * The SSE events of a fetch response, as {id, data}, until the stream ends or breaks (then
 * `broken` is set on the iterator's result holder `state`, when given).
 */
export async function* sseEvents(resp, state = {}) {
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        state.end = "ended";
        return;
      }
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const raw = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        const ev = { id: null, data: "" };
        for (const line of raw.split("\n")) {
          if (line.startsWith("id:")) ev.id = line.slice(3).trim();
          else if (line.startsWith("data:")) ev.data += line.slice(5).trimStart();
        }
        if (ev.id !== null || ev.data) yield ev;
      }
    }
  } catch (e) {
    state.end = `broken (${e.cause?.code ?? e.message})`;
  } finally {
    reader.cancel().catch(() => {});
  }
}
