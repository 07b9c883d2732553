// Many subscriptions held open at once by the real clients, driven line by line: commands
// come as JSON lines on stdin, what the clients receive goes out as JSON lines on stdout
// the moment it arrives (so a test can produce, kill nodes and resume while they run).
//
// Commands:
//   {op: "subscribe", id, connection, client, query, variables}
//       client: graphql-ws | apollo | graphql-sse | graphql-sse-single; subscriptions
//       naming the same connection share one client (one WebSocket or event stream)
//   {op: "unsubscribe", id}        stop one subscription
//   {op: "close", connection}      dispose a connection's client: ok once its socket closed
//   {op: "end"}                    dispose every client and exit
// Events: {id, next}, {id, error}, {id, complete: true}, {connection, closed: {code, reason}},
// {ok: <op>} once each command is carried out, {fatal} when a command cannot be.
// Usage: node subscribers.mjs <npm prefix> <url>
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const [prefix, url] = process.argv.slice(2);
if (!prefix || !url) {
  console.error('usage: node subscribers.mjs <npm prefix> <url>');
  process.exit(2);
}
const require = createRequire(join(prefix, 'package.json'));
const { gql, ApolloClient, InMemoryCache } = require('@apollo/client');
const { GraphQLWsLink } = require('@apollo/client/link/subscriptions');
const graphqlWs = require('graphql-ws');
const graphqlSse = require('graphql-sse');
const WebSocket = require('ws');

const connections = new Map(); // name -> {subscribe(payload, sink) -> dispose, dispose()}
const running = new Map(); // subscription id -> dispose

function emit(event) {
  process.stdout.write(JSON.stringify(event) + '\n');
}

function describe(err) {
  if (Array.isArray(err)) return { graphql: err.map((e) => ({ message: e.message, extensions: e.extensions })) };
  if (err && typeof err.code === 'number' && 'reason' in err) return { code: err.code, reason: err.reason };
  return { message: String(err?.message ?? err), name: err?.name };
}

// A graphql-ws client, and how to dispose it: resolved once its socket has closed. A socket
// told to close still hands on the messages the gateway sent before it saw the close, so
// a test reading a subscription's newest token right after `close` would miss them.
function wsClient(name) {
  let closing = null; // resolves when the open socket closes
  let settle = () => {};
  const client = graphqlWs.createClient({
    url: url.replace(/^http/, 'ws'),
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    lazy: true,
    on: {
      opened: () => {
        closing = new Promise((resolve) => { settle = resolve; });
      },
      closed: (event) => {
        emit({ connection: name, closed: { code: event.code, reason: event.reason } });
        settle();
      },
    },
  });
  const dispose = async () => {
    await client.dispose(); // a socket still connecting has opened, and is told to close
    await closing;
  };
  return { client, dispose };
}

const makers = {
  'graphql-ws': (name) => {
    const { client, dispose } = wsClient(name);
    return { subscribe: (payload, sink) => client.subscribe(payload, sink), dispose };
  },
  'graphql-sse': () => sse(false),
  'graphql-sse-single': () => sse(true),
  apollo: (name) => {
    const ws = wsClient(name);
    const client = new ApolloClient({ link: new GraphQLWsLink(ws.client), cache: new InMemoryCache() });
    function subscribe(payload, sink) {
      const observable = client.subscribe({ query: gql(payload.query), variables: payload.variables });
      const subscription = observable.subscribe({
        next: (result) => (result.error ? sink.error(result.error) : sink.next({ data: result.data })),
        error: (err) => sink.error(err),
        complete: () => sink.complete(),
      });
      return () => subscription.unsubscribe();
    }
    return { subscribe, dispose: () => { client.stop(); return ws.dispose(); } };
  },
};

function sse(singleConnection) {
  const client = graphqlSse.createClient({ url: `${url}/stream`, singleConnection, retryAttempts: 0 });
  return { subscribe: (payload, sink) => client.subscribe(payload, sink), dispose: () => client.dispose() };
}

function subscribe(command) {
  let connection = connections.get(command.connection);
  if (!connection) {
    const make = makers[command.client];
    if (!make) throw new Error(`no client ${command.client}`);
    connection = make(command.connection);
    connections.set(command.connection, connection);
  }
  const id = command.id;
  const dispose = connection.subscribe(
    { query: command.query, variables: command.variables ?? undefined },
    {
      next: (value) => emit({ id, next: value }),
      error: (err) => emit({ id, error: describe(err) }),
      complete: () => emit({ id, complete: true }),
    },
  );
  running.set(id, dispose);
}

async function carryOut(command) {
  if (command.op === 'subscribe') {
    subscribe(command);
  } else if (command.op === 'unsubscribe') {
    running.get(command.id)?.();
    running.delete(command.id);
  } else if (command.op === 'close') {
    const connection = connections.get(command.connection);
    connections.delete(command.connection);
    await connection?.dispose();
  } else if (command.op === 'end') {
    for (const connection of connections.values()) await connection.dispose();
    emit({ ok: 'end' });
    process.exit(0);
  } else {
    throw new Error(`no command ${command.op}`);
  }
  emit({ ok: command.op });
}

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  try {
    await carryOut(JSON.parse(line));
  } catch (err) {
    emit({ fatal: String(err?.stack ?? err) });
  }
}
for (const connection of connections.values()) await connection.dispose();
process.exit(0);
