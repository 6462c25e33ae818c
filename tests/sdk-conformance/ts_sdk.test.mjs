// The official TypeScript SDK (@anthropic-ai/claude-agent-sdk from npm) drives keel against
// keel-mock. Run with `node --test tests/sdk-conformance/ts_sdk.test.mjs` after
// `npm install --prefix target/sdk-node @anthropic-ai/claude-agent-sdk` (run.sh does both).

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { start as startIn, collect, sdk, NODE_DIR, channel, untilResult } from "./harness.mjs";

const { query, tool, createSdkMcpServer } = sdk;
// zod comes with the SDK (its peer dependency): tool() takes a zod shape.
const { z } = await import(pathToFileURL(join(NODE_DIR, "node_modules", "zod", "index.js")).href);
const start = (t, scenario) => startIn(t, scenario, "keel-ts-sdk-");

function assertKeelRan(env, messages) {
  assert.ok(env.requests().length > 0, `keel-mock saw no request; stderr: ${env.stderr.join("")}`);
  const init = messages.find((m) => m.type === "system" && m.subtype === "init");
  assert.ok(init, "system/init arrived");
  assert.ok("keel_version" in init, "system/init came from keel");
}

const texts = (messages) =>
  messages.filter((m) => m.type === "assistant").flatMap((m) => m.message.content.filter((b) => b.type === "text").map((b) => b.text));

const toolResults = (messages) =>
  messages
    .filter((m) => m.type === "user" && Array.isArray(m.message.content))
    .flatMap((m) => m.message.content.filter((b) => b.type === "tool_result"));

test("plain query", { timeout: 90_000 }, async (t) => {
  const env = await start(t, "text");
  const messages = await collect(query({ prompt: "Say hi.", options: env.options({ maxTurns: 3 }) }));
  assertKeelRan(env, messages);
  assert.deepEqual(texts(messages), ["Hello from keel-mock."]);
  const result = messages.at(-1);
  assert.equal(result.type, "result");
  assert.equal(result.subtype, "success");
  assert.equal(result.result, "Hello from keel-mock.");
});

test("tool round trip", { timeout: 90_000 }, async (t) => {
  const env = await start(t, "bash_echo");
  const messages = await collect(
    query({ prompt: "Run echo hi.", options: env.options({ allowedTools: ["Bash"], maxTurns: 5 }) }),
  );
  assertKeelRan(env, messages);
  const results = toolResults(messages);
  assert.equal(results.length, 1);
  assert.match(JSON.stringify(results[0].content), /hi/);
  assert.equal(messages.at(-1).subtype, "success");
});

test("canUseTool denies", { timeout: 90_000 }, async (t) => {
  const env = await start(t, "touch");
  const asked = [];
  const input = channel("Create made_by_tool.txt with the Bash tool.");
  const q = query({
    prompt: input.stream,
    options: env.options({
      canUseTool: async (toolName, toolInput, ctx) => {
        asked.push([toolName, toolInput.command, ctx.toolUseID]);
        return { behavior: "deny", message: "Denied by the TS test." };
      },
    }),
  });
  const messages = await untilResult(q);
  input.close();
  assertKeelRan(env, messages);
  assert.deepEqual(asked.map((a) => a.slice(0, 2)), [["Bash", "touch made_by_tool.txt"]]);
  const results = toolResults(messages);
  assert.equal(results.length, 1);
  assert.equal(results[0].is_error, true);
  assert.match(JSON.stringify(results[0].content), /Denied by the TS test\./);
  assert.ok(!existsSync(join(env.cwd, "made_by_tool.txt")), "a denied command must not run");
});

test("PreToolUse hook blocks", { timeout: 90_000 }, async (t) => {
  const env = await start(t, "touch");
  const input = channel("Create made_by_tool.txt with the Bash tool.");
  const q = query({
    prompt: input.stream,
    options: env.options({
      allowedTools: ["Bash"],
      hooks: {
        PreToolUse: [
          {
            matcher: "Bash",
            hooks: [
              async () => ({
                hookSpecificOutput: {
                  hookEventName: "PreToolUse",
                  permissionDecision: "deny",
                  permissionDecisionReason: "blocked by the TS hook",
                },
              }),
            ],
          },
        ],
      },
    }),
  });
  const messages = await untilResult(q);
  input.close();
  assertKeelRan(env, messages);
  const results = toolResults(messages);
  assert.equal(results.length, 1);
  assert.match(JSON.stringify(results[0].content), /blocked by the TS hook/);
  assert.ok(!existsSync(join(env.cwd, "made_by_tool.txt")), "a blocked command must not run");
});

test("setPermissionMode and setModel", { timeout: 90_000 }, async (t) => {
  const env = await start(t, "write_file");
  const input = channel();
  const q = query({ prompt: input.stream, options: env.options() });
  await q.setPermissionMode("acceptEdits");
  await q.setModel("claude-keel-ts-model");
  await assert.rejects(q.setPermissionMode("no-such-mode"), /Cannot set permission mode/);
  input.send("Write written.txt.");
  const messages = await untilResult(q);
  input.close();
  assertKeelRan(env, messages);
  const init = messages.find((m) => m.type === "system" && m.subtype === "init");
  assert.equal(init.permissionMode, "acceptEdits");
  assert.equal(init.model, "claude-keel-ts-model");
  assert.equal(readFileSync(join(env.cwd, "written.txt"), "utf8"), "hello from the model\n");
  assert.ok(env.requests().every((r) => r.body.model === "claude-keel-ts-model"));
});

test("multi-turn conversation and interrupt receipt", { timeout: 90_000 }, async (t) => {
  const env = await start(t, "two_turns");
  const input = channel("The first question.");
  const q = query({ prompt: input.stream, options: env.options() });
  const first = await untilResult(q);
  assertKeelRan(env, first);
  assert.deepEqual(texts(first), ["First answer."]);
  await q.interrupt(); // idle: a truthful receipt, nothing stopped
  input.send("And the second question.");
  const second = await untilResult(q);
  input.close();
  assert.deepEqual(texts(second), ["Second answer."]);
  assert.equal(first.at(-1).session_id, second.at(-1).session_id);
  assert.deepEqual(env.requests()[1].body.messages.map((m) => m.role), ["user", "assistant", "user"]);
});

// ---- Tools the host program defines in-process (createSdkMcpServer) ----

async function runCalc(t, handler, extraEnv = {}) {
  const env = await start(t, "sdk_tool");
  const calc = createSdkMcpServer({
    name: "calc",
    version: "1.0.0",
    tools: [tool("add", "Adds two numbers.", { a: z.number(), b: z.number() }, handler)],
  });
  const opts = env.options({ mcpServers: { calc }, allowedTools: ["mcp__calc__add"], maxTurns: 5 });
  Object.assign(opts.env, extraEnv);
  const input = channel("Add 2 and 3.");
  const q = query({ prompt: input.stream, options: opts });
  const messages = await untilResult(q);
  input.close();
  return { env, messages };
}

test("an in-process tool is called and answers", { timeout: 90_000 }, async (t) => {
  const { env, messages } = await runCalc(t, async ({ a, b }) => ({
    content: [{ type: "text", text: `the sum is ${a + b}` }],
  }));
  assertKeelRan(env, messages);
  const init = messages.find((m) => m.type === "system" && m.subtype === "init");
  assert.deepEqual(init.mcp_servers, [{ name: "calc", status: "connected" }]);
  assert.ok(init.tools.includes("mcp__calc__add"), JSON.stringify(init.tools));
  const results = toolResults(messages);
  assert.equal(results.length, 1);
  assert.notEqual(results[0].is_error, true);
  assert.match(JSON.stringify(results[0].content), /the sum is 5/);
  assert.match(JSON.stringify(env.requests()[1].body.messages), /the sum is 5/);
  assert.equal(messages.at(-1).subtype, "success");
});

test("an in-process tool that throws gives the model an error", { timeout: 90_000 }, async (t) => {
  const { env, messages } = await runCalc(t, async () => {
    throw new Error("the host cannot add today");
  });
  assertKeelRan(env, messages);
  const results = toolResults(messages);
  assert.equal(results.length, 1);
  assert.equal(results[0].is_error, true);
  assert.match(JSON.stringify(results[0].content), /the host cannot add today/);
  assert.equal(messages.at(-1).subtype, "success");
});

test("an in-process tool that never answers hits the deadline", { timeout: 90_000 }, async (t) => {
  const started = Date.now();
  const { messages } = await runCalc(t, () => new Promise(() => {}), { MCP_TOOL_TIMEOUT: "2000" });
  assert.ok(Date.now() - started < 60_000);
  const results = toolResults(messages);
  assert.equal(results.length, 1);
  assert.equal(results[0].is_error, true);
  assert.match(JSON.stringify(results[0].content), /MCP_TOOL_TIMEOUT/);
  assert.equal(messages.at(-1).subtype, "success");
});

test("structured output (outputFormat json_schema) after a tool call", { timeout: 90_000 }, async (t) => {
  const env = await start(t, "structured");
  const schema = {
    type: "object",
    properties: {
      file_count: { type: "number" },
      kind: { enum: ["python", "rust"] },
      detail: { type: "object", properties: { has_tests: { type: "boolean" } }, required: ["has_tests"] },
    },
    required: ["file_count", "kind"],
  };
  const messages = await collect(
    query({
      prompt: "Count the files.",
      options: env.options({ allowedTools: ["Bash"], outputFormat: { type: "json_schema", schema } }),
    }),
  );
  assertKeelRan(env, messages);
  const result = messages.at(-1);
  assert.equal(result.type, "result");
  assert.equal(result.subtype, "success");
  const want = { file_count: 3, kind: "python", detail: { has_tests: true } };
  assert.deepEqual(result.structured_output, want);
  assert.deepEqual(JSON.parse(result.result), want);
  assert.equal(env.requests().length, 2, "no request after the accepted call");
  assert.ok(!env.stderr.join("").includes("not supported"), env.stderr.join(""));
});

test("a structured output that keeps failing the schema is a typed error", { timeout: 90_000 }, async (t) => {
  const env = await start(t, "structured_invalid");
  const schema = { type: "object", properties: { file_count: { type: "number" }, kind: { enum: ["python", "rust"] } }, required: ["file_count", "kind"] };
  const seen = [];
  const opts = env.options({ outputFormat: { type: "json_schema", schema } });
  opts.env = { ...opts.env, MAX_STRUCTURED_OUTPUT_RETRIES: "2" };
  try {
    for await (const m of query({ prompt: "Count the files.", options: opts })) seen.push(m);
  } catch {
    // the SDK may raise after an error result; the result is what matters
  }
  const result = seen.find((m) => m.type === "result");
  assert.ok(result, "a result arrived");
  assert.equal(result.subtype, "error_max_structured_output_retries");
  assert.equal(result.is_error, true);
  assert.equal(result.structured_output, undefined);
});
