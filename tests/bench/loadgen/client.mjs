// client.mjs HOST PORT MODEL CONCURRENCY SECONDS MAX_TOKENS - what an operator might write with
// Node's built-in fetch (undici): one async loop per stream, the body read as a stream, split
// into SSE events, JSON.parse per event, tokens counted from content deltas. Prints
// {"output_tokens": N, "requests": R, "seconds": S}.
const [host, port, model, concurrency, seconds, maxTokens] = process.argv.slice(2);
const url = `http://${host}:${port}/v1/completions`;
const t0 = performance.now();
const deadline = t0 + Number(seconds) * 1000;
let tokens = 0;
let requests = 0;
const body = JSON.stringify({model, prompt: 'hello '.repeat(128), max_tokens: Number(maxTokens),
                             stream: true, ignore_eos: true});

async function stream() {
  const decoder = new TextDecoder();
  while (performance.now() < deadline) {
    const controller = new AbortController();
    const res = await fetch(url, {method: 'POST', body, signal: controller.signal,
                                  headers: {'Content-Type': 'application/json'}});
    let buf = '';
    let done = false;
    try {
      for await (const chunk of res.body) {
        if (performance.now() >= deadline) { controller.abort(); break; }
        buf += decoder.decode(chunk, {stream: true});
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const event = buf.slice(0, i);
          buf = buf.slice(i + 2);
          if (!event.startsWith('data: ')) continue;
          const data = event.slice(6);
          if (data === '[DONE]') { done = true; continue; }
          for (const c of JSON.parse(data).choices || []) if (c.text) tokens++;
        }
      }
    } catch (e) {
      if (e.name !== 'AbortError') throw e;
    }
    if (!done) break;
    requests++;
  }
}

await Promise.all(Array.from({length: Number(concurrency)}, stream));
console.log(JSON.stringify({output_tokens: tokens, requests,
                            seconds: (performance.now() - t0) / 1000}));
