import { test } from "node:test";
import assert from "node:assert/strict";
import {
  causeLabel, createBody, errorField, fireLabel, fireTime, formOf, goDuration, hookUrl, isLive, needSeconds, outcomeOf, parseList, patchBody,
  scheduleText, summary, timeZones,
} from "../src/schedules";
import { href, isListRoute, parseRoute } from "../src/route";
import type { Trigger } from "../src/types";

const cronTrigger: Trigger = {
  id: "trg_1", name: "standup", kind: "cron", cron: "0 9 * * MON-FRI", timezone: "Europe/Berlin", prompt: "Summarise\nthe day",
  enabled: true, overlap: "skip", catchup: "latest", catchup_window: 3600e9, unattended: { mode: "pause" }, rate_limit: 60,
  created_at: "2026-01-01T00:00:00Z",
};
const hook: Trigger = {
  id: "trg_2", name: "", kind: "webhook", prompt: "Review {{.url}}", enabled: true, overlap: "skip", catchup: "latest",
  catchup_window: 3600e9, unattended: { mode: "allow", allow: ["append_file", "fs.*"] }, rate_limit: 60, created_at: "2026-01-01T00:00:00Z",
};

test("route: #/triggers, not a list of threads; #/schedules (the page's old name) opens it too", () => {
  const r = parseRoute("#/triggers");
  assert.deepEqual(r, { view: "triggers" });
  assert.equal(href(r), "#/triggers");
  assert.deepEqual(parseRoute("#/schedules"), { view: "triggers" });
  assert.equal(isListRoute(r), false);
});

test("hookUrl: the origin's /hooks/{id}, the id escaped", () => {
  assert.equal(hookUrl("http://127.0.0.1:8420", "trg_1"), "http://127.0.0.1:8420/hooks/trg_1");
  assert.equal(hookUrl("https://kiln.example/", "a b"), "https://kiln.example/hooks/a%20b");
});

test("summary: the name, else the prompt's first line, cut", () => {
  assert.equal(summary(cronTrigger), "standup");
  assert.equal(summary({ name: "  ", prompt: "\n  Review the PR  \nmore" }), "Review the PR");
  assert.equal(summary({ name: "", prompt: "x".repeat(100) }, 10), "xxxxxxxxx…");
  assert.equal(summary({ name: "", prompt: "" }), "(no prompt)");
});

test("scheduleText: expression and zone, UTC without one", () => {
  assert.equal(scheduleText(cronTrigger), "0 9 * * MON-FRI (Europe/Berlin)");
  assert.equal(scheduleText({ cron: "@every 15m" }), "@every 15m (UTC)");
});

test("outcomeOf: a run waiting for a decision is waiting for action, not failed; status before the history lists it", () => {
  assert.deepEqual(outcomeOf({ status: "started", outcome: "waiting_for_action" }), { key: "waiting_for_action", label: "waiting for action", cls: "b-action" });
  assert.deepEqual(outcomeOf({ status: "started", outcome: "failed" }), { key: "failed", label: "failed", cls: "b-failed" });
  assert.deepEqual(outcomeOf({ status: "started", outcome: "succeeded" }), { key: "succeeded", label: "succeeded", cls: "b-succeeded" });
  assert.deepEqual(outcomeOf({ status: "skipped", outcome: "skipped" }), { key: "skipped", label: "skipped", cls: "" });
  assert.deepEqual(outcomeOf({ status: "started" }), { key: "started", label: "started", cls: "b-running" }, "the answer of Run now has no outcome yet");
  assert.equal(outcomeOf({ status: "started", outcome: "something_new" }).label, "something new");
  assert.equal(causeLabel("catchup"), "catch-up");
  assert.equal(causeLabel("manual"), "run now");
  assert.equal(causeLabel("other"), "other");
});

test("isLive: what can still change is read again", () => {
  for (const o of ["running", "queued", "buffered", "waiting_for_action"]) assert.equal(isLive({ status: "started", outcome: o }), true, o);
  assert.equal(isLive({ status: "started" }), true);
  for (const o of ["succeeded", "failed", "cancelled", "skipped"]) assert.equal(isLive({ status: "started", outcome: o }), false, o);
});

test("fireTime: in the trigger's zone, 24-hour, with its abbreviation; UTC without a zone or with an unknown one", () => {
  const t = "2026-12-03T08:00:00Z";
  assert.equal(fireTime(t, "Europe/Berlin"), "Thu, 3 Dec 2026, 09:00 CET");
  assert.equal(fireTime("2026-07-03T07:00:00Z", "Europe/Berlin"), "Fri, 3 Jul 2026, 09:00 CEST");
  assert.equal(fireTime(t, ""), "Thu, 3 Dec 2026, 08:00 UTC");
  assert.equal(fireTime(t, "Mars/Olympus"), "Thu, 3 Dec 2026, 08:00 UTC");
  assert.equal(fireTime("2026-12-03T08:00:30Z", "UTC", true), "Thu, 3 Dec 2026, 08:00:30 UTC");
  assert.equal(fireTime("soon", "UTC"), "soon");
});

test("needSeconds: only when a time falls off a whole minute", () => {
  assert.equal(needSeconds(["2026-12-03T09:00:00+01:00", "2026-12-04T09:00:00+01:00"]), false);
  assert.equal(needSeconds(["2026-12-03T09:00:00+01:00", "2026-12-03T09:00:15+01:00"]), true);
  assert.equal(needSeconds([]), false);
});

test("goDuration: nanoseconds as the Go duration the API takes", () => {
  assert.equal(goDuration(3600e9), "1h");
  assert.equal(goDuration(5400e9), "1h30m");
  assert.equal(goDuration(90e9), "1m30s");
  assert.equal(goDuration(30e9), "30s");
  assert.equal(goDuration(86400e9 * 2), "48h");
  assert.equal(goDuration(0), "");
  assert.equal(goDuration(undefined), "");
});

test("parseList: commas, spaces or lines", () => {
  assert.deepEqual(parseList(" append_file, fs.*\nweb_fetch  "), ["append_file", "fs.*", "web_fetch"]);
  assert.deepEqual(parseList(""), []);
});

test("createBody: a cron trigger's fields, defaults left to the server", () => {
  const f = { ...formOf(undefined, "Europe/Berlin"), name: " standup ", cron: " 0 9 * * MON-FRI ", prompt: "hi" };
  assert.deepEqual(createBody(f), { kind: "cron", prompt: "hi", enabled: true, name: "standup", cron: "0 9 * * MON-FRI", timezone: "Europe/Berlin" });
  const g = { ...f, timezone: "", enabled: false, model: "scripted", overlap: "allow_all", catchup: "all", catchupWindow: "30m", unattended: "reject", secret: "ignored-for-cron" };
  assert.deepEqual(createBody(g), {
    kind: "cron", prompt: "hi", enabled: false, name: "standup", model: "scripted", overlap: "allow_all", unattended: { mode: "reject" },
    cron: "0 9 * * MON-FRI", catchup: "all", catchup_window: "30m",
  });
});

test("createBody: a webhook's secret and rate limit, no cron fields; a bad rate limit throws", () => {
  const f = { ...formOf(undefined, "Europe/Berlin"), kind: "webhook" as const, cron: "left over", prompt: "Review {{.url}}", unattended: "allow", allow: "append_file fs.*" };
  assert.deepEqual(createBody(f), { kind: "webhook", prompt: "Review {{.url}}", enabled: true, unattended: { mode: "allow", allow: ["append_file", "fs.*"] } });
  assert.deepEqual(createBody({ ...f, secret: "s".repeat(32), rateLimit: "10" }).secret, "s".repeat(32));
  assert.equal(createBody({ ...f, rateLimit: "10" }).rate_limit, 10);
  assert.throws(() => createBody({ ...f, rateLimit: "1.5" }), /whole number/);
  assert.throws(() => createBody({ ...f, rateLimit: "0" }), /whole number/);
});

test("formOf and patchBody: an unchanged form patches nothing; only the changed fields go", () => {
  assert.deepEqual(patchBody(cronTrigger, formOf(cronTrigger)), {});
  assert.deepEqual(patchBody(hook, formOf(hook)), {});
  assert.equal(formOf(cronTrigger).catchupWindow, "1h");
  assert.equal(formOf(hook).allow, "append_file, fs.*");
  assert.deepEqual(patchBody(cronTrigger, { ...formOf(cronTrigger), cron: "0 10 * * *", enabled: false }), { cron: "0 10 * * *", enabled: false });
  assert.deepEqual(patchBody(cronTrigger, { ...formOf(cronTrigger), timezone: "" }), { timezone: "" }, "back to UTC");
  assert.deepEqual(patchBody(cronTrigger, { ...formOf(cronTrigger), catchupWindow: "2h", unattended: "reject" }), { catchup_window: "2h", unattended: { mode: "reject" } });
  assert.deepEqual(patchBody(hook, { ...formOf(hook), allow: "append_file" }), { unattended: { mode: "allow", allow: ["append_file"] } });
  assert.deepEqual(patchBody(hook, { ...formOf(hook), secret: "x".repeat(40), rateLimit: "60" }), { secret: "x".repeat(40) }, "the same rate limit is not sent");
  assert.deepEqual(patchBody(hook, { ...formOf(hook), cron: "ignored", rateLimit: "5" }), { rate_limit: 5 });
});

test("errorField: the field a 400's reason is about", () => {
  assert.equal(errorField(`cron: end of range (61) above maximum (59): "61"`), "cron");
  assert.equal(errorField(`timezone: unknown IANA time zone "Mars/X"`), "timezone");
  assert.equal(errorField("prompt must not be empty"), "prompt");
  assert.equal(errorField("secret must be at least 32 characters"), "secret");
  assert.equal(errorField("catchup_window must be a duration such as 1h or 30m"), "catchupWindow");
  assert.equal(errorField("rate_limit must be between 1 and 100000 per minute"), "rateLimit");
  assert.equal(errorField(`unattended mode "allow" needs the tools to allow in unattended.allow`), "allow");
  assert.equal(errorField("the server is shutting down"), "");
});

test("timeZones: UTC first, no duplicate", () => {
  const z = timeZones();
  assert.equal(z[0], "UTC");
  assert.equal(z.filter((x) => x === "UTC").length, 1);
  assert.ok(z.includes("Europe/Berlin"));
});

test("fireLabel: a trigger's thread by its fire, in the trigger's zone; a webhook's by what it was sent; else by its creation", () => {
  const at = "2026-12-03T08:00:00Z";
  assert.deepEqual(fireLabel({ id: "trg_1", kind: "cron", timezone: "Europe/Berlin", occurrence_id: "occ_1", cause: "schedule", scheduled_at: at, summary: "write the report" }, "2026-12-03T08:00:01Z"),
    { when: "Thu, 3 Dec 2026, 09:00 CET", how: "", summary: "", at });
  const byHand = fireLabel({ id: "trg_1", kind: "cron", timezone: "Europe/Berlin", occurrence_id: "occ_2", cause: "manual", scheduled_at: "2026-12-03T08:00:07.5Z" }, at);
  assert.equal(byHand.when, "Thu, 3 Dec 2026, 09:00:07 CET", "seconds off a whole minute");
  assert.equal(byHand.how, "run now");
  const hook = fireLabel({ id: "trg_2", kind: "webhook", occurrence_id: "occ_3", cause: "webhook", scheduled_at: at, summary: "Review PR #42: fix the parser" }, at);
  assert.deepEqual([hook.when, hook.how, hook.summary], ["Thu, 3 Dec 2026, 08:00 UTC", "webhook", "Review PR #42: fix the parser"]);
  // Without the fire (an older server, a deleted trigger): the thread's creation, with seconds.
  assert.deepEqual(fireLabel(undefined, "2026-12-03T08:00:00Z", "UTC"), { when: "Thu, 3 Dec 2026, 08:00:00 UTC", how: "", summary: "", at: "2026-12-03T08:00:00Z" });
});
