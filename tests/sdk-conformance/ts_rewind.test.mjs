// File checkpoints through the official TypeScript SDK: `enableFileCheckpointing`, the
// replayed prompts' uuids, and `Query.rewindFiles` (a real rewind and a dry run).
// Run by run.sh beside ts_sdk.test.mjs.

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { existsSync, mkdtempSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
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

async function start(t, scenario) {
  const tmp = mkdtempSync(join(tmpdir(), "keel-ts-rewind-"));
  const cwd = join(tmp, "work");
  mkdirSync(cwd);
  mkdirSync(join(tmp, "home"));
  const mock = spawn(KEEL_MOCK, ["--scenario", join(HERE, "scenarios", `${scenario}.json`), "--port", "0"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  t.after(() => mock.kill("SIGTERM"));
  const url = await new Promise((ok, fail) => {
    const rl = createInterface({ input: mock.stdout });
    rl.once("line", (l) => ok(l.trim()));
    mock.once("exit", (c) => fail(new Error(`keel-mock exited ${c}`)));
  });
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
    ...extra,
  });
  return { cwd, options };
}

/** A prompt stream the test feeds; it stays open (as stdin does) until `close()`. */
function channel() {
  const items = [];
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

async function untilResult(q) {
  const out = [];
  for (;;) {
    const { value, done } = await q.next();
    if (done) throw new Error(`the query ended before a result; got ${JSON.stringify(out.map((m) => m.type))}`);
    out.push(value);
    if (value.type === "result") return out;
  }
}

/** The uuid keel gave the replayed prompt `text`. */
function promptUuid(messages, text) {
  const m = messages.find(
    (m) => m.type === "user" && m.uuid && JSON.stringify(m.message.content).includes(JSON.stringify(text)),
  );
  assert.ok(m, `no replayed prompt ${text}`);
  return m.uuid;
}

test("rewindFiles restores an edit and deletes a created file", { timeout: 90_000 }, async (t) => {
  const env = await start(t, "rewind");
  const notes = join(env.cwd, "notes.txt");
  const extra = join(env.cwd, "extra.txt");
  const input = channel();
  const q = query({
    prompt: input.stream,
    options: env.options({
      enableFileCheckpointing: true,
      permissionMode: "acceptEdits",
      extraArgs: { "replay-user-messages": null },
    }),
  });
  input.send("Write the notes.");
  const first = await untilResult(q);
  input.send("Change the notes.");
  const second = await untilResult(q);
  assert.equal(readFileSync(notes, "utf8"), "two\n");
  assert.ok(existsSync(extra));

  const preview = await q.rewindFiles(promptUuid(second, "Change the notes."), { dryRun: true });
  assert.equal(preview.canRewind, true);
  assert.equal(preview.filesChanged.length, 2);
  assert.ok(existsSync(extra), "a dry run changes nothing");

  const done = await q.rewindFiles(promptUuid(second, "Change the notes."));
  assert.equal(done.canRewind, true);
  assert.equal(readFileSync(notes, "utf8"), "one\n");
  assert.ok(!existsSync(extra));

  writeFileSync(notes, "edited by hand\n");
  await assert.rejects(q.rewindFiles(promptUuid(first, "Write the notes.")), /notes\.txt changed outside keel/);
  assert.equal(readFileSync(notes, "utf8"), "edited by hand\n", "nothing was restored");
  input.close();
  for await (const _ of q) {
    // drain to the end
  }
});
