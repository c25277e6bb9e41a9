// Sandbox figures through OpenSandbox's own JavaScript SDK:
//   node bench.mjs <server host:port> <image> <runtime>
// The server has a warm pool for this image, at least as large as a
// phase's creates; before each phase this waits until the server's
// metrics show every warm pool full again. It measures create latency
// serial (100 creates) and at 10 at once (50 creates, P99), successes out
// of 100 at 20 and at 50 at once, the command round trip of commands.run
// and a 1 MiB upload. A create is Sandbox.create: the create call, both
// endpoint lookups and the readiness check; each client kills its
// sandbox before its next create. Prints one JSON line of figures in
// milliseconds.
import { randomBytes } from "node:crypto";
import { ConnectionConfig, Sandbox } from "@alibaba-group/opensandbox";

const [domain, image, runtime] = process.argv.slice(2);
// Each sandbox gets a connection of its own: a failed Sandbox.create
// closes the transport of its ConnectionConfig, which would cut off the
// other sandboxes' requests on a shared one.
const connection = () => new ConnectionConfig({ domain, protocol: "http", requestTimeoutSeconds: 120, disableMetrics: true });
const options = () => ({
  connectionConfig: connection(), image, entrypoint: ["tail", "-f", "/dev/null"], timeoutSeconds: 600,
  resource: { cpu: "1", memory: "256Mi" }, extensions: { "kiln.runtime": runtime }, healthCheckPollingInterval: 5,
});
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};

// create makes one sandbox and kills it, returning its create time, or
// null when it failed.
async function create() {
  const t = performance.now();
  let sb;
  try {
    sb = await Sandbox.create(options());
  } catch (e) {
    process.stderr.write(`create failed: ${e?.message ?? e}\n`);
    return null;
  }
  const ms = performance.now() - t;
  await sb.kill().catch(() => {});
  await sb.close().catch(() => {});
  return ms;
}

// burst runs n creates, at most conc at once.
async function burst(n, conc) {
  const times = [];
  let next = 0;
  await Promise.all(Array.from({ length: conc }, async () => {
    while (next < n) {
      next++;
      const ms = await create();
      if (ms !== null) times.push(ms);
    }
  }));
  return times;
}

// refilled returns once every warm pool of the server is full, as its
// kiln_sandbox_pool_size and kiln_sandbox_pool_waiting metrics tell.
async function refilled() {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const text = await (await fetch(`http://${domain}/metrics`)).text();
    const read = (name) => new Map([...text.matchAll(new RegExp(`^${name}\\{pool="([^"]*)"[^}]*\\} (\\S+)$`, "gm"))].map((m) => [m[1], +m[2]]));
    const size = read("kiln_sandbox_pool_size"), waiting = read("kiln_sandbox_pool_waiting");
    if (size.size === 0) throw new Error("the server reports no warm pool");
    if ([...size].every(([pool, n]) => waiting.get(pool) === n)) return;
    if (Date.now() > deadline) throw new Error("the warm pool did not refill in 2 minutes");
    await new Promise((r) => setTimeout(r, 200));
  }
}

const out = {};
const phase = (name) => process.stderr.write(`bench: ${name}\n`);
await refilled();
phase("serial creates");
const serial = await burst(100, 1);
out.createP50 = pct(serial, 50);
out.serialOK = serial.length;
await refilled();
phase("10 at once");
const ten = await burst(50, 10);
out.createP99at10 = pct(ten, 99);
out.createP50at10 = pct(ten, 50);
for (const c of [20, 50]) {
  await refilled();
  phase(`${c} at once`);
  out[`ok${c}`] = (await burst(100, c)).length;
}
await refilled();
phase("command round trips");
const sb = await Sandbox.create(options());
const rt = [];
for (let i = 0; i < 100; i++) {
  const t = performance.now();
  await sb.commands.run("true");
  rt.push(performance.now() - t);
}
out.commandP50 = pct(rt, 50);
phase("uploads");
const data = randomBytes(1 << 20);
const up = [];
for (let i = 0; i < 10; i++) {
  const t = performance.now();
  await sb.files.writeFiles([{ path: `/tmp/up-${i}.bin`, data }]);
  up.push(performance.now() - t);
}
out.uploadP50 = pct(up, 50);
await sb.kill();
await sb.close();
console.log(JSON.stringify(out));
