// What every TypeScript SDK test here shares: where keel, keel-mock and the installed SDK are,
// and a keel-mock serving a scenario with SDK options that point at keel. Not a test file
// itself (run.sh runs *.test.mjs).

import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { existsSync, mkdtempSync, mkdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, "..", "..");
export const KEEL = process.env.KEEL_BIN ?? join(REPO, "target", "debug", "keel");
const KEEL_MOCK = process.env.KEEL_MOCK_BIN ?? join(REPO, "target", "debug", "keel-mock");
export const NODE_DIR = process.env.KEEL_SDK_NODE_DIR ?? join(REPO, "target", "sdk-node");
const SDK = join(NODE_DIR, "node_modules", "@anthropic-ai", "claude-agent-sdk", "sdk.mjs");
/** The installed SDK's module (`query`, `tool`, `createSdkMcpServer`, ...). */
export const sdk = await import(pathToFileURL(SDK).href);

/** A keel-mock serving `scenario` (scenarios/<name>.json), a scratch directory, and SDK
 * options pointing at keel; `requests()` are the model requests keel-mock received. */
export async function start(t, scenario, prefix = "keel-ts-sdk-") {
  const tmp = mkdtempSync(join(tmpdir(), prefix));
  const cwd = join(tmp, "work");
  mkdirSync(cwd);
  mkdirSync(join(tmp, "home"));
  const log = join(tmp, "mock.jsonl");
  const mock = spawn(KEEL_MOCK, ["--scenario", join(HERE, "scenarios", `${scenario}.json`), "--port", "0", "--log", log], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  t.after(() => mock.kill("SIGTERM"));
  const url = await new Promise((ok, fail) => {
    const rl = createInterface({ input: mock.stdout });
    rl.once("line", (l) => ok(l.trim()));
    mock.once("exit", (c) => fail(new Error(`keel-mock exited ${c}`)));
  });
  const stderr = [];
  const options = (extra = {}) => ({
    pathToClaudeCodeExecutable: KEEL,
    cwd,
    env: {
      ...process.env,
      ANTHROPIC_BASE_URL: url,
      ANTHROPIC_API_KEY: "sk-test-keel",
      HOME: join(tmp, "home"),
      KEEL_HOME: join(tmp, "keel-home"),
      IS_SANDBOX: "1",
    },
    stderr: (s) => stderr.push(s),
    ...extra,
  });
  const requests = () =>
    existsSync(log)
      ? readFileSync(log, "utf8")
          .split("\n")
          .filter((l) => l.trim())
          .map((l) => JSON.parse(l))
          .filter((r) => r.path.startsWith("/v1/messages") && !r.path.includes("count_tokens"))
      : [];
  return { cwd, options, requests, stderr };
}

/** Every message of a query, in order. */
export async function collect(q) {
  const out = [];
  for await (const m of q) out.push(m);
  return out;
}

/** A prompt stream the test feeds, starting with `first`; it stays open (as stdin does, which
 * hook callbacks and rewinds need) until `close()`. */
export function channel(...first) {
  const items = [...first];
  let wake = null;
  let closed = false;
  async function* gen() {
    for (;;) {
      while (items.length) {
        yield { type: "user", message: { role: "user", content: items.shift() }, parent_tool_use_id: null, session_id: "" };
      }
      if (closed) return;
      await new Promise((r) => (wake = r));
    }
  }
  const poke = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  return {
    stream: gen(),
    send: (text) => {
      items.push(text);
      poke();
    },
    close: () => {
      closed = true;
      poke();
    },
  };
}

/** Messages up to the next result. (`break` in a for-await loop would close the query.) */
export async function untilResult(q) {
  const out = [];
  for (;;) {
    const { value, done } = await q.next();
    if (done) throw new Error(`the query ended before a result; got ${JSON.stringify(out.map((m) => m.type))}`);
    out.push(value);
    if (value.type === "result") return out;
  }
}
