// A basic node-redis session against brisk-kv, run by test_kv_node.py:
// node session.mjs PORT. node-redis 6 speaks RESP3 by default (HELLO 3 on
// connect, CLIENT SETINFO); a second client speaks RESP2. Every reply is
// checked here; the last line printed is "ok <checks>" on success.
import assert from 'node:assert/strict';
import { createClient } from 'redis';

const port = Number(process.argv[2]);
let checks = 0;
const eq = (got, want, what) => {
  assert.deepEqual(got, want, what);
  checks++;
};

async function session(resp) {
  const client = createClient({ socket: { host: '127.0.0.1', port }, RESP: resp });
  client.on('error', (err) => {
    console.error(`RESP${resp} client error:`, err);
    process.exitCode = 1;
  });
  await client.connect();
  const p = `node${resp}:`;

  eq(await client.ping(), 'PONG', 'PING');
  eq(await client.set(`${p}str`, 'hello'), 'OK', 'SET');
  eq(await client.get(`${p}str`), 'hello', 'GET');
  eq(await client.get(`${p}missing`), null, 'GET missing');
  eq(await client.set(`${p}str`, 'x', { NX: true }), null, 'SET NX on an existing key');
  eq(await client.set(`${p}ttl`, 'v', { EX: 100 }), 'OK', 'SET EX');
  const ttl = await client.ttl(`${p}ttl`);
  assert.ok(ttl > 90 && ttl <= 100, `TTL ${ttl}`);
  checks++;
  eq(await client.incr(`${p}n`), 1, 'INCR');
  eq(await client.incrBy(`${p}n`, 41), 42, 'INCRBY');
  eq(await client.mGet([`${p}str`, `${p}n`, `${p}missing`]), ['hello', '42', null], 'MGET');

  eq(await client.hSet(`${p}h`, { a: '1', b: '2', c: '3' }), 3, 'HSET');
  eq(await client.hGetAll(`${p}h`), { a: '1', b: '2', c: '3' }, 'HGETALL');
  eq(await client.hGet(`${p}h`, 'b'), '2', 'HGET');
  eq(await client.hIncrBy(`${p}h`, 'a', 9), 10, 'HINCRBY');
  eq(await client.hGetAll(`${p}nohash`), {}, 'HGETALL missing');

  eq(await client.rPush(`${p}l`, ['a', 'b', 'c']), 3, 'RPUSH');
  eq(await client.lRange(`${p}l`, 0, -1), ['a', 'b', 'c'], 'LRANGE');
  eq(await client.sAdd(`${p}s`, ['x', 'y']), 2, 'SADD');
  eq((await client.sMembers(`${p}s`)).sort(), ['x', 'y'], 'SMEMBERS');
  eq(await client.zAdd(`${p}z`, [{ score: 2, value: 'two' }, { score: 1, value: 'one' }]), 2,
     'ZADD');
  eq(await client.zRange(`${p}z`, 0, -1), ['one', 'two'], 'ZRANGE');
  eq(await client.zScore(`${p}z`, 'two'), 2, 'ZSCORE');

  // a pipeline: many commands in one write, replies in order
  const piped = await client.multi()
    .set(`${p}p1`, 'a')
    .append(`${p}p1`, 'b')
    .get(`${p}p1`)
    .del(`${p}p1`)
    .exists(`${p}p1`)
    .execAsPipeline();
  eq(piped, ['OK', 2, 'ab', 1, 0], 'pipeline');
  // and a transaction
  const tx = await client.multi().incr(`${p}tx`).incr(`${p}tx`).get(`${p}tx`).exec();
  eq(tx, [1, 2, '2'], 'MULTI/EXEC');

  // errors come back as Redis's
  await assert.rejects(client.incr(`${p}str`), /ERR value is not an integer or out of range/);
  checks++;
  await assert.rejects(client.lPush(`${p}h`, 'x'), /WRONGTYPE Operation against a key/);
  checks++;

  // scan the keys of this session
  const seen = [];
  for await (const keys of client.scanIterator({ MATCH: `${p}*`, COUNT: 100 }))
    seen.push(...keys);
  eq(seen.sort(), [`${p}h`, `${p}l`, `${p}n`, `${p}s`, `${p}str`, `${p}ttl`, `${p}tx`, `${p}z`],
     'SCAN');

  // Pub/Sub on a second connection: push messages in RESP3, arrays in RESP2
  const sub = client.duplicate();
  sub.on('error', (err) => {
    console.error(`RESP${resp} subscriber error:`, err);
    process.exitCode = 1;
  });
  await sub.connect();
  const got = [];
  let wake;
  const arrived = (n) => new Promise((resolve) => {
    wake = () => got.length >= n && resolve();
    wake();
  });
  await sub.subscribe(`${p}chan`, (message, channel) => { got.push([channel, message]); wake?.(); });
  await sub.pSubscribe(`${p}pat:*`, (message, channel) => { got.push([channel, message]); wake?.(); });
  eq(await client.publish(`${p}chan`, 'first'), 1, 'PUBLISH to a channel');
  eq(await client.publish(`${p}pat:x`, 'second'), 1, 'PUBLISH to a pattern');
  eq(await client.publish(`${p}elsewhere`, 'lost'), 0, 'PUBLISH to nobody');
  await arrived(2);
  eq(got, [[`${p}chan`, 'first'], [`${p}pat:x`, 'second']], 'messages received');
  eq(await client.pubSubNumSub(`${p}chan`), { [`${p}chan`]: 1 }, 'PUBSUB NUMSUB');
  await sub.unsubscribe(`${p}chan`);
  await sub.pUnsubscribe(`${p}pat:*`);
  eq(await client.publish(`${p}chan`, 'gone'), 0, 'PUBLISH after UNSUBSCRIBE');
  await sub.close();

  const info = await client.clientInfo();
  eq(info.libName, 'node-redis', 'CLIENT SETINFO lib-name reached the server');
  eq(info.resp, resp, `the connection speaks RESP${resp}`);
  await client.close();
}

await session(3);
await session(2);
console.log(`ok ${checks}`);
