// The Node.js twin of apps/hello/main.c. Usage: node hello.js [PORT] [HOST]
const http = require('http');

const server = http.createServer((req, res) => {
  res.setHeader('Content-Type', 'text/plain');
  res.end('Hello World');
});

server.listen(Number(process.argv[2] || 8080), process.argv[3] || '127.0.0.1');
