// Runs a plan of GraphQL operations with a real client and prints one JSON document:
// {steps: [{results, error, completed}], closes: [{code, reason}]}.
// The plan comes on stdin: {client: graphql-ws | apollo | graphql-sse, url, token,
// singleConnection, steps: [{query, variables, take, until, hold}]}.
// Usage: node client.mjs <npm prefix holding the pinned clients>
import { createRequire } from 'node:module';
import { join } from 'node:path';

const prefix = process.argv[2];
if (!prefix) {
  console.error('usage: node client.mjs <npm prefix> < plan.json');
  process.exit(2);
}
// every package from one CommonJS graph, so graphql is loaded once
const require = createRequire(join(prefix, 'package.json'));
const UNTIL_DEADLINE_MS = 10000;
const UNTIL_PAUSE_MS = 20;

let input = '';
for await (const chunk of process.stdin) input += chunk;
const plan = JSON.parse(input);
const closes = [];
const held = []; // disposers of steps that hold their subscription until the plan ends

function describe(err) {
  if (Array.isArray(err)) return { graphql: err.map((e) => ({ message: e.message, extensions: e.extensions })) };
  if (err && typeof err.code === 'number' && 'reason' in err) return { code: err.code, reason: err.reason };
  if (err && err.response) return { message: String(err.message), status: err.response.status };
  return { message: String(err?.message ?? err), name: err?.name };
}

// a client as one function: subscribe(payload, sink) -> dispose
function graphqlWs() {
  const { createClient } = require('graphql-ws');
  const WebSocket = require('ws');
  const client = createClient({
    url: plan.url,
    webSocketImpl: WebSocket,
    connectionParams: plan.token ? { Authorization: `Bearer ${plan.token}` } : undefined,
    retryAttempts: 0,
    on: { closed: (event) => closes.push({ code: event.code, reason: event.reason }) },
  });
  return { subscribe: (payload, sink) => client.subscribe(payload, sink), dispose: () => client.dispose() };
}

function graphqlSse() {
  const { createClient } = require('graphql-sse');
  const client = createClient({
    url: plan.url,
    singleConnection: plan.singleConnection,
    headers: plan.token ? { Authorization: `Bearer ${plan.token}` } : {},
    retryAttempts: 0,
  });
  return { subscribe: (payload, sink) => client.subscribe(payload, sink), dispose: () => client.dispose() };
}

function apollo() {
  const { ApolloClient, InMemoryCache, gql } = require('@apollo/client');
  const { GraphQLWsLink } = require('@apollo/client/link/subscriptions');
  const { createClient } = require('graphql-ws');
  const WebSocket = require('ws');
  const ws = createClient({
    url: plan.url,
    webSocketImpl: WebSocket,
    connectionParams: plan.token ? { Authorization: `Bearer ${plan.token}` } : undefined,
    retryAttempts: 0,
    on: { closed: (event) => closes.push({ code: event.code, reason: event.reason }) },
  });
  const client = new ApolloClient({ link: new GraphQLWsLink(ws), cache: new InMemoryCache() });
  function subscribe(payload, sink) {
    const query = gql(payload.query);
    const isSubscription = query.definitions.some((d) => d.operation === 'subscription');
    if (!isSubscription) {
      client
        .query({ query, variables: payload.variables ?? undefined, fetchPolicy: 'no-cache' })
        .then((result) => {
          sink.next({ data: result.data });
          sink.complete();
        }, (err) => sink.error(err));
      return () => {};
    }
    const subscription = client.subscribe({ query, variables: payload.variables ?? undefined }).subscribe({
      next: (result) => (result.error ? sink.error(result.error) : sink.next({ data: result.data })),
      error: (err) => sink.error(err),
      complete: () => sink.complete(),
    });
    return () => subscription.unsubscribe();
  }
  return { subscribe, dispose: () => { client.stop(); return ws.dispose(); } };
}

function once(client, step) {
  return new Promise((resolve) => {
    const results = [];
    let done = false;
    let dispose = null;
    const finish = (outcome) => {
      if (done) return;
      done = true;
      resolve({ results, ...outcome });
    };
    dispose = client.subscribe(
      { query: step.query, variables: step.variables ?? undefined },
      {
        next(value) {
          if (done) return;
          results.push(value);
          if (step.take && results.length >= step.take) {
            if (step.hold) held.push(() => dispose && dispose());
            else queueMicrotask(() => dispose && dispose());
            finish({ error: null, completed: false });
          }
        },
        error: (err) => finish({ error: describe(err), completed: false }),
        complete: () => finish({ error: null, completed: true }),
      },
    );
  });
}

async function until(client, step) {
  const deadline = Date.now() + UNTIL_DEADLINE_MS;
  for (;;) {
    const outcome = await once(client, step);
    const data = outcome.results[0]?.data;
    if (outcome.error || JSON.stringify(data) === JSON.stringify(step.until) || Date.now() > deadline) {
      return outcome;
    }
    await new Promise((r) => setTimeout(r, UNTIL_PAUSE_MS));
  }
}

const client = { 'graphql-ws': graphqlWs, 'graphql-sse': graphqlSse, apollo }[plan.client]();
const steps = [];
for (const step of plan.steps) {
  steps.push(await (step.until !== null && step.until !== undefined ? until(client, step) : once(client, step)));
}
for (const dispose of held) dispose();
await client.dispose();
console.log(JSON.stringify({ steps, closes }));
process.exit(0);
