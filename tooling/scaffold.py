"""`statefed init DIR`: a project of your own to start from.

It writes three files into DIR and overwrites none:
- `views.py`, the catalogue (STATEFED_CATALOGUE=views:CATALOGUE): orders counted per
  customer, and each customer's last order;
- `produce.py`, a demo producer of orders, keyed as statefed routes them (murmur2, as Kafka's
  Java producer);
- `README.md`, the steps from there to a query answering from your own view.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

__all__ = ["FILES", "ScaffoldError", "scaffold"]

VIEWS = '''\
"""Your views: the catalogue statefed serves when STATEFED_CATALOGUE=views:CATALOGUE.

Every View is one queryable view over one keyed Kafka topic. Its kind says what a key
holds (count, windowed_count, latest, history, aggregate); its GraphQL names are yours.
See the docs, "Your own views", for every setting: key types, Avro and JSON Schema values,
windows, aggregates, where, scopes.
"""

from schema import FieldType, ValueField, View, ViewKind

CATALOGUE = [
    # how many orders each customer placed: customerOrders(customer:), topCustomers(limit:)
    View(
        name="orders_per_customer",
        topic="orders",
        kind=ViewKind.COUNT,
        key_field="customer",
        type_name="CustomerOrders",
        point_field="customerOrders",
        many_field="customerOrdersMany",
        top_field="topCustomers",
        event_time_field="timestamp",
    ),
    # each customer's newest order by event time: lastOrder(customer:)
    View(
        name="last_order",
        topic="orders",
        kind=ViewKind.LATEST,
        key_field="customer",
        type_name="LastOrder",
        point_field="lastOrder",
        many_field="lastOrders",
        event_time_field="timestamp",
        value_fields=(ValueField("item"), ValueField("amount", FieldType.FLOAT)),
    ),
]
'''

PRODUCE = '''\
"""A demo producer: orders to topic `orders`, keyed by customer, JSON values.

    python produce.py          # 1,000 orders to Kafka at STATEFED_BOOTSTRAP (127.0.0.1:9092)
    python produce.py 5000

Any producer of yours works the same: key = the customer, value = a JSON object with the
fields views.py reads. A librdkafka client (Python, Go, .NET, Node) must set
`partitioner: murmur2_random`, which places keys as Kafka's Java producer does and as
statefed routes them; its own default does not. `enable.idempotence` keeps a retried
record from landing twice (a count view would count it twice).
"""

import json
import os
import random
import sys
import time

from confluent_kafka import Producer

ITEMS = ["book", "lamp", "mug", "plant", "poster", "teapot"]
CUSTOMERS = 50


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    bootstrap = os.environ.get("STATEFED_BOOTSTRAP", "127.0.0.1:9092")
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "enable.idempotence": True,
        }
    )
    refused: list[str] = []

    def delivered(err, msg) -> None:  # the broker's answer, for each order
        if err is not None:
            refused.append(f"{msg.key().decode()}: {err.str()}")

    now_ms = int(time.time() * 1000)
    rng = random.Random()
    for _ in range(count):
        customer = f"customer-{rng.randrange(CUSTOMERS):03d}"
        order = {
            "timestamp": now_ms - rng.randrange(600_000),  # within the last 10 minutes
            "item": rng.choice(ITEMS),
            "amount": round(rng.uniform(3, 120), 2),
        }
        value = json.dumps(order).encode()
        while True:
            try:
                producer.produce("orders", value, customer.encode(), on_delivery=delivered)
                break
            except BufferError:  # the client's queue is full: let it send, then again
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(30)
    if left or refused:
        raise SystemExit(
            f"{count - left - len(refused)} of {count} orders delivered; {len(refused)} "
            f"refused (first: {refused[:1]}), {left} unanswered in 30 s: is Kafka up at "
            f"{bootstrap}, with a topic orders (statefed topics creates it)?"
        )
    print(f"{count} orders produced to topic orders at {bootstrap}")


if __name__ == "__main__":
    main()
'''

README = """\
# Your views, served by statefed

`views.py` declares the views; `produce.py` writes demo orders. From this directory:

**1.** Run statefed with your views: Kafka, the pipeline, two nodes and the gateway (Ctrl-C
stops them all). It prints the GraphiQL URL when everything is up.

```sh
export STATEFED_CATALOGUE=views:CATALOGUE
statefed demo
```

**2.** In a second shell, in this directory, produce orders with the Python statefed runs
in (where the producer's Kafka client is):

```sh
source <activate>
python produce.py
```

**3.** Ask for the top customers (or open http://127.0.0.1:8100/graphql):

```sh
curl -s http://127.0.0.1:8100/graphql -H 'content-type: application/json' \\
  -d '{"query": "{ topCustomers(limit: 3) { customer count } }"}'
```

Then make the views yours: edit `views.py` (`statefed schema` prints the GraphQL schema it
gives, and refuses views that clash), point `produce.py` or your own producers at your
topics, and run step 1 again.
"""


FILES = {"views.py": VIEWS, "produce.py": PRODUCE, "README.md": README}


class ScaffoldError(RuntimeError):
    """The project could not be written; the message says why and what to do."""


def _with_activation(text: str) -> str:
    """`text` with its `source <activate>` line naming the activation script of the virtual
    environment statefed runs in (its `.venv`), or without that line outside one."""
    script = Path(sys.prefix) / "bin" / "activate"
    if not script.exists():
        return text.replace("source <activate>\n", "")
    return text.replace("<activate>", shlex.quote(str(script)))


def scaffold(directory: Path) -> list[Path]:
    """Write FILES into `directory` (made if missing); ScaffoldError, before writing
    anything, if one of them is there already."""
    taken = [directory / name for name in FILES if (directory / name).exists()]
    if taken:
        names = ", ".join(str(path) for path in taken)
        raise ScaffoldError(
            f"{names} already exist: statefed init overwrites nothing; pick an empty "
            f"directory (`statefed init myproject`)"
        )
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in FILES.items():
        path = directory / name
        path.write_text(_with_activation(text))
        written.append(path)
    return written
