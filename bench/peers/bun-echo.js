// The Bun twin of apps/echo/main.c (Bun.serve). Usage: bun bun-echo.js [PORT] [HOST]
Bun.serve({
  port: Number(process.argv[2] || 8080),
  hostname: process.argv[3] || '127.0.0.1',
  fetch(req) {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return new Response('Method Not Allowed\n', { status: 405, headers: { 'Allow': 'GET, HEAD' } });
    }
    const values = new URL(req.url).searchParams.getAll('value');
    const body = values.length ? values.join(',') : 'no value specified';
    return new Response(body, { headers: { 'Content-Type': 'text/plain' } });
  },
});
