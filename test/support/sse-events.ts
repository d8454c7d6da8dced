// A raw SSE reader that keeps each event's `id:` (the SDK's parseSseStream drops it): what a
// client resuming with Last-Event-ID needs to see.

export type SseEvent = { id: string | undefined; data: string };

export async function* readSseEvents(response: Response): AsyncGenerator<SseEvent> {
  if (!response.body) throw new Error("the response has no body");
  let buffer = "";
  let id: string | undefined;
  let data: string[] = [];
  for await (const chunk of response.body.pipeThrough(new TextDecoderStream())) {
    buffer += chunk;
    for (;;) {
      const end = buffer.indexOf("\n");
      if (end < 0) break;
      const line = buffer.slice(0, end).replace(/\r$/, "");
      buffer = buffer.slice(end + 1);
      if (line === "") {
        if (data.length > 0) yield { id, data: data.join("\n") };
        id = undefined;
        data = [];
      } else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      else if (line.startsWith("id:")) id = line.slice(3).replace(/^ /, "");
    }
  }
}
