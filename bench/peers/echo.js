// The Node.js twin of apps/echo/main.c. Usage: node echo.js [PORT] [HOST]
const http = require('http');
const url = require('url');

const server = http.createServer((req, res) => {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { 'Allow': 'GET, HEAD' });
    res.end('Method Not Allowed\n');
    return;
  }
  const value = url.parse(req.url, true).query.value;
  res.setHeader('Content-Type', 'text/plain');
  res.end(value ? String(value) : 'no value specified');
});

server.listen(Number(process.argv[2] || 8080), process.argv[3] || '127.0.0.1');
