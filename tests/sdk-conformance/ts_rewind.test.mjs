// File checkpoints through the official TypeScript SDK: `enableFileCheckpointing`, the
// replayed prompts' uuids, and `Query.rewindFiles` (a real rewind and a dry run).
// Run by run.sh beside ts_sdk.test.mjs.

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { start as startIn, sdk, channel, untilResult } from "./harness.mjs";

const { query } = sdk;
const start = (t, scenario) => startIn(t, scenario, "keel-ts-rewind-");

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
