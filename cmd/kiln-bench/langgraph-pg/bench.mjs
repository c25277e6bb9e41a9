// LangGraph JS on PostgreSQL: the peer of core/postgres's BenchmarkEngine.
// The workload is Kiln's engine benchmark's: RUNS runs (200), each on a new
// thread, a ReAct graph whose scripted model (no network) calls the tool
// echo CALLS times (10), one call a turn, then answers: 2*CALLS+1 = 21
// super-steps a run. The graph's checkpointer is PostgresSaver on the
// database the PG* environment variables name (node-postgres reads them),
// in the schema SCHEMA, which setup() fills. For each concurrency in CONC
// (8,64) the runs go that many at a time, in batches, as Kiln's do.
// It prints one line: JSON {"results": {"concurrent-8": {...}, ...}}.
import pg from "pg";
import { StateGraph, MessagesAnnotation, START, END } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";

const RUNS = Number(process.env.RUNS ?? 200);
const CALLS = Number(process.env.CALLS ?? 10);
const CONC = (process.env.CONC ?? "8,64").split(",").map(Number);
const SCHEMA = process.env.SCHEMA ?? "langgraph_bench";

let steps = 0;

function graph() {
  const model = async ({ messages }) => {
    steps++;
    const calls = messages.filter((m) => ToolMessage.isInstance(m)).length;
    if (calls >= CALLS) return { messages: [new AIMessage({ content: "done" })] };
    const call = { id: `call_${calls}`, name: "echo", args: { i: calls }, type: "tool_call" };
    return { messages: [new AIMessage({ content: "", tool_calls: [call] })] };
  };
  const tools = async ({ messages }) => {
    steps++;
    const calls = messages.at(-1).tool_calls ?? [];
    return { messages: calls.map((c) => new ToolMessage({ content: JSON.stringify(c.args), tool_call_id: c.id, name: c.name })) };
  };
  const next = ({ messages }) => (messages.at(-1).tool_calls?.length ? "tools" : END);
  return new StateGraph(MessagesAnnotation)
    .addNode("model", model)
    .addNode("tools", tools)
    .addEdge(START, "model")
    .addConditionalEdges("model", next, ["tools", END])
    .addEdge("tools", "model");
}

const pool = new pg.Pool({ max: Math.max(...CONC) + 2 });
await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await pool.query(`CREATE SCHEMA ${SCHEMA}`);
const saver = new PostgresSaver(pool, undefined, { schema: SCHEMA });
await saver.setup();
const app = graph().compile({ checkpointer: saver });

const results = {};
for (const conc of CONC) {
  steps = 0;
  const t0 = performance.now();
  for (let i = 0; i < RUNS; i += conc) {
    const batch = [];
    for (let j = i; j < Math.min(RUNS, i + conc); j++) {
      const config = { configurable: { thread_id: `c${conc}-${j}` }, recursionLimit: 2 * CALLS + 10 };
      batch.push(app.invoke({ messages: [new HumanMessage("go")] }, config));
    }
    const outs = await Promise.all(batch);
    for (const out of outs) {
      if (out.messages.length !== 2 * CALLS + 2) throw new Error(`a run ended with ${out.messages.length} messages`);
    }
  }
  const secs = (performance.now() - t0) / 1000;
  if (steps !== RUNS * (2 * CALLS + 1)) throw new Error(`${steps} super-steps, want ${RUNS * (2 * CALLS + 1)}`);
  const { rows } = await pool.query(
    `SELECT (SELECT pg_total_relation_size('${SCHEMA}.checkpoints') + pg_total_relation_size('${SCHEMA}.checkpoint_blobs') + pg_total_relation_size('${SCHEMA}.checkpoint_writes'))::bigint AS bytes`,
  );
  results[`concurrent-${conc}`] = { steps_per_s: steps / secs, ms_per_run: (secs * 1000) / RUNS, db_bytes: Number(rows[0].bytes) };
}
await pool.query(`DROP SCHEMA ${SCHEMA} CASCADE`);
await pool.end();
console.log("JSON " + JSON.stringify({ results }));
