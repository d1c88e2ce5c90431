// Runs a peer script (hello.js or echo.js) in N worker processes with
// Node's cluster module. Usage: node cluster.js SCRIPT N [PORT] [HOST]
const cluster = require('cluster');
const path = require('path');

const [script, n] = [process.argv[2], Number(process.argv[3] || 2)];
if (cluster.isPrimary) {
  for (let i = 0; i < n; i++) cluster.fork();
  process.on('SIGTERM', () => { for (const id in cluster.workers) cluster.workers[id].kill(); process.exit(0); });
} else {
  process.argv.splice(2, 2);
  require(path.resolve(__dirname, script));
}
