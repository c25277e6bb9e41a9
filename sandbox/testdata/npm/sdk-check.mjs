// Drives Kiln's sandbox API with OpenSandbox's own JavaScript SDK,
// unmodified: node sdk-check.mjs <server host:port> <image> [runtime].
// Prints one JSON line of what it saw (and the timings), for the Go test
// that runs it to check; exits non-zero when a step throws.
import { createHash, randomBytes } from "node:crypto";
import { ConnectionConfig, Sandbox } from "@alibaba-group/opensandbox";

const [domain, image, runtime] = process.argv.slice(2);
const config = new ConnectionConfig({
  domain, protocol: "http", apiKey: process.env.OPEN_SANDBOX_API_KEY, requestTimeoutSeconds: 60, disableMetrics: true,
});
const out = {};
const t0 = Date.now();
const sandbox = await Sandbox.create({
  connectionConfig: config, image, timeoutSeconds: 600, resource: { cpu: "1", memory: "256Mi" },
  env: { KIT_GREETING: "hello from env" },
  extensions: runtime ? { "kiln.runtime": runtime } : {},
});
out.createMs = Date.now() - t0;
out.id = sandbox.id;
// Output comes as execd frames it: one message per line, without the
// line ending (an empty line is "\n"; a last line without an ending too).
const texts = (ms) => ms.map((m) => m.text);
const ok = await sandbox.commands.run("echo hi; echo $KIT_GREETING; echo oops >&2");
out.stdout = texts(ok.logs.stdout);
out.stderr = texts(ok.logs.stderr);
// The wasm and js boxes have no printf: there, no "\r\n" and no last line
// without an ending.
const lines = await sandbox.commands.run(runtime === "docker"
  ? "printf 'one\\ntwo\\r\\n\\nthree'; printf 'e1\\ne2\\n' >&2"
  : "echo one; echo two; echo; echo three; echo e1 >&2; echo e2 >&2");
out.lines = texts(lines.logs.stdout);
out.errLines = texts(lines.logs.stderr);
out.exitCode = ok.exitCode;
const t1 = Date.now();
await sandbox.commands.run("true");
out.roundTripMs = Date.now() - t1;
const bad = await sandbox.commands.run("exit 3");
out.failedExitCode = bad.exitCode;
// 1 MiB of text (readFile decodes UTF-8), and back byte for byte.
const data = randomBytes(768 * 1024).toString("base64");
const want = createHash("sha256").update(data).digest("hex");
await sandbox.files.writeFiles([{ path: "/tmp/kit-1mib.txt", data, mode: 644 }]);
const back = await sandbox.files.readFile("/tmp/kit-1mib.txt");
out.fileBytes = Buffer.byteLength(back);
out.fileSame = createHash("sha256").update(back).digest("hex") === want;
if (runtime === "js") {
  // A command line that is one js command runs JavaScript in the sandbox.
  const js = await sandbox.commands.run(`js -e "const fs = require('fs'); console.log(process.env.KIT_GREETING, fs.readFileSync('/tmp/kit-1mib.txt', 'utf8').length); process.exit(5)"`);
  out.jsStdout = texts(js.logs.stdout);
  out.jsExitCode = js.exitCode;
}
const info = await sandbox.getInfo();
out.state = info.status?.state;
try {
  await sandbox.pause();
  out.pausedState = (await sandbox.getInfo()).status?.state;
  await sandbox.resume();
  out.resumedState = (await sandbox.getInfo()).status?.state;
} catch (e) {
  // A runtime without pause says so (501) and the sandbox runs on.
  out.pauseError = String(e?.statusCode ?? e?.message ?? e);
}
const again = await sandbox.commands.run("echo after resume");
out.afterResume = texts(again.logs.stdout);
const renewed = await sandbox.renew(3600);
out.renewed = !!renewed.expiresAt;
await sandbox.kill();
try {
  await sandbox.getInfo();
  out.afterKill = "still there";
} catch (e) {
  out.afterKill = String(e?.statusCode ?? e?.status ?? e?.message ?? e);
}
await sandbox.close();
console.log(JSON.stringify(out));
