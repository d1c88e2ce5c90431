// The Bun twin of apps/hello/main.c (Bun.serve). Usage: bun bun-hello.js [PORT] [HOST]
Bun.serve({
  port: Number(process.argv[2] || 8080),
  hostname: process.argv[3] || '127.0.0.1',
  fetch() {
    return new Response('Hello World', { headers: { 'Content-Type': 'text/plain' } });
  },
});
