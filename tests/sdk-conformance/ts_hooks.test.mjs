// Hook callbacks registered through the official TypeScript SDK for several events: keel asks
// the host (`hook_callback`) for each and applies its answers. Run by run.sh beside
// ts_sdk.test.mjs.

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { existsSync, mkdtempSync, mkdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, "..", "..");
const KEEL = process.env.KEEL_BIN ?? join(REPO, "target", "debug", "keel");
const KEEL_MOCK = process.env.KEEL_MOCK_BIN ?? join(REPO, "target", "debug", "keel-mock");
const NODE_DIR = process.env.KEEL_SDK_NODE_DIR ?? join(REPO, "target", "sdk-node");
const SDK = join(NODE_DIR, "node_modules", "@anthropic-ai", "claude-agent-sdk", "sdk.mjs");
const { query } = await import(pathToFileURL(SDK).href);

/** A keel-mock serving `scenario`, a scratch directory, and SDK options pointing at keel. */
async function start(t, scenario) {
  const tmp = mkdtempSync(join(tmpdir(), "keel-ts-hooks-"));
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

/** A prompt stream that stays open (as stdin does, which hook callbacks need) until `close()`. */
function channel(first) {
  let closed = false;
  let wake = null;
  async function* gen() {
    yield { type: "user", message: { role: "user", content: first }, parent_tool_use_id: null, session_id: "" };
    while (!closed) await new Promise((r) => (wake = r));
  }
  return {
    stream: gen(),
    close: () => {
      closed = true;
      wake?.();
    },
  };
}

async function untilResult(q) {
  const out = [];
  for (;;) {
    const { value, done } = await q.next();
    if (done) throw new Error(`the query ended before a result; got ${JSON.stringify(out.map((m) => m.type))}`);
    out.push(value);
    if (value.type === "result") return out;
  }
}

test("hook callbacks for many events", { timeout: 90_000 }, async (t) => {
  const env = await start(t, "hook_events");
  const seen = [];
  const record = (answer) => async (input) => {
    seen.push(input);
    return typeof answer === "function" ? answer(input) : answer;
  };
  const input = channel("Read the file, then create asked.txt.");
  const q = query({
    prompt: input.stream,
    options: env.options({
      hooks: {
        UserPromptSubmit: [{ hooks: [record({ hookSpecificOutput: { hookEventName: "UserPromptSubmit", additionalContext: "context from the TS host" } })] }],
        PostToolUseFailure: [{ matcher: "Read|Grep", hooks: [record({ hookSpecificOutput: { hookEventName: "PostToolUseFailure", additionalContext: "the TS host saw the failure" } })] }],
        PermissionRequest: [{ matcher: "^Bash$", hooks: [record({ hookSpecificOutput: { hookEventName: "PermissionRequest", decision: { behavior: "allow" } } })] }],
        Stop: [{ hooks: [record((i) => (i.stop_hook_active ? {} : { decision: "block", reason: "look at it once more" }))] }],
      },
    }),
  });
  const messages = await untilResult(q);
  input.close();
  assert.deepEqual(
    seen.map((i) => i.hook_event_name),
    ["UserPromptSubmit", "PostToolUseFailure", "PermissionRequest", "Stop", "Stop"],
  );
  assert.equal(seen[1].tool_name, "Read");
  assert.ok(seen[1].error, "PostToolUseFailure carries the error");
  assert.deepEqual(seen.slice(3).map((i) => i.stop_hook_active), [false, true]);
  assert.ok(existsSync(join(env.cwd, "asked.txt")), "the host's PermissionRequest answer allowed the call");
  const requests = env.requests();
  assert.equal(requests.length, 4);
  assert.match(JSON.stringify(requests[0].body.messages), /context from the TS host/);
  assert.match(JSON.stringify(requests[3].body.messages), /look at it once more/);
  const result = messages.at(-1);
  assert.equal(result.subtype, "success");
  assert.equal(result.is_error, false);
});
